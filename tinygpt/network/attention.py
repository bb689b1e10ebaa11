"""Causal self-attention, written once, and rotary positions (RoPE).

Shapes in comments: B batch, T new tokens, T_k keys (start + T with a KV cache), C =
embedding_dim, H query heads, KV key/value heads (KV = H, or fewer with grouped-query
attention), G = H / KV query heads per key/value head, hs = C / H the head size.

`attend` is the one attention computation: softmax(q k^T / sqrt(hs), causal) v. The plain
forward, the traced forward, the KV-cached step, the batched step of several sequences
(`Attention.forward_parts`), one position's heads (`Attention.heads_at`) and the weights alone
(`Attention.weights_of`) all call it; the 1/sqrt(hs) scale is written in `scale_queries`, once.

Grouped-query attention: query head h reads key/value head h // G (transformers' `repeat_kv`
order). The G query heads of a group are stacked as G*T rows against their one key head, so
the keys are never repeated in memory: a KV cache holds KV heads, not H.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from tinygpt.network.functional import linear, shifted_exp, softmax
from tinygpt.network.record import Record, init_normal, keeps

QUERY_BLOCK = 128  # queries per block when a long causal input is attended by blocks


def causal_mask(T: int, T_k: int, start: int = 0) -> np.ndarray:
    """(T, T_k) bool, True where the query may NOT look: the query at absolute position
    start + i sees the keys 0 .. start + i, never a later one."""
    return np.arange(T_k)[None, :] > (start + np.arange(T))[:, None]


# ----------------------------------------------------------------------------- the one computation


def _grouped(t: np.ndarray, kv_heads: int) -> np.ndarray:
    """(B, H, T, n) -> (B, KV, G*T, n): each key/value head's G query heads, stacked by rows.
    With G = 1 this is the same array (a view): GPT-2's products are unchanged."""
    B, H, T, n = t.shape
    return t.reshape(B, kv_heads, (H // kv_heads) * T, n)


def _ungrouped(t: np.ndarray, n_head: int) -> np.ndarray:
    """(B, KV, G*T, n) -> (B, H, T, n), the inverse of _grouped."""
    B, KV, GT, n = t.shape
    return t.reshape(B, n_head, GT // (n_head // KV), n)


def scale_queries(q: np.ndarray) -> np.ndarray:
    """q / sqrt(hs): the 1/sqrt(hs) of the scores, put on q (T x hs numbers) rather than on
    the scores (T x T_k numbers). Written here and nowhere else."""
    return q * np.asarray(1.0 / math.sqrt(q.shape[-1]), dtype=q.dtype)


def scores_of(q_scaled: np.ndarray, k: np.ndarray) -> np.ndarray:
    """q_scaled (B, H, T, hs), k (B, KV, T_k, hs) -> scores (B, H, T, T_k): each query head
    against its group's key head."""
    scores = _grouped(q_scaled, k.shape[1]) @ k.transpose(0, 1, 3, 2)  # (B, KV, G*T, T_k)
    return _ungrouped(scores, q_scaled.shape[1])


def scaled_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """q (B, H, T, hs), k (B, KV, T_k, hs) -> scores (B, H, T, T_k) = q k^T / sqrt(hs)."""
    return scores_of(scale_queries(q), k)


def weigh(scores: np.ndarray, causal: bool, start: int, *, copy: bool) -> np.ndarray:
    """The mask and the softmax: weights (B, H, T, T_k), each row summing to 1. In place on
    the scores unless copy (a trace keeps the scores)."""
    weights = scores.copy() if copy else scores
    if causal:
        T, T_k = scores.shape[-2:]
        np.copyto(weights, -np.inf, where=causal_mask(T, T_k, start))
    return softmax(weights, axis=-1, out=weights)


def mix(weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    """weights (B, H, T, T_k) @ v (B, KV, T_k, hs) -> heads (B, H, T, hs), group by group."""
    return _ungrouped(_grouped(weights, v.shape[1]) @ v, weights.shape[1])


class Attended(NamedTuple):
    heads: np.ndarray  # (B, H, T, hs)
    scores: np.ndarray | None  # (B, H, T, T_k), when kept
    weights: np.ndarray | None  # (B, H, T, T_k), unless attended by blocks


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = True, start: int = 0,
           keep_scores: bool = False, keep_weights: bool = False) -> Attended:
    """softmax(q k^T / sqrt(hs), causal) v: the one attention computation.

    q (B, H, T, hs) at positions start..start+T-1; k, v (B, KV, T_k, hs). A long causal input
    goes by blocks of QUERY_BLOCK queries: the scores right of the diagonal block are never
    computed (about half of the T x T work at start 0), and one block's scores stay in the
    processor's cache for the mask, the softmax and @ v. Same math, and the heads are the same
    numbers whether or not a trace also asks for the full T x T scores (keep_scores); the
    backward needs the weights the heads were made from (keep_weights: no blocks)."""
    T = q.shape[2]
    q_scaled = scale_queries(q)
    by_blocks = causal and T > QUERY_BLOCK and not keep_weights
    scores = weights = None
    if keep_scores or not by_blocks:
        scores = scores_of(q_scaled, k)
        weights = weigh(scores, causal, start, copy=keep_scores)
    heads = _attend_by_blocks(q_scaled, k, v, start) if by_blocks else mix(weights, v)
    return Attended(heads, scores if keep_scores else None, weights)


def _attend_by_blocks(q_scaled: np.ndarray, k: np.ndarray, v: np.ndarray,
                      start: int) -> np.ndarray:
    """Attention of a long causal input, QUERY_BLOCK queries at a time. Per block, passes
    over its scores are saved (the block's own scores are most of the work): the mask is
    written only on the block's last keys (every earlier key is seen by all of its queries),
    the shift is most often not needed (_exp_of_block), and the softmax's division is made on
    the heads (n x hs numbers) rather than on the weights (n x n_keys):
    softmax(s) @ v = (exp(s) @ v) / sum(exp(s))."""
    B, H, T, hs = q_scaled.shape
    heads = np.empty((B, H, T, v.shape[-1]), dtype=q_scaled.dtype)
    for i0 in range(0, T, QUERY_BLOCK):
        i1 = min(i0 + QUERY_BLOCK, T)
        n_keys = start + i1  # query start + i sees keys 0 .. start + i
        block = functools.partial(_block_scores, q_scaled, k, start, i0, i1)
        e, total = _exp_of_block(block)  # (B, H, n, n_keys), (B, H, n, 1)
        heads[:, :, i0:i1] = mix(e, v[:, :, :n_keys]) / total  # (B, H, n, hs)
    return heads


def _block_scores(q_scaled: np.ndarray, k: np.ndarray, start: int, i0: int,
                  i1: int) -> np.ndarray:
    """The masked scores (B, H, n, n_keys) of queries i0 .. i1 - 1 (positions start + i)."""
    n_keys = start + i1
    scores = scores_of(q_scaled[:, :, i0:i1], k[:, :, :n_keys])
    tail = scores[..., start + i0:]  # (B, H, n, n): the keys some query must not see
    np.copyto(tail, -np.inf, where=causal_mask(i1 - i0, i1 - i0))
    return scores


UNSHIFTED_MAX = 60.0  # exp(60) ~ 1e26: far from float32's 3e38, even summed over 10^6 keys
SMALLEST_TOTAL = 1e-30  # a row summing to less came from scores all far below zero


def _exp_of_block(block_scores) -> tuple[np.ndarray, np.ndarray]:
    """(e, total): e = exp of a block's scores, shifted only when it must be, and each row's
    sum of e. A softmax does not change when a row is shifted: the usual shift by the row's
    maximum is only there so that exp cannot overflow. When the block's largest score is at
    most UNSHIFTED_MAX, exp of the scores themselves cannot, and two passes are saved (the row
    maxima and the subtraction; one maximum of the whole block is a third of the row maxima's
    time). A row whose scores are all far below zero would come out in tiny numbers that
    lose digits: then the block is made again and shifted row by row, as usual."""
    scores = block_scores()
    if scores.max() <= UNSHIFTED_MAX:
        e = np.exp(scores, out=scores)
        total = row_sums(e)
        if total.min() >= SMALLEST_TOTAL:
            return e, total
        scores = block_scores()
    _, e, total = shifted_exp(scores, -1, out=scores)  # exp(s - max), in place
    return e, total


def row_sums(e: np.ndarray) -> np.ndarray:
    """e (..., n) -> (..., 1), the sum of each row, as one matrix-vector product with a vector
    of ones: a BLAS product sums rows of a few hundred numbers several times faster than
    np.sum, which walks each short row on its own (0.03 against 0.17 ms for 1,152 rows of
    512). The terms are added in another order, so the last digit may differ."""
    n = e.shape[-1]
    return (e.reshape(-1, n) @ np.ones((n, 1), dtype=e.dtype)).reshape(*e.shape[:-1], 1)


# ----------------------------------------------------------------------------- rotary positions


def rotate_half(x: np.ndarray) -> np.ndarray:
    """[x1, x2] -> [-x2, x1] on the two halves of the last axis: a quarter turn of each pair
    (x1[j], x2[j]) (the pair layout transformers uses for Llama and Qwen2)."""
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


class Rotary:
    """Rotary position embedding (RoPE): no position table; q and k are turned instead.

    Pair j of a head (numbers j and j + hs/2) at position p is turned by the angle
    p * theta^(-2j/hs): the first pairs turn fast, the last ones slowly. A query at p and a key
    at p' then score q R(p)^T R(p') k = q R(p' - p) k: only their distance counts.
    """

    def __init__(self, head_size: int, theta: float) -> None:
        self.head_size = head_size
        self.theta = float(theta)
        exponents = np.arange(0, head_size, 2, dtype=np.float64) / head_size  # 2j / hs
        self.inv_freq = 1.0 / self.theta**exponents  # (hs/2,) radians per position

    def cos_sin(self, start: int, T: int, dtype) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin of every angle, (T, hs), for positions start .. start + T - 1.
        Read-only: every layer, and q and k, turn by the same angles, so they are computed
        once per table (`_angle_table`) and sliced."""
        end = start + T
        n = max(TABLE_MIN_POSITIONS, 1 << (end - 1).bit_length())  # a power of two >= end
        if n * self.head_size * 2 * np.dtype(dtype).itemsize > TABLE_MAX_BYTES:
            return _angles(self.inv_freq, start, end, dtype)  # too long to keep: made anew
        cos, sin = _angle_table(self.head_size, self.theta, n, np.dtype(dtype).str)
        return cos[start:end], sin[start:end]

    def forward(self, x: np.ndarray, start: int = 0) -> np.ndarray:
        """x (B, heads, T, hs) at positions start.. -> x turned: x cos + rotate_half(x) sin,
        written half by half (x1 cos - x2 sin, x2 cos + x1 sin): the same numbers, without
        building rotate_half(x)."""
        cos, sin = self.cos_sin(start, x.shape[-2], x.dtype)  # (T, hs) each
        half = x.shape[-1] // 2
        out = x * cos
        out[..., :half] -= x[..., half:] * sin[:, :half]
        out[..., half:] += x[..., :half] * sin[:, half:]
        return out

    def backward(self, dy: np.ndarray, start: int = 0) -> np.ndarray:
        """A rotation's transpose turns back: dx = dy cos - rotate_half(dy) sin."""
        cos, sin = self.cos_sin(start, dy.shape[-2], dy.dtype)
        half = dy.shape[-1] // 2
        dx = dy * cos
        dx[..., :half] += dy[..., half:] * sin[:, :half]
        dx[..., half:] -= dy[..., :half] * sin[:, half:]
        return dx


TABLE_MIN_POSITIONS = 256
TABLE_MAX_BYTES = 4 * 2**20  # one cos + sin table; _angle_table keeps at most 8: 32 MB


def _angles(inv_freq: np.ndarray, start: int, end: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (end - start, hs) of the angles p * inv_freq of positions start .. end - 1."""
    angles = np.outer(np.arange(start, end, dtype=np.float64), inv_freq)  # (T, hs/2)
    angles = np.concatenate([angles, angles], axis=-1)  # both halves of a pair: one angle
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


@functools.lru_cache(maxsize=8)
def _angle_table(head_size: int, theta: float, n: int,
                 dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of positions 0 .. n - 1, shared by every Rotary of this head size and
    theta (so never written to: read-only)."""
    cos, sin = _angles(Rotary(head_size, theta).inv_freq, 0, n, np.dtype(dtype))
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin


# ----------------------------------------------------------------------------- the layer


class KVPart(NamedTuple):
    """One sequence's share of a step that runs several sequences together (GPT.forward_parts):
    its key and value buffers (b, KV, capacity, hs) for this layer, the position its new tokens
    start at, and how many new tokens each of its b rows brings."""

    keys: np.ndarray
    values: np.ndarray
    start: int
    new: int


def _projection(part: str, bias: bool) -> property:
    """The attribute W_q (or b_q, W_k, ...): read and set through Attention._weight / _set."""
    return property(lambda self: self._weight(part, bias),
                    lambda self, value: self._set(part, bias, value))


class Attention:
    """Causal multi-head self-attention. With n_head = 1 it is the seeds' single-head attention.

    n_kv_head None: W_qkv holds W_q, W_k and W_v side by side (as GPT-2 stores them) and `W_q`,
    `W_k`, `W_v` are views into it. n_kv_head a number (Llama, Qwen2): W_q (C, C), W_k and W_v
    (C, KV * hs) are arrays of their own. `rotary` turns q and k by their positions (RoPE).
    """

    def __init__(self, embedding_dim: int, n_head: int, n_layer: int, rng, dtype, *,
                 n_kv_head: int | None = None, rotary: Rotary | None = None,
                 bias: bool = True, proj_bias: bool = True) -> None:
        C = embedding_dim
        self.n_head = n_head
        self.head_size = C // n_head
        self.fused = n_kv_head is None
        self.n_kv_head = n_head if n_kv_head is None else n_kv_head
        self.rotary = rotary
        kv = self.n_kv_head * self.head_size  # the width of the keys (and of the values)
        if self.fused:
            self.W_qkv = init_normal(rng, (C, 3 * C), 0.02, dtype)
            self.b_qkv = np.zeros(3 * C, dtype=dtype) if bias else None
        else:
            self._W = {"q": init_normal(rng, (C, C), 0.02, dtype),
                       "k": init_normal(rng, (C, kv), 0.02, dtype),
                       "v": init_normal(rng, (C, kv), 0.02, dtype)}
            self._b = {n: np.zeros(w.shape[1], dtype=dtype) if bias else None
                       for n, w in self._W.items()}
        # GPT-2 scales the projections that write into the residual by 1/sqrt(2 * n_layer)
        self.W_proj = init_normal(rng, (C, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b_proj = np.zeros(C, dtype=dtype) if proj_bias else None
        self.cache = None

    # ---- the projections' weights: views of W_qkv, or arrays of their own

    def _weight(self, part: str, bias: bool) -> np.ndarray | None:
        if not self.fused:
            return (self._b if bias else self._W)[part]
        C = self.n_head * self.head_size
        i = "qkv".index(part)
        if bias:
            return None if self.b_qkv is None else self.b_qkv[i * C : (i + 1) * C]
        return self.W_qkv[:, i * C : (i + 1) * C]

    def _set(self, part: str, bias: bool, value: np.ndarray) -> None:
        if self.fused:
            raise AttributeError(f"{'b' if bias else 'W'}_{part} is a view of the fused "
                                 f"{'b' if bias else 'W'}_qkv; set that instead")
        (self._b if bias else self._W)[part] = value

    W_q, W_k, W_v = (_projection(part, bias=False) for part in "qkv")  # (C, C), (C, KV hs) x2
    b_q, b_k, b_v = (_projection(part, bias=True) for part in "qkv")  # None without biases

    # ---- forward

    def _split_heads(self, x: np.ndarray, n: int) -> np.ndarray:
        B, T, _ = x.shape
        return x.reshape(B, T, n, self.head_size).transpose(0, 2, 1, 3)  # (B, n, T, hs)

    def _merge_heads(self, t: np.ndarray) -> np.ndarray:
        B, n, T, hs = t.shape
        return t.transpose(0, 2, 1, 3).reshape(B, T, n * hs)  # heads side by side

    def project(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x (..., C) -> q (..., C), k and v (..., KV * hs): one product when fused."""
        if self.fused:
            C = self.n_head * self.head_size
            return tuple(np.split(linear(x, self.W_qkv, self.b_qkv), [C, 2 * C], axis=-1))
        return tuple(linear(x, self._W[p], self._b[p]) for p in "qkv")

    def heads_of(self, x: np.ndarray, start: int = 0,
                 rotate: bool = True) -> tuple[np.ndarray, ...]:
        """x (B, T, C) -> q (B, H, T, hs), k and v (B, KV, T, hs), and q, k rotated for the
        positions start.. (the same arrays when there is no rotation)."""
        q, k, v = self.project(x)
        q, k = self._split_heads(q, self.n_head), self._split_heads(k, self.n_kv_head)
        v = self._split_heads(v, self.n_kv_head)
        if self.rotary is None or not rotate:
            return q, k, v, q, k
        return q, k, v, self.rotary.forward(q, start), self.rotary.forward(k, start)

    def forward(
        self,
        x: np.ndarray,
        *,
        trace: Record | None = None,
        name: str = "attn",
        causal: bool = True,
        rotate: bool = True,
        zero_heads: tuple[int, ...] = (),
        kv: tuple[np.ndarray, np.ndarray, int] | list[KVPart] | None = None,
        keep_cache: bool = False,
        edit=None,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C). kv = (key buffer, value buffer, start): this step's keys
        and values are written at positions start.. of the buffers (B, KV, capacity, hs) and
        attention reads all of 0..start+T. kv = a list of KVPart: see forward_parts.
        rotate=False: no rotary positions (the 'no positions' intervention). edit: the
        Interventions' edit, called on the heads at the point "<name>.heads"."""
        if isinstance(kv, list):
            if trace is not None or zero_heads or keep_cache or not causal or edit is not None:
                raise ValueError("a step of several sequences takes no trace or intervention")
            return self.forward_parts(x, kv)
        start = 0 if kv is None else kv[2]
        q, k, v, q_rot, k_rot = self.heads_of(x, start, rotate)
        keys, values = k_rot, v
        if kv is not None:
            keys, values = self._into_cache(kv[0], kv[1], start, k_rot, v)  # (B, KV, T_k, hs)
        record_scores = keeps(trace, f"{name}.scores")
        heads, scores, weights = attend(q_rot, keys, values, causal=causal, start=start,
                                        keep_scores=record_scores, keep_weights=keep_cache)
        if zero_heads:
            heads = heads.copy()
            heads[:, list(zero_heads)] = 0.0
        if edit is not None:
            heads = edit(f"{name}.heads", heads)  # (B, H, T, hs)
        y = self._merge_heads(heads)  # (B, T, C)
        out = linear(y, self.W_proj, self.b_proj)  # (B, T, C)
        if trace is not None:
            trace[f"{name}.q"], trace[f"{name}.k"], trace[f"{name}.v"] = q, k, values
            if self.rotary is not None:
                trace[f"{name}.q_rot"], trace[f"{name}.k_rot"] = q_rot, keys
            if record_scores:
                trace[f"{name}.scores"], trace[f"{name}.weights"] = scores, weights
            trace[f"{name}.heads"], trace[f"{name}.output"] = heads, out
        if keep_cache:
            self.cache = (x, q_rot, k_rot, v, weights, y)
        return out

    def forward_parts(self, x: np.ndarray, parts: list[KVPart]) -> np.ndarray:
        """x (1, N, C): the new rows of several sequences, part after part -> (1, N, C).

        The query/key/value and output projections are one product each for all N rows, so the
        weights are read once for everyone (that read is most of a decoding step's time). The
        attention itself is per part: each part writes its keys and values into its own cache
        and its queries see that cache only, never another sequence."""
        q_all, k_all, v_all = self.project(x[0])  # (N, C), (N, KV hs), (N, KV hs)
        heads, first = [], 0
        for part in parts:
            b, t = part.keys.shape[0], part.new
            rows = slice(first, first + b * t)
            first += b * t
            q, k, v = (self._split_heads(a[rows].reshape(b, t, -1), n) for a, n in
                       ((q_all, self.n_head), (k_all, self.n_kv_head), (v_all, self.n_kv_head)))
            if self.rotary is not None:
                q, k = self.rotary.forward(q, part.start), self.rotary.forward(k, part.start)
            k, v = self._into_cache(part.keys, part.values, part.start, k, v)  # (b,KV,T_k,hs)
            h = attend(q, k, v, start=part.start).heads  # (b, H, t, hs)
            heads.append(self._merge_heads(h).reshape(b * t, -1))  # (b t, C)
        y = np.concatenate(heads)  # (N, C): heads side by side, parts one after the other
        return linear(y, self.W_proj, self.b_proj)[None]  # (1, N, C)

    def heads_at(self, h: np.ndarray, position: int) -> np.ndarray:
        """Each head's output at one query position, (H, hs), from the normalized input h
        (T, C) of a causal forward: the keys and values of positions 0..position, one query.
        The same numbers as forward(...)'s heads[:, :, position], for ~1/T of the attention."""
        _, _, v, q, k = self.heads_of(h[None, : position + 1])  # (1, H or KV, t+1, hs)
        return attend(q[:, :, -1:], k, v, start=position).heads[0, :, 0]  # (H, hs)

    def weights_of(self, h: np.ndarray) -> np.ndarray:
        """The causal attention weights (B, H, T, T) of the normalized input h (B, T, C): the
        same products and softmax as forward(...) makes them, without the values, the heads'
        outputs and the projection."""
        _, _, _, q, k = self.heads_of(h)
        return weigh(scaled_scores(q, k), True, 0, copy=False)

    @staticmethod
    def _into_cache(k_buf: np.ndarray, v_buf: np.ndarray, start: int, k: np.ndarray,
                    v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Write this step's keys and values (B, KV, T, hs) at positions start.. of the cache
        buffers; return the keys and values of all positions 0 .. start + T."""
        end = start + k.shape[2]
        k_buf[:, :, start:end] = k
        v_buf[:, :, start:end] = v
        return k_buf[:, :, :end], v_buf[:, :, :end]

    # ---- backward

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dout (B, T, C) -> dx (B, T, C), and the gradients of every projection."""
        x, q, k, v, weights, y = self.cache  # q, k as the scores saw them (rotated)
        C = x.shape[-1]
        grads = {"W_proj": y.reshape(-1, C).T @ dout.reshape(-1, C)}
        if self.b_proj is not None:
            grads["b_proj"] = dout.reshape(-1, C).sum(axis=0)
        dheads = self._split_heads(linear(dout, self.W_proj.T), self.n_head)  # (B, H, T, hs)
        KV = self.n_kv_head
        dweights = _ungrouped(_grouped(dheads, KV) @ v.transpose(0, 1, 3, 2), self.n_head)
        # a key/value head gets the gradients of all the query heads of its group, summed
        dv = _grouped(weights, KV).transpose(0, 1, 3, 2) @ _grouped(dheads, KV)  # (B,KV,T,hs)
        # softmax backward; masked entries have weight 0 and so get no gradient
        dscores = dweights  # in place: dweights is not needed again
        dscores -= (dweights * weights).sum(axis=-1, keepdims=True)
        dscores *= weights  # (B, H, T, T)
        # scores = (q / sqrt(hs)) @ k^T: the scale on dq and dk (T x hs), not on dscores
        scale = np.asarray(1.0 / math.sqrt(self.head_size), dtype=dscores.dtype)
        dq = _ungrouped(_grouped(dscores, KV) @ k, self.n_head) * scale  # (B, H, T, hs)
        dk = (_grouped(dscores, KV).transpose(0, 1, 3, 2) @ _grouped(q, KV)) * scale
        if self.rotary is not None:
            dq, dk = self.rotary.backward(dq), self.rotary.backward(dk)
        return self._projection_backward(x, dq, dk, dv, grads)

    def _projection_backward(self, x, dq, dk, dv, grads) -> tuple[np.ndarray, dict]:
        """From the gradients of q, k, v (in heads) to those of x and of the projections."""
        C = x.shape[-1]
        rows = x.reshape(-1, C)
        d = {p: self._merge_heads(t) for p, t in zip("qkv", (dq, dk, dv), strict=True)}
        if self.fused:
            dqkv = np.concatenate([d["q"], d["k"], d["v"]], axis=-1)  # (B, T, 3C)
            grads["W_qkv"] = rows.T @ dqkv.reshape(-1, 3 * C)
            if self.b_qkv is not None:
                grads["b_qkv"] = dqkv.reshape(-1, 3 * C).sum(axis=0)
            return linear(dqkv, self.W_qkv.T), grads  # (B, T, C)
        dx = np.zeros_like(x)
        for p, dp in d.items():
            flat = dp.reshape(-1, dp.shape[-1])
            grads[f"W_{p}"] = rows.T @ flat
            if self._b[p] is not None:
                grads[f"b_{p}"] = flat.sum(axis=0)
            dx += linear(dp, self._W[p].T)
        return dx, grads

