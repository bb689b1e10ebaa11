"""The two feed-forward parts: GPT-2's GELU MLP and Llama's gated SwiGLU, forward and backward.

Both map each token's vector C -> I -> C (I = config.inner_dim, 4C for GPT-2) and have I
'neurons': a neuron's activation is one number of `ffn.post` (T, I), and `W_down` row n is
what neuron n writes into the residual per unit of activation.
"""

from __future__ import annotations

import math

import numpy as np

from tinygpt.network.config import GPTConfig
from tinygpt.network.functional import (
    gelu_backward,
    gelu_forward,
    linear,
    silu_backward,
    silu_forward,
    silu_gate,
)
from tinygpt.network.record import Record, init_normal


def _bias_grad(d: np.ndarray) -> np.ndarray:
    return d.reshape(-1, d.shape[-1]).sum(axis=0)


class FeedForward:
    """Position-wise MLP: C -> 4C -> GELU -> C, the same for every token."""

    def __init__(self, embedding_dim: int, n_layer: int, activation: str, rng, dtype, *,
                 inner: int | None = None, bias: bool = True) -> None:
        C, I = embedding_dim, (4 * embedding_dim if inner is None else inner)
        self.approximate = activation == "gelu_tanh"
        self.W1 = init_normal(rng, (C, I), 0.02, dtype)
        self.b1 = np.zeros(I, dtype=dtype) if bias else None
        self.W2 = init_normal(rng, (I, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b2 = np.zeros(C, dtype=dtype) if bias else None
        self.cache = None

    @property
    def W_down(self) -> np.ndarray:
        """(I, C) row n: what neuron n writes into the residual (W2; Llama calls it down)."""
        return self.W2

    @property
    def b_down(self) -> np.ndarray | None:
        return self.b2

    def forward(
        self, x: np.ndarray, *, trace: Record | None = None, name: str = "ffn",
        keep_cache: bool = False, edit=None,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C). edit: the Interventions' edit, called on the neurons at
        the point "<name>.post"."""
        pre = linear(x, self.W1, self.b1)  # (B, T, 4C)
        post, saved = gelu_forward(pre, approximate=self.approximate)  # (B, T, 4C)
        if edit is not None:
            post = edit(f"{name}.post", post)
        out = linear(post, self.W2, self.b2)  # (B, T, C)
        if trace is not None:
            trace[f"{name}.pre"], trace[f"{name}.post"], trace[f"{name}.output"] = pre, post, out
        if keep_cache:
            self.cache = (x, pre, saved, post)
        return out

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dout (B, T, C) -> dx (B, T, C), and the gradients of W1, b1, W2, b2."""
        x, pre, saved, post = self.cache
        C, I = x.shape[-1], pre.shape[-1]
        grads = {"W2": post.reshape(-1, I).T @ dout.reshape(-1, C)}
        if self.b2 is not None:
            grads["b2"] = _bias_grad(dout)
        dgelu = gelu_backward(pre, saved, approximate=self.approximate)  # (B, T, 4C)
        dpre = linear(dout, self.W2.T)  # (B, T, 4C)
        dpre *= dgelu
        grads["W1"] = x.reshape(-1, C).T @ dpre.reshape(-1, I)
        if self.b1 is not None:
            grads["b1"] = _bias_grad(dpre)
        return linear(dpre, self.W1.T), grads


class SwiGLU:
    """Gated MLP (Llama, Qwen2): down(SiLU(gate(x)) * up(x)).

    Two projections up to I numbers: the gate, through SiLU(z) = z * sigmoid(z), says how much
    of each `up` number passes. Neuron n's activation is SiLU(gate_n) * up_n.
    """

    def __init__(self, embedding_dim: int, inner: int, n_layer: int, rng, dtype, *,
                 bias: bool = False) -> None:
        C, I = embedding_dim, inner
        self.W_gate = init_normal(rng, (C, I), 0.02, dtype)
        self.W_up = init_normal(rng, (C, I), 0.02, dtype)
        self.W_down = init_normal(rng, (I, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b_gate = np.zeros(I, dtype=dtype) if bias else None
        self.b_up = np.zeros(I, dtype=dtype) if bias else None
        self.b_down = np.zeros(C, dtype=dtype) if bias else None
        self.cache = None

    def forward(
        self, x: np.ndarray, *, trace: Record | None = None, name: str = "ffn",
        keep_cache: bool = False, edit=None,
    ) -> np.ndarray:
        """x (B, T, C) -> (B, T, C). edit: the Interventions' edit, called on the neurons at
        the point "<name>.post"."""
        gate = linear(x, self.W_gate, self.b_gate)  # (B, T, I)
        up = linear(x, self.W_up, self.b_up)  # (B, T, I)
        if trace is None and not keep_cache:  # the neurons alone: one array, not four
            post = silu_gate(gate, up)  # (B, T, I)
        else:
            act, sig = silu_forward(gate)  # (B, T, I)
            post = act * up  # (B, T, I): the neurons
        if edit is not None:
            post = edit(f"{name}.post", post)
        out = linear(post, self.W_down, self.b_down)  # (B, T, C)
        if trace is not None:
            trace[f"{name}.gate"], trace[f"{name}.up"] = gate, up
            trace[f"{name}.post"], trace[f"{name}.output"] = post, out
        if keep_cache:
            self.cache = (x, gate, sig, act, up, post)
        return out

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dout (B, T, C) -> dx (B, T, C), and the gradients of the three projections."""
        x, gate, sig, act, up, post = self.cache
        C, I = x.shape[-1], post.shape[-1]
        grads = {"W_down": post.reshape(-1, I).T @ dout.reshape(-1, C)}
        dpost = linear(dout, self.W_down.T)  # (B, T, I)
        dup = dpost * act  # post = act * up
        dgate = dpost * up * silu_backward(gate, sig)
        rows = x.reshape(-1, C)
        grads["W_gate"] = rows.T @ dgate.reshape(-1, I)
        grads["W_up"] = rows.T @ dup.reshape(-1, I)
        if self.b_down is not None:
            grads.update(b_down=_bias_grad(dout), b_gate=_bias_grad(dgate), b_up=_bias_grad(dup))
        return linear(dgate, self.W_gate.T) + linear(dup, self.W_up.T), grads


def make_mlp(config: GPTConfig, rng, dtype) -> FeedForward | SwiGLU:
    """The feed-forward part the config names."""
    C, L = config.embedding_dim, config.n_layer
    if config.mlp == "swiglu":
        return SwiGLU(C, config.inner_dim, L, rng, dtype, bias=config.mlp_bias)
    return FeedForward(C, L, config.activation, rng, dtype, inner=config.n_inner,
                       bias=config.mlp_bias)
