"""Causal self-attention, written once, and rotary positions (RoPE).

Shapes in comments: B batch, T new tokens, T_k keys (start + T with a KV cache), C =
embedding_dim, H query heads, KV key/value heads (KV = H, or fewer with grouped-query
attention), G = H / KV query heads per key/value head, hs = C / H the head size.

`attend` is the one attention computation: softmax(q k^T / sqrt(hs), causal) v. The plain
forward, the traced forward and the KV-cached step call it here; the shortcuts of tinygpt.fast
(several sequences in one step, one position's heads, the weights alone) call it too. The
1/sqrt(hs) scale is written in `scale_queries`, once.

Grouped-query attention: query head h reads key/value head h // G (transformers' `repeat_kv`
order), without repeating the keys in memory (tinygpt/kernels/grouped.py): a KV cache holds KV
heads, not H. A long causal input is attended by blocks of queries
(tinygpt/kernels/blocked_attention.py), and rotary positions read their angles from a kept
table (tinygpt/kernels/angle_tables.py): the same numbers, faster.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tinygpt.kernels.angle_tables import cos_sin, rope_frequencies
from tinygpt.kernels.blocked_attention import QUERY_BLOCK, attend_by_blocks
from tinygpt.kernels.grouped import grouped, mix, scores_of, ungrouped
from tinygpt.network.functional import linear, softmax
from tinygpt.network.record import Record, init_normal, keeps


def causal_mask(T: int, T_k: int, start: int = 0) -> np.ndarray:
    """(T, T_k) bool, True where the query may NOT look: the query at absolute position
    start + i sees the keys 0 .. start + i, never a later one."""
    return np.arange(T_k)[None, :] > (start + np.arange(T))[:, None]


# ----------------------------------------------------------------------------- the one computation


def scale_queries(q: np.ndarray) -> np.ndarray:
    """q / sqrt(hs): the 1/sqrt(hs) of the scores, put on q (T x hs numbers) rather than on
    the scores (T x T_k numbers). Written here and nowhere else."""
    return q * np.asarray(1.0 / math.sqrt(q.shape[-1]), dtype=q.dtype)


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


class Attended(NamedTuple):
    heads: np.ndarray  # (B, H, T, hs)
    scores: np.ndarray | None  # (B, H, T, T_k), when kept
    weights: np.ndarray | None  # (B, H, T, T_k), unless attended by blocks


def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, *, causal: bool = True, start: int = 0,
           keep_scores: bool = False, keep_weights: bool = False) -> Attended:
    """softmax(q k^T / sqrt(hs), causal) v: the one attention computation.

    q (B, H, T, hs) at positions start..start+T-1; k, v (B, KV, T_k, hs). A long causal input
    goes by blocks of QUERY_BLOCK queries (attend_by_blocks: the same math, about half the
    work), and its heads are the same numbers whether or not a trace also asks for the full
    T x T scores (keep_scores); the backward needs the weights the heads were made from
    (keep_weights: no blocks)."""
    T = q.shape[2]
    q_scaled = scale_queries(q)
    by_blocks = causal and T > QUERY_BLOCK and not keep_weights
    scores = weights = None
    if keep_scores or not by_blocks:
        scores = scores_of(q_scaled, k)
        weights = weigh(scores, causal, start, copy=keep_scores)
    heads = attend_by_blocks(q_scaled, k, v, start) if by_blocks else mix(weights, v)
    return Attended(heads, scores if keep_scores else None, weights)


# ----------------------------------------------------------------------------- rotary positions


class Rotary:
    """Rotary position embedding (RoPE): no position table; q and k are turned instead.

    Pair j of a head (numbers j and j + hs/2) at position p is turned by the angle
    p * theta^(-2j/hs): the first pairs turn fast, the last ones slowly. A query at p and a key
    at p' then score q R(p)^T R(p') k = q R(p' - p) k: only their distance counts.
    """

    def __init__(self, head_size: int, theta: float) -> None:
        self.head_size = head_size
        self.theta = float(theta)
        self.inv_freq = rope_frequencies(head_size, self.theta)  # (hs/2,) theta^(-2j/hs)

    def cos_sin(self, start: int, T: int, dtype) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin of every angle, (T, hs), for positions start .. start + T - 1 (the
        angles p * inv_freq, both numbers of a pair turned by one: read off a kept table)."""
        return cos_sin(self.head_size, self.theta, start, T, dtype)

    def forward(self, x: np.ndarray, start: int = 0) -> np.ndarray:
        """x (B, heads, T, hs) at positions start.. -> x turned: each pair (x1[j], x2[j]) of
        the two halves by its angle, x1 cos - x2 sin and x2 cos + x1 sin (transformers writes
        it x cos + rotate_half(x) sin, rotate_half([x1, x2]) = [-x2, x1])."""
        cos, sin = self.cos_sin(start, x.shape[-2], x.dtype)  # (T, hs) each
        half = x.shape[-1] // 2
        out = x * cos
        out[..., :half] -= x[..., half:] * sin[:, :half]
        out[..., half:] += x[..., :half] * sin[:, half:]
        return out

    def backward(self, dy: np.ndarray, start: int = 0) -> np.ndarray:
        """A rotation's transpose turns back: dy1 cos + dy2 sin and dy2 cos - dy1 sin."""
        cos, sin = self.cos_sin(start, dy.shape[-2], dy.dtype)
        half = dy.shape[-1] // 2
        dx = dy * cos
        dx[..., :half] += dy[..., half:] * sin[:, :half]
        dx[..., half:] -= dy[..., :half] * sin[:, half:]
        return dx


# ----------------------------------------------------------------------------- the layer


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

    def split_heads(self, x: np.ndarray, n: int) -> np.ndarray:
        B, T, _ = x.shape
        return x.reshape(B, T, n, self.head_size).transpose(0, 2, 1, 3)  # (B, n, T, hs)

    def merge_heads(self, t: np.ndarray) -> np.ndarray:
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
        q, k = self.split_heads(q, self.n_head), self.split_heads(k, self.n_kv_head)
        v = self.split_heads(v, self.n_kv_head)
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
        kv: tuple[np.ndarray, np.ndarray, int] | None = None,
        keep_cache: bool = False,
        edit=None,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C). kv = (key buffer, value buffer, start): this step's keys
        and values are written at positions start.. of the buffers (B, KV, capacity, hs) and
        attention reads all of 0..start+T. rotate=False: no rotary positions (the 'no
        positions' intervention). edit: the Interventions' edit, called on the heads at the
        point "<name>.heads"."""
        start = 0 if kv is None else kv[2]
        q, k, v, q_rot, k_rot = self.heads_of(x, start, rotate)
        keys, values = k_rot, v
        if kv is not None:
            keys, values = self.into_cache(kv[0], kv[1], start, k_rot, v)  # (B, KV, T_k, hs)
        record_scores = keeps(trace, f"{name}.scores")
        heads, scores, weights = attend(q_rot, keys, values, causal=causal, start=start,
                                        keep_scores=record_scores, keep_weights=keep_cache)
        if zero_heads:
            heads = heads.copy()
            heads[:, list(zero_heads)] = 0.0
        if edit is not None:
            heads = edit(f"{name}.heads", heads)  # (B, H, T, hs)
        y = self.merge_heads(heads)  # (B, T, C)
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

    @staticmethod
    def into_cache(k_buf: np.ndarray, v_buf: np.ndarray, start: int, k: np.ndarray,
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
        dheads = self.split_heads(linear(dout, self.W_proj.T), self.n_head)  # (B, H, T, hs)
        KV = self.n_kv_head
        dweights = ungrouped(grouped(dheads, KV) @ v.transpose(0, 1, 3, 2), self.n_head)
        # a key/value head gets the gradients of all the query heads of its group, summed
        dv = grouped(weights, KV).transpose(0, 1, 3, 2) @ grouped(dheads, KV)  # (B,KV,T,hs)
        # softmax backward; masked entries have weight 0 and so get no gradient
        dscores = dweights  # in place: dweights is not needed again
        dscores -= (dweights * weights).sum(axis=-1, keepdims=True)
        dscores *= weights  # (B, H, T, T)
        # scores = (q / sqrt(hs)) @ k^T: the scale on dq and dk (T x hs), not on dscores
        scale = np.asarray(1.0 / math.sqrt(self.head_size), dtype=dscores.dtype)
        dq = ungrouped(grouped(dscores, KV) @ k, self.n_head) * scale  # (B, H, T, hs)
        dk = (grouped(dscores, KV).transpose(0, 1, 3, 2) @ grouped(q, KV)) * scale
        if self.rotary is not None:
            dq, dk = self.rotary.backward(dq), self.rotary.backward(dk)
        return self._projection_backward(x, dq, dk, dv, grads)

    def _projection_backward(self, x, dq, dk, dv, grads) -> tuple[np.ndarray, dict]:
        """From the gradients of q, k, v (in heads) to those of x and of the projections."""
        C = x.shape[-1]
        rows = x.reshape(-1, C)
        d = {p: self.merge_heads(t) for p, t in zip("qkv", (dq, dk, dv), strict=True)}
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

