"""Beam search, as Hugging Face transformers does it (`_beam_search`: scores, length penalty,
early stopping), so the same model gives the same text in both libraries.

Each step: every running beam is extended by every token; the 2 * num_beams best
continuations by summed log-probability are kept. Of these, the ones ending in EOS (or
reaching the length limit) that rank in the top num_beams become finished hypotheses, scored
sum_logprob / generated_length**length_penalty; the best num_beams that did not finish keep
running. Finished hypotheses compete for num_beams places; the best one is returned.

Every step is recorded (`BeamStep`), enough to draw the tree of what was considered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tinygpt.network.functional import log_softmax

NEG_INF_SCORE = -1.0e9  # Hugging Face's "this beam does not exist" score


# ----------------------------------------------------------------------------- records


@dataclass
class BeamCandidate:
    """One continuation considered at a beam step: beam `parent` extended by `token`."""

    rank: int  # 0 = highest score among the 2 * num_beams candidates
    parent: int  # slot of the running beam it extends (index into the previous step's beams)
    token: int
    token_logprob: float
    score: float  # sum of log-probabilities of the generated tokens, this one included
    is_eos: bool
    status: str  # "running" | "finished" | "finished_discarded" | "dropped"
    final_score: float | None = None  # score / length**length_penalty, for finished ones
    slot: int | None = None  # its slot among the next running beams, when "running"


@dataclass
class Hypothesis:
    tokens: list[int]  # generated tokens only (the prompt is not included)
    score: float  # sum of log-probabilities / length**length_penalty


@dataclass
class BeamStep:
    """Everything beam search did for one new position: enough to draw the beam tree."""

    position: int
    candidates: list[BeamCandidate]
    running: list[list[int]]  # the beams that continue (generated tokens), slot order
    running_scores: list[float]
    finished: list[Hypothesis]  # the best finished hypotheses so far (at most num_beams)
    improvement_possible: bool  # Hugging Face's early-stopping heuristic after this step




# ----------------------------------------------------------------------------- ranking


def _descending(scores: np.ndarray, k: int | None = None) -> np.ndarray:
    """Indices from highest to lowest score; equal scores keep their order (lowest index first).

    With k, only the first k of that order. np.partition finds the k-th best score in linear
    time, so only the few scores at or above it are sorted (not all num_beams * V of them).
    """
    negated = -scores
    if k is not None and k < negated.size:
        kth = np.partition(negated, k - 1)[k - 1]
        candidates = np.flatnonzero(negated <= kth)  # every score tied with the k-th comes too
        if candidates.size >= k:  # else NaN scores (they compare false): the full sort below
            return candidates[np.argsort(negated[candidates], kind="stable")][:k]
    return np.argsort(negated, kind="stable")[:k]


# ----------------------------------------------------------------------------- one step


@dataclass
class _Search:
    """The state of one beam search between steps."""

    prompt_len: int
    max_length: int  # prompt + new tokens, at most the context
    num_beams: int
    length_penalty: float
    early_stopping: bool | str
    eos: int | None
    running: np.ndarray  # (num_beams, T) prompt + generated tokens of each running beam
    running_scores: np.ndarray  # (num_beams,) summed log-probabilities of the generated tokens
    finished: list[Hypothesis] = field(default_factory=list)  # best first, at most num_beams
    improvement_possible: bool = True


def _candidates(s: _Search, logits: np.ndarray) -> tuple[list[BeamCandidate], np.ndarray]:
    """Every running beam extended by every token; the 2 * num_beams best continuations.

    logits (num_beams, V) -> (candidates best first, hits: which of them stop here).
    """
    V = logits.shape[-1]
    n_keep = 2 * s.num_beams  # HF: max(2, 1 + number of EOS ids) * num_beams
    logprobs = log_softmax(np.asarray(logits, dtype=np.float64))  # (num_beams, V)
    totals = (s.running_scores[:, None] + logprobs).reshape(-1)  # (num_beams * V,)
    best = _descending(totals, n_keep)
    parents, tokens = best // V, best % V
    is_eos = (tokens == s.eos) if s.eos is not None else np.zeros(n_keep, dtype=bool)
    hits = is_eos | (s.running.shape[1] + 1 >= s.max_length)  # the length limit stops all
    candidates = [
        BeamCandidate(
            rank=r,
            parent=int(parents[r]),
            token=int(tokens[r]),
            token_logprob=float(logprobs[parents[r], tokens[r]]),
            score=float(totals[best[r]]),
            is_eos=bool(is_eos[r]),
            status="dropped",
        )
        for r in range(n_keep)
    ]
    return candidates, hits


def _finish(s: _Search, candidates: list[BeamCandidate], hits: np.ndarray) -> None:
    """Candidates in the top num_beams that stop become hypotheses, scored
    sum_logprob / generated_length**length_penalty; the num_beams best hypotheses stay."""
    gen_len = s.running.shape[1] + 1 - s.prompt_len  # generated tokens, this one included
    pool = [(h, None) for h in s.finished]
    for r in range(s.num_beams):  # HF's top_num_beam_mask: only these may finish
        if hits[r]:
            c = candidates[r]
            c.final_score = c.score / gen_len**s.length_penalty
            c.status = "finished_discarded"
            tokens = [*s.running[c.parent, s.prompt_len :].tolist(), c.token]
            pool.append((Hypothesis(tokens, c.final_score), r))
    keep = _descending(np.array([h.score for h, _ in pool]), s.num_beams)
    s.finished = [pool[j][0] for j in keep]
    for j in keep:
        if pool[j][1] is not None:
            candidates[pool[j][1]].status = "finished"


def _continue(s: _Search, candidates: list[BeamCandidate], hits: np.ndarray) -> np.ndarray:
    """The num_beams best candidates that did not stop run on. Returns their parents' slots."""
    scores = np.array([c.score for c in candidates])
    open_scores = np.where(hits, NEG_INF_SCORE, scores)  # HF adds -1e9 to stopped ones
    chosen = _descending(open_scores, s.num_beams)
    for slot, r in enumerate(chosen):
        if not hits[r]:
            candidates[r].status = "running"
            candidates[r].slot = slot
    parents = np.array([candidates[r].parent for r in chosen], dtype=np.int64)
    tokens = np.array([candidates[r].token for r in chosen], dtype=np.int64)
    s.running = np.concatenate([s.running[parents], tokens[:, None]], axis=1)
    s.running_scores = open_scores[chosen]
    return parents


