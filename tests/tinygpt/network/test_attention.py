"""tinygpt.network.attention: grouped-query attention with rotary positions, against finite
differences, torch autograd (with transformers' rotate_half / repeat_kv), and the KV-cached
steps against a full forward. The shortcuts beside it are tested in tests/tinygpt/fast and
tests/tinygpt/kernels."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.network.test_gradients import F64, check_layer, jitter
from tinygpt.network.attention import Attention, Rotary

PARTS = ("W_q", "W_k", "W_v", "b_q", "b_k", "b_v", "W_proj", "b_proj")


def gqa(n_kv_head: int = 2, rope: bool = True, bias: bool = True, dtype=F64) -> Attention:
    """12 wide, 6 query heads of size 2 on n_kv_head key/value heads."""
    rng = np.random.default_rng(0)
    attn = Attention(12, 6, 2, rng, dtype, n_kv_head=n_kv_head, bias=bias, proj_bias=bias,
                     rotary=Rotary(2, 50.0) if rope else None)
    jitter([getattr(attn, n) for n in PARTS if getattr(attn, n) is not None], rng, scale=0.5)
    return attn


def params_of(attn: Attention) -> dict[str, np.ndarray]:
    return {n: getattr(attn, n) for n in PARTS if getattr(attn, n) is not None}


@pytest.mark.parametrize("n_kv_head, rope, bias", [(2, True, True), (1, True, False),
                                                   (6, True, True), (3, False, True)])
def test_backward_against_finite_differences(n_kv_head, rope, bias):
    attn, rng = gqa(n_kv_head, rope, bias), np.random.default_rng(1)
    assert attn.W_k.shape == (12, 2 * n_kv_head)  # key heads of their own, not repeated
    x = rng.standard_normal((2, 5, 12))
    check_layer(lambda x, keep: attn.forward(x, keep_cache=keep), attn.backward, x,
                params_of(attn), rng)


def test_rotary_backward_against_finite_differences():
    rotary, rng = Rotary(4, 10.0), np.random.default_rng(2)
    x, G = rng.standard_normal((1, 2, 5, 4)), rng.standard_normal((1, 2, 5, 4))
    dx = rotary.backward(G, start=3)
    eps, numeric = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        up, down = rotary.forward(x + step, 3), rotary.forward(x - step, 3)
        numeric[idx] = np.sum((up - down) * G) / (2 * eps)
    np.testing.assert_allclose(dx, numeric, rtol=1e-8, atol=1e-9)


def test_against_torch_autograd_with_transformers_rope_and_repeat_kv():
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    attn, rng = gqa(2), np.random.default_rng(3)
    x, G = rng.standard_normal((2, 7, 12)), rng.standard_normal((2, 7, 12))
    out = attn.forward(x, keep_cache=True)
    dx, grads = attn.backward(G)

    t = {n: torch.tensor(a, requires_grad=True) for n, a in params_of(attn).items()}
    tx = torch.tensor(x, requires_grad=True)

    def heads(name: str, n: int):
        y = tx @ t[f"W_{name}"] + t[f"b_{name}"]
        return y.view(2, 7, n, 2).transpose(1, 2)  # (B, n, T, hs)

    q, k, v = heads("q", 6), heads("k", 2), heads("v", 2)
    angles = torch.arange(7, dtype=torch.float64)[:, None] * torch.tensor(attn.rotary.inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    q, k = llama.apply_rotary_pos_emb(q, k, angles.cos()[None], angles.sin()[None])
    k, v = llama.repeat_kv(k, 3), llama.repeat_kv(v, 3)
    scores = q @ k.transpose(-1, -2) / np.sqrt(2)
    scores = scores.masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf"))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 7, 12)
    ty = y @ t["W_proj"] + t["b_proj"]
    (ty * torch.tensor(G)).sum().backward()
    np.testing.assert_allclose(out, ty.detach().numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for name, p in t.items():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


def test_cached_steps_store_rotated_keys_of_the_key_value_heads_only():
    attn = gqa(2)
    x = np.random.default_rng(5).standard_normal((1, 9, 12))
    keys, values = np.zeros((1, 2, 9, 2)), np.zeros((1, 2, 9, 2))
    steps = [attn.forward(x[:, :4], kv=(keys, values, 0))]
    steps += [attn.forward(x[:, t : t + 1], kv=(keys, values, t)) for t in range(4, 9)]
    trace: dict = {}
    full = attn.forward(x, trace=trace)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(keys, trace["attn.k_rot"], rtol=1e-13)  # rotated, KV heads
    assert not np.allclose(keys, trace["attn.k"])


def test_no_rotation_is_position_free():
    """rotate=False ('no positions'): without a causal mask, permuting the tokens permutes
    the outputs; with the rotation, it does not."""
    attn = gqa(2)
    x = np.random.default_rng(6).standard_normal((1, 6, 12))
    order = np.array([3, 0, 5, 1, 4, 2])
    plain = attn.forward(x, causal=False, rotate=False)
    np.testing.assert_allclose(attn.forward(x[:, order], causal=False, rotate=False),
                               plain[:, order], rtol=1e-12)
    turned = attn.forward(x[:, order], causal=False)
    assert not np.allclose(turned, attn.forward(x, causal=False)[:, order])


def test_rotary_angles_match_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=500.0)
    reference = LlamaRotaryEmbedding(config)
    positions = torch.arange(3, 40)[None]
    cos, sin = reference(torch.zeros(1, 37, 16), positions)
    ours = Rotary(16, 500.0).cos_sin(3, 37, np.float32)
    np.testing.assert_allclose(ours[0], cos[0].numpy(), atol=2e-6)
    np.testing.assert_allclose(ours[1], sin[0].numpy(), atol=2e-6)


def rotate_half(x: np.ndarray) -> np.ndarray:
    """[x1, x2] -> [-x2, x1] on the two halves of the last axis, as transformers writes it."""
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


def test_rotary_turn_is_the_rotate_half_formula_exactly():
    """forward writes x cos + rotate_half(x) sin half by half, and backward its transpose:
    the same numbers as the formula, bit for bit, from the shared table and past it."""
    rng = np.random.default_rng(5)
    for start, T in ((0, 7), (250, 9), (70000, 3)):  # first table, a larger one, past any
        rotary = Rotary(8, 10000.0)
        x = rng.standard_normal((2, 3, T, 8)).astype(np.float32)
        cos, sin = rotary.cos_sin(start, T, np.float32)
        np.testing.assert_array_equal(rotary.forward(x, start),
                                      x * cos + rotate_half(x) * sin)
        np.testing.assert_array_equal(rotary.backward(x, start),
                                      x * cos - rotate_half(x) * sin)
