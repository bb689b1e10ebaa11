"""The layers of a GPT, each with its `forward` and, right beside it, its `backward`.

Shapes in comments: B batch, T tokens, C = embedding_dim, H heads, hs = C / H (head size),
V = vocab_size (see tinygpt/network/config.py for the names of the embedding width).

A block composes four parts, each a class of its own chosen by the config, so a new
architecture is one new part:
    normalisation   LayerNorm (GPT-2) or RMSNorm (Llama)          tinygpt/network/norms.py
    positions       a learned table in EmbeddingLayer, or Rotary  tinygpt/network/attention.py
    attention       Attention (multi-head, grouped-query)         tinygpt/network/attention.py
    feed-forward    FeedForward (GELU) or SwiGLU                  tinygpt/network/mlp.py

A forward takes its main input by position and every option by keyword. It keeps what its
backward needs only when asked (`keep_cache=True`), so inference never writes to the layer and
one model can serve many users at once. With `trace` (a dict), it records its intermediate
tensors under `name` (the names are listed in docs/ARCHITECTURE.md and docs/model_parts.md).
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.attention import Attention, Rotary
from tinygpt.network.config import NO_INTERVENTIONS, GPTConfig, Interventions
from tinygpt.network.functional import linear
from tinygpt.network.mlp import FeedForward, SwiGLU, make_mlp
from tinygpt.network.norms import LayerNorm, RMSNorm, make_norm
from tinygpt.network.record import Record, init_normal, record

__all__ = [
    "Attention", "EmbeddingLayer", "FeedForward", "LayerNorm", "OutputLayer", "RMSNorm",
    "Rotary", "SwiGLU", "TransformerBlock",
]


# ----------------------------------------------------------------------------- embedding


class EmbeddingLayer:
    """Token embedding + learned position embedding: x[t] = E[ids[t]] + P[t].

    learned_positions=False (rotary models): no table, x[t] = E[ids[t]]; attention turns q and
    k by their positions instead (tinygpt.network.attention.Rotary).
    """

    def __init__(self, vocab_size: int, n_ctx: int, embedding_dim: int, rng, dtype, *,
                 learned_positions: bool = True) -> None:
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        if rng is None:  # weights about to be loaded: zeros, which cost nothing until written
            self._embeddings_t = np.zeros((embedding_dim, vocab_size), dtype=dtype)  # E^T
        else:
            self.embeddings = init_normal(rng, (vocab_size, embedding_dim), 0.02, dtype)  # E (V, C)
        self.position_embeddings = (init_normal(rng, (n_ctx, embedding_dim), 0.01, dtype)
                                    if learned_positions else None)  # P (n_ctx, C)
        self.cache = None

    @property
    def embeddings(self) -> np.ndarray:
        """E (V, C): row i is token i's vector. A view of E^T (C, V), the array actually kept:
        the tied output layer multiplies by W_out = E^T, and a product with a W kept row by row
        as (in, out), like every other weight, is the fast one (for 64 tokens of a 49,152-token
        vocabulary, 1 thread: 67 ms against 90 ms with W read as a transposed E)."""
        return self._embeddings_t.T

    @embeddings.setter
    def embeddings(self, value: np.ndarray) -> None:
        self._embeddings_t = np.ascontiguousarray(np.asarray(value).T)  # (C, V)

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """E[ids] (..., C), C-contiguous: for each of the C rows of E^T, the entries of ids."""
        return np.ascontiguousarray(np.moveaxis(self._embeddings_t[:, ids], 0, -1))

    def forward(
        self,
        ids: np.ndarray,
        *,
        start: int = 0,
        trace: Record | None = None,
        no_position: bool = False,
        keep_cache: bool = False,
    ) -> np.ndarray:
        """ids (B, T) -> x (B, T, C). start: the position of ids[:, 0] (> 0 with a KV cache)."""
        T = ids.shape[1]
        tok = self.rows(ids)  # (B, T, C)
        if self.position_embeddings is None:
            x = tok  # rotary models: positions enter in attention
            pos = np.zeros((T, self.embedding_dim), dtype=tok.dtype)
        else:
            pos = self.position_embeddings[start : start + T]  # (T, C)
            if no_position:
                pos = np.zeros_like(pos)
            x = tok + pos  # (B, T, C)
        record(trace, "embed.token", tok)
        record(trace, "embed.position", np.broadcast_to(pos, tok.shape))
        record(trace, "embed.sum", x)
        if keep_cache:
            self.cache = ids
        return x

    def backward(self, dx: np.ndarray) -> dict[str, np.ndarray]:
        """dx (B, T, C) -> gradients of E (V, C) and P (n_ctx, C); ids get no gradient."""
        ids = self.cache
        T = ids.shape[1]
        # (V, C): each row sums the gradients of the positions holding its token
        d_emb = np.zeros(self.embeddings.shape, self.embeddings.dtype)
        np.add.at(d_emb, ids.reshape(-1), dx.reshape(-1, dx.shape[-1]))
        if self.position_embeddings is None:
            return {"embeddings": d_emb}
        d_pos = np.zeros_like(self.position_embeddings)  # (n_ctx, C)
        d_pos[:T] = dx.sum(axis=0)  # position t is used once per sequence
        return {"embeddings": d_emb, "position_embeddings": d_pos}


# ----------------------------------------------------------------------------- block


class TransformerBlock:
    """Pre-norm block: x = x + Attention(norm1(x)); x = x + FeedForward(norm2(x)).

    The parts come from the config: LayerNorm or RMSNorm, learned or rotary positions, one
    key/value head per query head or fewer, a GELU MLP or SwiGLU.
    """

    def __init__(self, config: GPTConfig, rng, dtype) -> None:
        C = config.embedding_dim
        rotary = Rotary(config.head_size, config.rope_theta) if config.position == "rope" else None
        self.ln1 = make_norm(config, dtype)
        self.attn = Attention(C, config.n_head, config.n_layer, rng, dtype,
                              n_kv_head=config.n_kv_head, rotary=rotary,
                              bias=config.attn_bias, proj_bias=config.proj_bias)
        self.ln2 = make_norm(config, dtype)
        self.ffn = make_mlp(config, rng, dtype)

    def forward(
        self,
        x: np.ndarray,
        *,
        index: int,
        trace: Record | None = None,
        interventions: Interventions = NO_INTERVENTIONS,
        kv: tuple[np.ndarray, np.ndarray, int] | None = None,
        keep_cache: bool = False,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C). index: which block this is (trace names, interventions).
        kv: this block's KV cache (Attention.forward)."""
        iv, name = interventions, f"blocks.{index}"
        edit = iv.edit if iv.edits else None  # the edits at this block's points, if any
        if edit is not None:
            x = edit(f"{name}.resid_pre", x)
        ln = dict(trace=trace, identity=iv.no_layernorm, keep_cache=keep_cache)
        h = self.ln1.forward(x, name=f"{name}.ln1", **ln)
        zero = tuple(head for (layer, head) in iv.zero_heads if layer == index)
        a = self.attn.forward(h, trace=trace, name=f"{name}.attn", causal=not iv.no_causal_mask,
                              rotate=not iv.no_position, zero_heads=zero, kv=kv,
                              keep_cache=keep_cache, edit=edit)  # (B, T, C)
        if index in iv.skip_attn or edit is not None:
            a = np.zeros_like(a) if index in iv.skip_attn else edit(f"{name}.attn.output", a)
            record(trace, f"{name}.attn.output", a)
        x = a if iv.no_residual else x + a  # (B, T, C)
        record(trace, f"{name}.resid_attn", x)

        h = self.ln2.forward(x, name=f"{name}.ln2", **ln)
        f = self.ffn.forward(h, trace=trace, name=f"{name}.ffn", keep_cache=keep_cache,
                             edit=edit)
        if index in iv.skip_ffn or edit is not None:
            f = np.zeros_like(f) if index in iv.skip_ffn else edit(f"{name}.ffn.output", f)
            record(trace, f"{name}.ffn.output", f)
        x = f if iv.no_residual else x + f  # (B, T, C)
        record(trace, f"{name}.resid_ffn", x)
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