def _update_improvement(s: _Search) -> None:
    """HF's early-stopping heuristic: could a running beam still beat the worst finished one?"""
    if s.early_stopping == "never" and s.length_penalty > 0.0:
        best_length = s.max_length - s.prompt_len
    else:
        best_length = s.running.shape[1] - s.prompt_len
    best_possible = s.running_scores[0] / best_length**s.length_penalty
    if len(s.finished) == s.num_beams:
        s.improvement_possible &= bool(best_possible > s.finished[-1].score)
    elif not best_possible > NEG_INF_SCORE:
        s.improvement_possible = False


# ----------------------------------------------------------------------------- the search


def beam_search(
    next_logits,
    ids: np.ndarray,
    max_length: int,
    *,
    num_beams: int,
    length_penalty: float,
    early_stopping: bool | str,
    eos: int | None,
) -> tuple[Hypothesis, list[BeamStep]]:
    """Hugging Face's beam search (transformers' `_beam_search`) for one prompt ids (T,).

    next_logits: `first(sequences)` and `next(sequences, parents)` give the (num_beams, V)
    scores of the next position (tinygpt.decoding.generation's _NextLogits, with or without the KV
    cache).
    Continues until max_length tokens (prompt included; > T). Returns the best hypothesis
    and the history of every step.
    """
    s = _Search(
        prompt_len=len(ids), max_length=max_length, num_beams=num_beams,
        length_penalty=length_penalty, early_stopping=early_stopping, eos=eos,
        running=np.repeat(ids[None, :], num_beams, axis=0),
        # only beam 0 is real at the start, so the first step does not pick a token twice
        running_scores=np.array([0.0] + [NEG_INF_SCORE] * (num_beams - 1)),
    )
    history: list[BeamStep] = []
    logits = next_logits.first(s.running)  # (num_beams, V)
    while True:
        position = s.running.shape[1]
        candidates, hits = _candidates(s, logits)
        _finish(s, candidates, hits)
        parents = _continue(s, candidates, hits)
        _update_improvement(s)
        history.append(BeamStep(
            position=position,
            candidates=candidates,
            running=[row[s.prompt_len :].tolist() for row in s.running],
            running_scores=s.running_scores.tolist(),
            finished=[Hypothesis(list(h.tokens), h.score) for h in s.finished],
            improvement_possible=s.improvement_possible,
        ))
        all_full = len(s.finished) == num_beams and early_stopping is True
        if not s.improvement_possible or all_full or hits.all():
            return s.finished[0], history
        logits = next_logits.next(s.running, parents)
