"""Rotary positions (RoPE) taken apart: one pair of numbers of a head turning with the position,
the score of one query and one key as a function of their distance, the check that shifting
every position leaves the scores unchanged, and the scores the same q and k give unturned.

RoPE has no position table. In each head, pair j (numbers j and j + hs/2) of q and of k is
turned by the angle p · θ^(−2j/hs) at position p. A query at p and a key at p' then score

    q R(p)ᵀ · R(p') k = q · R(p' − p) k        (a rotation's transpose turns back)

which depends on p − p' only: add the same k to every position and no score changes. That is
the property `shift_check` tests live, on this prompt's own q and k, with the model's own
rotation (tinygpt.network.attention.Rotary). Everything here reads one head of one layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tinygpt.network.attention import Rotary
from tinygpt.network.functional import softmax
from tinygpt.network.model import GPT
from tinygpt.network.trace import Trace
from tinygpt.readouts.forward_pass import visible_keys

MAX_OFFSETS = 512  # offsets drawn in score_by_offset: the curve's points


def rotary_of(model: GPT, layer: int) -> Rotary:
    """The rotation of block `layer`'s attention; a model with a position table has none."""
    rotary = model.blocks[int(layer)].attn.rotary
    if rotary is None:
        raise ValueError("this model has no rotary positions: it adds a learned position "
                         "vector to each token instead")
    return rotary


def _head_vectors(model: GPT, trace: Trace, layer: int, head: int, rotated: bool):
    """(q, k) of one query head and the key head it reads, (T, hs) each, before or after the
    turn (the trace's attn.q / attn.k, or attn.q_rot / attn.k_rot)."""
    p = f"blocks.{int(layer)}.attn"
    suffix = "_rot" if rotated else ""
    kv_head = int(head) // model.config.group_size  # grouped-query attention
    return trace[f"{p}.q{suffix}"][int(head)], trace[f"{p}.k{suffix}"][kv_head]


@dataclass(frozen=True)
class RotaryPair:
    """Pair `pair` of one head's q and k at every position, before and after the turn."""

    layer: int
    head: int
    pair: int
    dims: tuple[int, int]  # the two numbers of the head that turn together: j, j + hs/2
    radians_per_position: float  # θ^(−2j/hs)
    positions_per_turn: float  # 2π / radians_per_position
    angles: np.ndarray  # (T,) position · radians_per_position
    q: np.ndarray  # (T, 2) before the turn
    q_rot: np.ndarray  # (T, 2) after: what the scores use
    k: np.ndarray  # (T, 2)
    k_rot: np.ndarray  # (T, 2)


def rotary_pair(model: GPT, trace: Trace, layer: int, head: int, pair: int) -> RotaryPair:
    """One pair of one head, read from the trace (q, k, q_rot, k_rot: the model's own)."""
    rotary = rotary_of(model, layer)
    half = rotary.head_size // 2
    if not 0 <= int(pair) < half:
        raise ValueError(f"pair must be in 0..{half - 1}, got {pair!r}")
    dims = [int(pair), int(pair) + half]
    q, k = _head_vectors(model, trace, layer, head, rotated=False)
    q_rot, k_rot = _head_vectors(model, trace, layer, head, rotated=True)
    speed = float(rotary.inv_freq[int(pair)])
    positions = np.arange(q.shape[0], dtype=np.float64)
    return RotaryPair(layer=int(layer), head=int(head), pair=int(pair), dims=(dims[0], dims[1]),
                      radians_per_position=speed, positions_per_turn=2 * np.pi / speed,
                      angles=positions * speed,
                      q=np.array(q[:, dims]), q_rot=np.array(q_rot[:, dims]),
                      k=np.array(k[:, dims]), k_rot=np.array(k_rot[:, dims]))


@dataclass(frozen=True)
class OffsetScores:
    """The score of one query vector and one key vector, placed at every distance apart."""

    query: int  # the query's position in the prompt
    key: int  # the key's position
    offsets: np.ndarray  # (m,) 0, 1, ...: how far before the query the key sits
    scores: np.ndarray  # (m,) q R(offset) k / sqrt(hs), every pair of the head
    offset: int  # query - key: where they really are
    score: float  # the model's own score for them (attn.scores)


