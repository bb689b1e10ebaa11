"""The room against the model, on real text: who gave the true next token more probability?

A class's guesses make a distribution too. Each choice's share of the guesses, smoothed by
adding ½ to every choice's count so that a token nobody guessed still gets some probability
(and no one is infinitely wrong):

    p_room(true) = (guesses of the true token + ½) / (all guesses + ½ × number of choices)

The model's probability is its softmax for the true token. Over a lesson, each side's average
log-loss in bits, −log₂ p(true), says who predicts the text better: lower is better.

The choices are the question's own when it offers some; for a free guess, the distinct tokens
guessed with the true token among them (`choices_of`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

SMOOTHING = 0.5  # added to every choice's count


@dataclass(frozen=True)
class RoundScore:
    """One round with a true token: each side's probability for it and its log-loss (bits)."""

    room_prob: float
    model_prob: float
    room_bits: float
    model_bits: float
    answers: int
    n_choices: int


@dataclass(frozen=True)
class RunningScore:
    """The lesson so far: each side's average log-loss (bits) over `rounds` scored rounds."""

    rounds: int
    room_bits: float  # nan before the first round
    model_bits: float

    @property
    def leader(self) -> str | None:
        """"class", "model", "tie", or None before the first round."""
        if self.rounds == 0:
            return None
        if math.isclose(self.room_bits, self.model_bits, abs_tol=1e-9):
            return "tie"
        return "class" if self.room_bits < self.model_bits else "model"


def room_probability(true_count: int, total: int, n_choices: int) -> float:
    """(true_count + ½) / (total + ½ × n_choices): the room's smoothed share for the true
    token, which is one of the n_choices choices."""
    if n_choices < 1 or not 0 <= true_count <= total:
        raise ValueError("need 0 <= true_count <= total and at least one choice")
    return (true_count + SMOOTHING) / (total + SMOOTHING * n_choices)


def bits(p: float) -> float:
    """The log-loss of a probability for what happened, in bits: −log₂ p (inf for 0)."""
    return math.inf if p <= 0 else -math.log2(p)


def choices_of(counts: Mapping[int, int], true_token: int,
               offered: Sequence[int] = ()) -> tuple[int, ...]:
    """The choices a round's probabilities are spread over: the offered ones (a choice
    question) or else every token guessed; the true token always among them."""
    base = list(dict.fromkeys(offered)) if offered else [t for t, n in counts.items() if n > 0]
    return tuple(base if true_token in base else [*base, true_token])


def score_round(counts: Mapping[int, int], true_token: int, model_probs: np.ndarray,
                offered: Sequence[int] = ()) -> RoundScore:
    """Score one round: `counts` {token id: guesses}, `model_probs` (V,) the model's
    next-token distribution. With `offered` choices, guesses outside them are not counted."""
    choices = choices_of(counts, true_token, offered)
    counted = {t: n for t, n in counts.items() if t in choices}
    total = int(sum(counted.values()))
    room = room_probability(int(counted.get(true_token, 0)), total, len(choices))
    model = float(np.asarray(model_probs, dtype=np.float64)[true_token])
    return RoundScore(room, model, bits(room), bits(model), total, len(choices))


def running_score(scores: Iterable[RoundScore]) -> RunningScore:
    """Each side's average log-loss over the rounds scored so far."""
    scores = list(scores)
    if not scores:
        return RunningScore(0, math.nan, math.nan)
    return RunningScore(len(scores), sum(s.room_bits for s in scores) / len(scores),
                        sum(s.model_bits for s in scores) / len(scores))


def true_guesses(own: Mapping[int, int | None], truths: Mapping[int, int]) -> int:
    """How many true tokens one student guessed: `own` {round: their token}, `truths`
    {round: the true token} of the revealed rounds."""
    return sum(1 for number, token in own.items()
               if token is not None and truths.get(number) == token)
