"""The layers of a GPT, each with its `forward` and, right beside it, its `backward`.

Shapes in comments: B batch, T tokens, C = embedding_dim, H heads, hs = C / H (head size),
V = vocab_size (see tinygpt/network/config.py for the names of the embedding width).

A forward takes its main input by position and every option by keyword. It keeps what its
backward needs only when asked (`keep_cache=True`), so inference never writes to the layer and
one model can serve many users at once. With `trace` (a dict), it records its intermediate
tensors under `name` (the names are listed in docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tinygpt.network.config import NO_INTERVENTIONS, GPTConfig, Interventions
from tinygpt.network.functional import gelu_backward, gelu_forward, linear, softmax

Trace = dict[str, np.ndarray]


def init_normal(rng: np.random.Generator | None, shape: tuple, std: float, dtype) -> np.ndarray:
    """Weights drawn from N(0, std^2); zeros when rng is None (weights about to be loaded)."""
    if rng is None:
        return np.zeros(shape, dtype=dtype)  # lazily allocated by the OS: costs nothing
    return (rng.standard_normal(shape) * std).astype(dtype)


def _record(trace: Trace | None, name: str, value: np.ndarray) -> None:
    if trace is not None:
        trace[name] = value


def keeps(trace: Trace | None, name: str) -> bool:
    """Does this trace record `name`? A plain dict records everything; a
    tinygpt.network.trace.Recorder
    only what cannot be derived (so a forward need not copy what it will not keep)."""
    if trace is None:
        return False
    keeps_name = getattr(trace, "keeps", None)
    return keeps_name is None or keeps_name(name)


def causal_mask(T: int, T_k: int, start: int = 0) -> np.ndarray:
    """(T, T_k) bool, True where the query may NOT look: the query at absolute position
    start + i sees the keys 0 .. start + i, never a later one."""
    return np.arange(T_k)[None, :] > (start + np.arange(T))[:, None]


# ----------------------------------------------------------------------------- embedding


class EmbeddingLayer:
    """Token embedding + learned position embedding: x[t] = E[ids[t]] + P[t]."""

    def __init__(self, vocab_size: int, n_ctx: int, embedding_dim: int, rng, dtype) -> None:
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.embeddings = init_normal(rng, (vocab_size, embedding_dim), 0.02, dtype)  # E (V, C)
        self.position_embeddings = init_normal(rng, (n_ctx, embedding_dim), 0.01, dtype)  # P
        self.cache = None

    def forward(
        self,
        ids: np.ndarray,
        *,
        start: int = 0,
        trace: Trace | None = None,
        no_position: bool = False,
        keep_cache: bool = False,
    ) -> np.ndarray:
        """ids (B, T) -> x (B, T, C). start: the position of ids[:, 0] (> 0 with a KV cache)."""
        T = ids.shape[1]
        tok = self.embeddings[ids]  # (B, T, C)
        pos = self.position_embeddings[start : start + T]  # (T, C)
        if no_position:
            pos = np.zeros_like(pos)
        x = tok + pos  # (B, T, C)
        _record(trace, "embed.token", tok)
        _record(trace, "embed.position", np.broadcast_to(pos, tok.shape))
        _record(trace, "embed.sum", x)
        if keep_cache:
            self.cache = ids
        return x

    def backward(self, dx: np.ndarray) -> dict[str, np.ndarray]:
        """dx (B, T, C) -> gradients of E (V, C) and P (n_ctx, C); ids get no gradient."""
        ids = self.cache
        T = ids.shape[1]
        d_emb = np.zeros_like(self.embeddings)  # (V, C): a row sums its tokens' gradients
        np.add.at(d_emb, ids.reshape(-1), dx.reshape(-1, dx.shape[-1]))
        d_pos = np.zeros_like(self.position_embeddings)  # (n_ctx, C)
        d_pos[:T] = dx.sum(axis=0)  # position t is used once per sequence
        return {"embeddings": d_emb, "position_embeddings": d_pos}


# ----------------------------------------------------------------------------- LayerNorm


class LayerNorm:
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, over the last axis (each token alone)."""

    def __init__(self, dim: int, eps: float, dtype) -> None:
        self.eps = eps
        self.gamma = np.ones(dim, dtype=dtype)  # scale starts at 1
        self.beta = np.zeros(dim, dtype=dtype)  # shift starts at 0
        self.cache = None

    def forward(
        self,
        x: np.ndarray,
        *,
        trace: Trace | None = None,
        name: str = "ln",
        identity: bool = False,
        keep_cache: bool = False,
    ) -> np.ndarray:
        """x (B, T, C) -> y (B, T, C). identity=True passes x through ('no LayerNorm')."""
        mean = x.mean(axis=-1, keepdims=True)  # (B, T, 1)
        x_hat = x - mean  # (B, T, C), centred; scaled in place below
        var = np.mean(x_hat * x_hat, axis=-1, keepdims=True)  # (B, T, 1), biased like GPT-2
        rstd = 1.0 / np.sqrt(var + self.eps)
        x_hat *= rstd  # (B, T, C) mean 0, variance 1
        y = x if identity else x_hat * self.gamma + self.beta
        if trace is not None:
            trace[f"{name}.input"] = x
            trace[f"{name}.mean"] = mean[..., 0]
            trace[f"{name}.var"] = var[..., 0]
            trace[f"{name}.normalized"] = x_hat
            trace[f"{name}.output"] = y
        if keep_cache:
            self.cache = (x_hat, rstd)
        return y

    def backward(self, dy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dy (B, T, C) -> dx (B, T, C), and the gradients of gamma and beta (C,)."""
        x_hat, rstd = self.cache
        C = x_hat.shape[-1]
        grads = {
            "gamma": (dy * x_hat).reshape(-1, C).sum(axis=0),
            "beta": dy.reshape(-1, C).sum(axis=0),
        }
        dx_hat = dy * self.gamma  # (B, T, C)
        # x_hat depends on x directly and through the mean and the variance of its row
        dx = rstd * (
            dx_hat
            - dx_hat.mean(axis=-1, keepdims=True)
            - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True)
        )
        return dx, grads


# ----------------------------------------------------------------------------- attention

QUERY_BLOCK = 128  # queries per block in causal_attention_by_blocks


def causal_attention_by_blocks(
    q_scaled: np.ndarray, k: np.ndarray, v: np.ndarray, start: int = 0
) -> np.ndarray:
    """softmax(q_scaled k^T, causal) v, QUERY_BLOCK queries at a time: (B, H, T, hs).

    q_scaled (B, H, T, hs), already times 1/sqrt(hs); k, v (B, H, start + T, hs). The queries
    of one block see the keys up to their last position only, so the scores right of the
    diagonal block are never computed (about half of the T x T work at start 0), and one
    block's scores (B, H, 128, <= T_k) stay in the cache for the mask, the softmax and @ v.
    Same math as the full T x T path, which a trace or training uses (it keeps the scores).
    """
    B, H, T, hs = q_scaled.shape
    heads = np.empty((B, H, T, v.shape[-1]), dtype=q_scaled.dtype)
    for i0 in range(0, T, QUERY_BLOCK):
        i1 = min(i0 + QUERY_BLOCK, T)
        n_keys = start + i1  # query start + i sees keys 0 .. start + i
        w = q_scaled[:, :, i0:i1] @ k[:, :, :n_keys].transpose(0, 1, 3, 2)  # (B, H, n, n_keys)
        np.copyto(w, -np.inf, where=causal_mask(i1 - i0, n_keys, start + i0))
        softmax(w, axis=-1, out=w)
        heads[:, :, i0:i1] = w @ v[:, :, :n_keys]
    return heads


class KVPart(NamedTuple):
    """One sequence's share of a step that runs several sequences together (GPT.forward_parts):
    its key and value buffers (b, H, capacity, hs) for this layer, the position its new tokens
    start at, and how many new tokens each of its b rows brings."""

    keys: np.ndarray
    values: np.ndarray
    start: int
    new: int


class Attention:
    """Causal multi-head self-attention. With n_head = 1 it is the seeds' single-head attention.

    W_qkv holds W_q, W_k and W_v side by side (as GPT-2 stores them); `W_q`, `W_k`, `W_v`
    are views into it.
    """

    def __init__(self, embedding_dim: int, n_head: int, n_layer: int, rng, dtype) -> None:
        self.n_head = n_head
        self.head_size = embedding_dim // n_head
        C = embedding_dim
        self.W_qkv = init_normal(rng, (C, 3 * C), 0.02, dtype)
        self.b_qkv = np.zeros(3 * C, dtype=dtype)
        # GPT-2 scales the projections that write into the residual by 1/sqrt(2 * n_layer)
        self.W_proj = init_normal(rng, (C, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b_proj = np.zeros(C, dtype=dtype)
        self.cache = None

    @property
    def W_q(self) -> np.ndarray:
        return self.W_qkv[:, : self.n_head * self.head_size]

    @property
    def W_k(self) -> np.ndarray:
        C = self.n_head * self.head_size
        return self.W_qkv[:, C : 2 * C]

    @property
    def W_v(self) -> np.ndarray:
        C = self.n_head * self.head_size
        return self.W_qkv[:, 2 * C :]

    def _split_heads(self, x: np.ndarray) -> np.ndarray:
        B, T, C = x.shape
        return x.reshape(B, T, self.n_head, self.head_size).transpose(0, 2, 1, 3)  # (B,H,T,hs)

    def heads_at(self, h: np.ndarray, position: int) -> np.ndarray:
        """Each head's output at one query position, (H, hs), from the LayerNorm'd input h
        (T, C) of a causal forward: the keys and values of positions 0..position, one query.
        The same numbers as forward(...)'s heads[:, :, position], for ~2/T of its work."""
        C, H, hs = h.shape[-1], self.n_head, self.head_size
        seen = h[: position + 1]  # (t+1, C): what the query may look at
        q = linear(h[position], self.W_qkv[:, :C], self.b_qkv[:C]).reshape(H, hs)  # (H, hs)
        k = linear(seen, self.W_qkv[:, C : 2 * C], self.b_qkv[C : 2 * C])  # (t+1, C)
        v = linear(seen, self.W_qkv[:, 2 * C :], self.b_qkv[2 * C :])  # (t+1, C)
        k = k.reshape(-1, H, hs).transpose(1, 2, 0)  # (H, hs, t+1)
        v = v.reshape(-1, H, hs).transpose(1, 0, 2)  # (H, t+1, hs)
        q_scaled = q * np.asarray(1.0 / math.sqrt(hs), dtype=q.dtype)
        scores = q_scaled[:, None, :] @ k  # (H, 1, t+1)
        return (softmax(scores, axis=-1) @ v)[:, 0]  # (H, hs)

    def weights_of(self, h: np.ndarray) -> np.ndarray:
        """The causal attention weights (B, H, T, T) of the LayerNorm'd input h (B, T, C): the
        same products and softmax as forward(...) makes them, without the values, the heads'
        outputs and the projection."""
        qkv = linear(h, self.W_qkv, self.b_qkv)  # (B, T, 3C): the same product as forward's
        q, k, _ = (self._split_heads(part) for part in np.split(qkv, 3, axis=-1))  # (B,H,T,hs)
        q_scaled = q * np.asarray(1.0 / math.sqrt(self.head_size), dtype=q.dtype)
        return self._scores_and_weights(q_scaled, k, True, 0, False)[1]

    def forward(
        self,
        x: np.ndarray,
        *,
        trace: Trace | None = None,
        name: str = "attn",
        causal: bool = True,
        zero_heads: tuple[int, ...] = (),
        kv: tuple[np.ndarray, np.ndarray, int] | list[KVPart] | None = None,
        keep_cache: bool = False,
    ) -> np.ndarray:
        """kv = (key buffer, value buffer, start): this step's keys and values are written at
        positions start.. of the buffers (B, H, n_ctx, hs) and attention reads all of 0..start+T.
        kv = a list of KVPart: x (1, N, C) holds several sequences' rows (forward_parts)."""
        if isinstance(kv, list):
            if trace is not None or zero_heads or keep_cache or not causal:
                raise ValueError("a step of several sequences takes no trace or intervention")
            return self.forward_parts(x, kv)
        B, T, C = x.shape
        qkv = linear(x, self.W_qkv, self.b_qkv)  # (B, T, 3C)
        q, k, v = (self._split_heads(part) for part in np.split(qkv, 3, axis=-1))  # (B,H,T,hs)
        start = 0
        if kv is not None:
            k_buf, v_buf, start = kv
            k, v = self._into_cache(k_buf, v_buf, start, k, v)  # (B, H, T_k, hs)

        # the 1/sqrt(hs) scale on q (T x hs numbers), not on the scores (T x T_k numbers)
        q_scaled = q * np.asarray(1.0 / math.sqrt(self.head_size), dtype=q.dtype)
        # long causal inputs by blocks of queries; the full T x T scores only when a trace
        # records them or the backward needs the weights
        by_blocks = causal and not keep_cache and T > QUERY_BLOCK
        record_scores = keeps(trace, f"{name}.scores")
        if record_scores or keep_cache or not by_blocks:
            scores, weights = self._scores_and_weights(q_scaled, k, causal, start, record_scores)
        if by_blocks:
            heads = causal_attention_by_blocks(q_scaled, k, v, start)  # (B, H, T, hs)
        else:
            heads = weights @ v  # (B, H, T, hs)
        if zero_heads:
            heads = heads.copy()
            heads[:, list(zero_heads)] = 0.0
        y = heads.transpose(0, 2, 1, 3).reshape(B, T, C)  # heads side by side
        out = linear(y, self.W_proj, self.b_proj)  # (B, T, C)

        if trace is not None:
            trace[f"{name}.q"], trace[f"{name}.k"], trace[f"{name}.v"] = q, k, v
            if record_scores:
                trace[f"{name}.scores"] = scores
                trace[f"{name}.weights"] = weights
            trace[f"{name}.heads"] = heads
            trace[f"{name}.output"] = out
        if keep_cache:
            self.cache = (x, q, k, v, weights, y)
        return out

    def forward_parts(self, x: np.ndarray, parts: list[KVPart]) -> np.ndarray:
        """x (1, N, C): the new rows of several sequences, part after part -> (1, N, C).

        The query/key/value and output projections are one product each for all N rows, so the
        weights are read once for everyone (that read is most of a decoding step's time). The
        attention itself is per part: each part writes its keys and values into its own cache
        and its queries see that cache only, never another sequence."""
        C = x.shape[-1]
        qkv = linear(x[0], self.W_qkv, self.b_qkv)  # (N, 3C): every row at once
        heads, first = [], 0
        for part in parts:
            b, t = part.keys.shape[0], part.new
            rows = qkv[first : first + b * t].reshape(b, t, 3 * C)
            first += b * t
            q, k, v = (self._split_heads(p) for p in np.split(rows, 3, axis=-1))  # (b,H,t,hs)
            k, v = self._into_cache(part.keys, part.values, part.start, k, v)  # (b,H,T_k,hs)
            q_scaled = q * np.asarray(1.0 / math.sqrt(self.head_size), dtype=q.dtype)
            if t > QUERY_BLOCK:
                h = causal_attention_by_blocks(q_scaled, k, v, part.start)
            else:
                h = self._scores_and_weights(q_scaled, k, True, part.start, False)[1] @ v
            heads.append(h.transpose(0, 2, 1, 3).reshape(b * t, C))  # (b t, C)
        y = np.concatenate(heads)  # (N, C): heads side by side, parts one after the other
        return linear(y, self.W_proj, self.b_proj)[None]  # (1, N, C)

    @staticmethod
    def _into_cache(k_buf: np.ndarray, v_buf: np.ndarray, start: int, k: np.ndarray,
                    v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Write this step's keys and values (B, H, T, hs) at positions start.. of the cache
        buffers; return the keys and values of all positions 0 .. start + T."""
        end = start + k.shape[2]
        k_buf[:, :, start:end] = k
        v_buf[:, :, start:end] = v
        return k_buf[:, :, :end], v_buf[:, :, :end]

    @staticmethod
    def _scores_and_weights(
        q_scaled: np.ndarray, k: np.ndarray, causal: bool, start: int, keep_scores: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, weights), both (B, H, T, T_k): q_scaled k^T, then the mask and the softmax.

        These work in place on one T x T_k array, unless the scores are kept (a trace stores
        them; scores_masked and weights are derived from them there: tinygpt.network.trace).
        """
        scores = q_scaled @ k.transpose(0, 1, 3, 2)  # (B, H, T, T_k)
        weights = scores.copy() if keep_scores else scores
        if causal:
            T, T_k = scores.shape[-2:]
            np.copyto(weights, -np.inf, where=causal_mask(T, T_k, start))
        softmax(weights, axis=-1, out=weights)  # each row sums to 1
        return scores, weights

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dout (B, T, C) -> dx (B, T, C), and the gradients of W_qkv, b_qkv, W_proj, b_proj."""
        x, q, k, v, weights, y = self.cache
        B, T, C = x.shape
        grads = {
            "W_proj": y.reshape(-1, C).T @ dout.reshape(-1, C),
            "b_proj": dout.reshape(-1, C).sum(axis=0),
        }
        dy = linear(dout, self.W_proj.T)  # (B, T, C)
        dheads = self._split_heads(dy)  # (B, H, T, hs)
        dweights = dheads @ v.transpose(0, 1, 3, 2)  # (B, H, T, T)
        dv = weights.transpose(0, 1, 3, 2) @ dheads  # (B, H, T, hs)
        # softmax backward; masked entries have weight 0 and so get no gradient
        dscores = dweights  # in place: dweights is not needed again
        dscores -= (dweights * weights).sum(axis=-1, keepdims=True)
        dscores *= weights  # (B, H, T, T)
        # scores = (q / sqrt(hs)) @ k^T: the scale on dq and dk (T x hs), not on dscores
        scale = np.asarray(1.0 / math.sqrt(self.head_size), dtype=dscores.dtype)
        dq = (dscores @ k) * scale  # (B, H, T, hs)
        dk = (dscores.transpose(0, 1, 3, 2) @ q) * scale  # (B, H, T, hs)

        def merge(t: np.ndarray) -> np.ndarray:
            return t.transpose(0, 2, 1, 3).reshape(B, T, C)

        dqkv = np.concatenate([merge(dq), merge(dk), merge(dv)], axis=-1)  # (B, T, 3C)
        grads["W_qkv"] = x.reshape(-1, C).T @ dqkv.reshape(-1, 3 * C)
        grads["b_qkv"] = dqkv.reshape(-1, 3 * C).sum(axis=0)
        dx = linear(dqkv, self.W_qkv.T)  # (B, T, C)
        return dx, grads


# ----------------------------------------------------------------------------- feed-forward


class FeedForward:
    """Position-wise MLP: C -> 4C -> GELU -> C, the same for every token."""

    def __init__(self, embedding_dim: int, n_layer: int, activation: str, rng, dtype) -> None:
        C = embedding_dim
        self.approximate = activation == "gelu_tanh"
        self.W1 = init_normal(rng, (C, 4 * C), 0.02, dtype)
        self.b1 = np.zeros(4 * C, dtype=dtype)
        self.W2 = init_normal(rng, (4 * C, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b2 = np.zeros(C, dtype=dtype)
        self.cache = None

    def forward(
        self,
        x: np.ndarray,
        *,
        trace: Trace | None = None,
        name: str = "ffn",
        keep_cache: bool = False,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C)."""
        pre = linear(x, self.W1, self.b1)  # (B, T, 4C)
        post, saved = gelu_forward(pre, approximate=self.approximate)  # (B, T, 4C)
        out = linear(post, self.W2, self.b2)  # (B, T, C)
        if trace is not None:
            trace[f"{name}.pre"], trace[f"{name}.post"], trace[f"{name}.output"] = pre, post, out
        if keep_cache:
            self.cache = (x, pre, saved, post)
        return out

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dout (B, T, C) -> dx (B, T, C), and the gradients of W1, b1, W2, b2."""
        x, pre, saved, post = self.cache
        C = x.shape[-1]
        grads = {
            "W2": post.reshape(-1, 4 * C).T @ dout.reshape(-1, C),
            "b2": dout.reshape(-1, C).sum(axis=0),
        }
        dgelu = gelu_backward(pre, saved, approximate=self.approximate)  # (B, T, 4C)
        dpre = linear(dout, self.W2.T)  # (B, T, 4C)
        dpre *= dgelu
        grads["W1"] = x.reshape(-1, C).T @ dpre.reshape(-1, 4 * C)
        grads["b1"] = dpre.reshape(-1, 4 * C).sum(axis=0)
        return linear(dpre, self.W1.T), grads


# ----------------------------------------------------------------------------- block


class TransformerBlock:
    """Pre-LayerNorm block: x = x + Attention(LN1(x)); x = x + FeedForward(LN2(x))."""

    def __init__(self, config: GPTConfig, rng, dtype) -> None:
        C = config.embedding_dim
        self.ln1 = LayerNorm(C, config.layer_norm_eps, dtype)
        self.attn = Attention(C, config.n_head, config.n_layer, rng, dtype)
        self.ln2 = LayerNorm(C, config.layer_norm_eps, dtype)
        self.ffn = FeedForward(C, config.n_layer, config.activation, rng, dtype)

    def forward(
        self,
        x: np.ndarray,
        *,
        index: int,
        trace: Trace | None = None,
        interventions: Interventions = NO_INTERVENTIONS,
        kv: tuple[np.ndarray, np.ndarray, int] | list[KVPart] | None = None,
        keep_cache: bool = False,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C). index: which block this is (trace names, interventions).
        kv: this block's KV cache (Attention.forward), or a list of KVPart (x is then (1, N, C):
        several sequences' rows, see GPT.forward_parts)."""
        iv, name = interventions, f"blocks.{index}"
        ln = dict(trace=trace, identity=iv.no_layernorm, keep_cache=keep_cache)
        h = self.ln1.forward(x, name=f"{name}.ln1", **ln)
        zero = tuple(head for (layer, head) in iv.zero_heads if layer == index)
        a = self.attn.forward(h, trace=trace, name=f"{name}.attn", causal=not iv.no_causal_mask,
                              zero_heads=zero, kv=kv, keep_cache=keep_cache)  # (B, T, C)
        if index in iv.skip_attn:
            a = np.zeros_like(a)
            _record(trace, f"{name}.attn.output", a)
        x = a if iv.no_residual else x + a  # (B, T, C)
        _record(trace, f"{name}.resid_attn", x)

        h = self.ln2.forward(x, name=f"{name}.ln2", **ln)
        f = self.ffn.forward(h, trace=trace, name=f"{name}.ffn", keep_cache=keep_cache)
        if index in iv.skip_ffn:
            f = np.zeros_like(f)
            _record(trace, f"{name}.ffn.output", f)
        x = f if iv.no_residual else x + f  # (B, T, C)
        _record(trace, f"{name}.resid_ffn", x)
        return x

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        grads: dict[str, np.ndarray] = {}
        # x_out = x_mid + ffn(ln2(x_mid)): the residual passes dout straight through
        dh, g = self.ffn.backward(dout)
        grads.update({f"ffn.{k}": v for k, v in g.items()})
        dx_ln2, g = self.ln2.backward(dh)
        grads.update({f"ln2.{k}": v for k, v in g.items()})
        d_mid = dout + dx_ln2
        # x_mid = x + attn(ln1(x))
        dh, g = self.attn.backward(d_mid)
        grads.update({f"attn.{k}": v for k, v in g.items()})
        dx_ln1, g = self.ln1.backward(dh)
        grads.update({f"ln1.{k}": v for k, v in g.items()})
        return d_mid + dx_ln1, grads


# ----------------------------------------------------------------------------- output


class OutputLayer:
    """logits = h @ W_out + b_out: one score per vocabulary token for every position.

    With weight tying, W_out *is* the token embedding matrix transposed (a view, same memory),
    so logit_i = h . E[i]: how well the hidden state lines up with token i's embedding.
    """

    def __init__(
        self, embedding_layer: EmbeddingLayer, tie_weights: bool, output_bias: bool, rng, dtype
    ) -> None:
        self.embedding_layer = embedding_layer
        self.embedding_dim = embedding_layer.embedding_dim
        self.vocab_size = embedding_layer.vocab_size
        self.tied = tie_weights
        if not tie_weights:
            self._W_out = init_normal(rng, (self.embedding_dim, self.vocab_size), 0.02, dtype)
        self.b_out = np.zeros(self.vocab_size, dtype=dtype) if output_bias else None
        self.cache = None

    @property
    def W_out(self) -> np.ndarray:
        """(embedding_dim, vocab_size)."""
        return self.embedding_layer.embeddings.T if self.tied else self._W_out

    @W_out.setter
    def W_out(self, value: np.ndarray) -> None:
        if self.tied:
            raise AttributeError("W_out is tied to the embedding matrix; set that instead")
        self._W_out = value

    def forward(self, h: np.ndarray, *, keep_cache: bool = False) -> np.ndarray:
        """h (B, T, C) -> logits (B, T, V)."""
        logits = linear(h, self.W_out, self.b_out)  # (B, T, C) @ (C, V) -> (B, T, V)
        if keep_cache:
            self.cache = h
        return logits

    def backward(self, dlogits: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dlogits (B, T, V) -> dh (B, T, C), and the gradients of W_out (C, V) and b_out."""
        h = self.cache
        C, V = self.embedding_dim, self.vocab_size
        grads = {"W_out": h.reshape(-1, C).T @ dlogits.reshape(-1, V)}  # (C, V)
        if self.b_out is not None:
            grads["b_out"] = dlogits.reshape(-1, V).sum(axis=0)
        return linear(dlogits, self.W_out.T), grads