def score_by_offset(model: GPT, trace: Trace, layer: int, head: int, query: int, key: int,
                    max_offsets: int = MAX_OFFSETS) -> OffsetScores:
    """Keep the content of q (at `query`) and k (at `key`) and move them apart: the score at
    each offset. At offset query − key it is the model's own score (up to float rounding)."""
    rotary = rotary_of(model, layer)
    q, k = _head_vectors(model, trace, layer, head, rotated=False)  # (T, hs) unturned
    m = max(1, min(int(max_offsets), model.config.n_ctx))
    # turn the query to positions 0..m-1 and the key to 0: the score depends on the gap only
    q_at = rotary.forward(np.repeat(q[int(query)][None, None, None], m, axis=2))[0, 0]  # (m, hs)
    k_at = rotary.forward(k[int(key)][None, None, None])[0, 0, 0]  # (hs,)
    scores = (q_at.astype(np.float64) @ k_at.astype(np.float64)) / np.sqrt(q.shape[-1])
    return OffsetScores(query=int(query), key=int(key), offsets=np.arange(m), scores=scores,
                        offset=int(query) - int(key),
                        score=float(trace[f"blocks.{int(layer)}.attn.scores"][head, query, key]))


@dataclass(frozen=True)
class ShiftCheck:
    """The head's scores at the prompt's positions and with every position moved by `shift`."""

    shift: int
    visible: np.ndarray  # (T, T) bool: the cells the causal mask lets through
    scores: np.ndarray  # (T, T) the model's own scores (attn.scores)
    shifted: np.ndarray  # (T, T) the same q and k turned for positions shift .. shift + T - 1
    max_difference: float  # largest |shifted - scores| over the visible cells
    largest_score: float  # largest |score| there: the scale the difference is read against
    tolerance: float  # float rounding at that scale: 1,000 units in the last place

    @property
    def holds(self) -> bool:
        """The scores did not change beyond float rounding."""
        return self.max_difference <= self.tolerance


def shift_difference(scores_at: Callable[[int], np.ndarray], scores: np.ndarray,
                     visible: np.ndarray, shift: int) -> tuple[np.ndarray, float]:
    """scores_at(start) -> (T, T) the scores with the positions start.. ; against `scores`:
    the shifted scores and their largest difference over the visible cells. Any position
    scheme can be checked this way; only a relative one passes."""
    shifted = np.asarray(scores_at(int(shift)), dtype=np.float64)
    difference = np.abs(shifted - np.asarray(scores, dtype=np.float64))
    return shifted, float(difference[visible].max(initial=0.0))


def shift_check(model: GPT, trace: Trace, layer: int, head: int, shift: int) -> ShiftCheck:
    """Turn this head's q and k as if the prompt started at position `shift`, score again."""
    rotary = rotary_of(model, layer)
    q, k = _head_vectors(model, trace, layer, head, rotated=False)  # (T, hs)
    scale = 1.0 / np.sqrt(q.shape[-1])

    def scores_at(start: int) -> np.ndarray:  # (T, T)
        q_at = rotary.forward(q[None, None], start)[0, 0].astype(np.float64)
        k_at = rotary.forward(k[None, None], start)[0, 0].astype(np.float64)
        return (q_at * scale) @ k_at.T

    scores = trace[f"blocks.{int(layer)}.attn.scores"][int(head)]  # (T, T)
    T = scores.shape[0]
    visible = ~np.triu(np.ones((T, T), dtype=bool), k=1)  # the causal mask's visible cells
    shifted, worst = shift_difference(scores_at, scores, visible, shift)
    largest = float(np.abs(scores[visible]).max(initial=0.0))
    rounding = float(np.finfo(scores.dtype).eps) * 1000 * max(1.0, largest)
    return ShiftCheck(shift=int(shift), visible=visible, scores=np.array(scores), shifted=shifted,
                      max_difference=worst, largest_score=largest, tolerance=rounding)


@dataclass(frozen=True)
class WithoutRotation:
    """One query's row of scores and weights as the model made them, and with q and k unturned."""

    query: int
    keys: np.ndarray  # (m,) the positions it may look at
    scores: np.ndarray  # (m,) the model's own (turned q and k)
    scores_unturned: np.ndarray  # (m,) q · k / sqrt(hs) with the same q and k, not turned
    weights: np.ndarray  # (m,) the model's own softmax of the row
    weights_unturned: np.ndarray  # (m,) softmax of the unturned row


def row_without_rotation(model: GPT, trace: Trace, layer: int, head: int,
                         query: int) -> WithoutRotation:
    """What if this layer had no RoPE: the same q and k scored without their turn. Only this
    head of this layer changes; nothing after it is run again."""
    rotary_of(model, layer)  # a clear message on a model without rotary positions
    keys = visible_keys(trace, layer, head, query)  # (m,)
    q, k = _head_vectors(model, trace, layer, head, rotated=False)
    unturned = (k[keys].astype(np.float64) @ q[int(query)].astype(np.float64)) / np.sqrt(
        q.shape[-1])  # (m,)
    p = f"blocks.{int(layer)}.attn"
    return WithoutRotation(
        query=int(query), keys=keys,
        scores=trace[f"{p}.scores"][int(head), int(query), keys].astype(np.float64),
        scores_unturned=unturned,
        weights=trace[f"{p}.weights"][int(head), int(query), keys].astype(np.float64),
        weights_unturned=softmax(unturned, axis=-1))
