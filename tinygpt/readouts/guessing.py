"""Read-outs of a guessing game: people guess the next token, the model's distribution answers.

Shapes: V = vocab_size, G = distinct guessed tokens. Used by the live class (everyone's guesses)
and by the solo "guess first" on the home page (one guess).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tinygpt.decoding.generation import top_p_filter
from tinygpt.readouts.sampling import sorted_distribution


@dataclass(frozen=True)
class GuessReport:
    """The class's guesses beside the model's probabilities, most guessed token first."""

    token_ids: np.ndarray  # (G,) distinct guessed tokens, most guessed first (ties: lowest id)
    counts: np.ndarray  # (G,) how many gave each
    shares: np.ndarray  # (G,) counts / answers: the share of the class that gave each
    probs: np.ndarray  # (G,) the model's probability of each
    ranks: np.ndarray  # (G,) 1 = the model's most likely token
    kept: np.ndarray  # (G,) bool: inside the top-p nucleus (sampling could pick it)
    answers: int  # sum of counts
    class_favourite: int | None  # the most guessed token (None without guesses)
    model_favourite: int  # the model's most likely token
    model_favourite_prob: float
    share_kept: float  # of the answers, the share whose token top-p kept (0 without guesses)
    top_p: float
    class_favourites: np.ndarray  # (F,) every token guessed as often as the most guessed: F > 1
    #                               is a tie (empty without guesses)


def first_token(tokenizer, text: str) -> int | None:
    """The token a typed guess stands for: the first token of its encoding (None if empty).

    "the" and " the" are different tokens: a guess is tokenized exactly as typed.
    """
    ids = tokenizer.encode(text) if text else []
    return int(ids[0]) if len(ids) else None


def guess_report(probs: np.ndarray, guess_ids: Sequence[int], counts: Sequence[int],
                 top_p: float = 1.0) -> GuessReport:
    """Score guesses (token ids with how many gave each; a token may repeat) against `probs`.

    `probs` (V,) is the model's next-token distribution. Ranks follow the same order as top-p
    (most likely first, equal probabilities: the lowest id first), and "kept" is exactly what
    tinygpt.decoding.generation's top-p filter keeps of this distribution.
    """
    p = np.asarray(probs, dtype=np.float64)  # (V,)
    ids = np.asarray(guess_ids, dtype=np.int64).reshape(-1)
    n = np.asarray(counts, dtype=np.int64).reshape(-1)
    if ids.shape != n.shape:
        raise ValueError("guess_ids and counts must have the same length")
    if ids.size and (ids.min() < 0 or ids.max() >= p.size):
        raise ValueError(f"a guessed token id is outside 0 .. {p.size - 1}")
    if (n < 0).any():
        raise ValueError("counts cannot be negative")
    totals = np.zeros(p.size, dtype=np.int64)
    np.add.at(totals, ids, n)  # the same token typed two ways counts once, summed
    distinct = np.flatnonzero(totals)  # ascending ids
    distinct = distinct[np.argsort(-totals[distinct], kind="stable")]  # (G,)
    ranked = sorted_distribution(p)
    rank = np.empty(p.size, dtype=np.int64)
    rank[ranked.order] = np.arange(1, p.size + 1)
    with np.errstate(divide="ignore"):
        kept_all = np.isfinite(top_p_filter(np.log(p), top_p))  # softmax(log p) = p
    answers = int(totals.sum())
    kept_answers = int(totals[kept_all].sum())
    return GuessReport(
        token_ids=distinct,
        counts=totals[distinct],
        shares=totals[distinct] / answers if answers else np.zeros(0),
        probs=p[distinct],
        ranks=rank[distinct],
        kept=kept_all[distinct],
        answers=answers,
        class_favourite=int(distinct[0]) if distinct.size else None,
        model_favourite=int(ranked.order[0]),
        model_favourite_prob=float(ranked.probs[0]),
        share_kept=kept_answers / answers if answers else 0.0,
        top_p=float(top_p),
        class_favourites=distinct[totals[distinct] == totals[distinct[0]]] if distinct.size
        else distinct,
    )


def guess_options(probs: np.ndarray, count: int = 8, *, seed: int = 0,
                  include: int | None = None, pool: int = 200) -> np.ndarray:
    """Tokens to offer as guesses: some of the model's likely ones mixed with plausible others,
    so the options do not give the model's top `count` away. `probs` (V,).

    Between a third and two thirds of the options come from the model's top `count`, the rest
    from its next `pool` tokens, drawn with `np.random.default_rng(seed)` (the same seed, the
    same options for everyone in a round). `include` (the text's true next token) is always
    among them. Returns (count,) distinct ids in no meaningful order (ascending).
    """
    order = sorted_distribution(np.asarray(probs, dtype=np.float64)).order  # most likely first
    count = min(count, order.size)
    rng = np.random.default_rng(seed)
    likely = int(rng.integers(max(count // 3, 1), max(2 * count // 3, 1) + 1))
    top = order[:count]
    rest = order[count:count + pool]
    chosen = list(rng.choice(top, size=likely, replace=False))
    others = min(count - likely, rest.size)
    chosen += list(rng.choice(rest, size=others, replace=False)) if others else []
    chosen += [t for t in top if t not in chosen][:count - len(chosen)]  # a tiny vocabulary
    if include is not None and include not in chosen:
        chosen[int(rng.integers(len(chosen)))] = include
    return np.sort(np.asarray(chosen, dtype=np.int64))
