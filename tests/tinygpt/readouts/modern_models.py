"""Small random models for the readout tests of the modern parts: a Llama-shaped one (RMSNorm,
rotary positions, grouped-query attention, SwiGLU, tied) and GPT-2's shape beside it."""

from __future__ import annotations

import numpy as np

from tinygpt.network.config import GPTConfig
from tinygpt.network.model import GPT

LLAMA = dict(vocab_size=40, n_ctx=64, n_embd=16, n_head=4, n_layer=2, norm="rmsnorm",
             position="rope", rope_theta=500.0, n_kv_head=2, mlp="swiglu", n_inner=24,
             attn_bias=False, proj_bias=False, mlp_bias=False)
QWEN2 = {**LLAMA, "attn_bias": True, "tie_weights": False}  # q/k/v biases
GPT2 = dict(vocab_size=40, n_ctx=64, n_embd=16, n_head=4, n_layer=2)


def random_model(shape: dict, dtype=np.float64, seed: int = 3) -> GPT:
    """Weights far from their start (norms' γ too), so that every part does something."""
    model = GPT(GPTConfig(**shape), seed=seed, dtype=np.float64)
    rng = np.random.default_rng(seed + 1)
    for p in model.parameters().values():
        p += rng.standard_normal(p.shape) * 0.3
    return model.astype(dtype)


def prompt(n: int = 20, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 40, n)
