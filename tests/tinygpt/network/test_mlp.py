"""tinygpt.network.mlp: SwiGLU against finite differences and torch autograd."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.network.test_gradients import F64, check_layer, jitter
from tinygpt.network.config import GPTConfig
from tinygpt.network.mlp import FeedForward, SwiGLU, make_mlp

NAMES = ("W_gate", "W_up", "W_down", "b_gate", "b_up", "b_down")


def swiglu(bias: bool) -> SwiGLU:
    ffn = SwiGLU(4, 6, 2, np.random.default_rng(0), F64, bias=bias)
    params = {n: getattr(ffn, n) for n in NAMES if getattr(ffn, n) is not None}
    jitter(list(params.values()), np.random.default_rng(1), scale=0.5)
    return ffn


@pytest.mark.parametrize("bias", [False, True])
def test_swiglu_backward_against_finite_differences(bias):
    ffn, rng = swiglu(bias), np.random.default_rng(2)
    params = {n: getattr(ffn, n) for n in NAMES if getattr(ffn, n) is not None}
    assert len(params) == (6 if bias else 3)
    x = rng.standard_normal((2, 3, 4)) * 2  # gates on both sides of SiLU's dip
    check_layer(lambda x, keep: ffn.forward(x, keep_cache=keep), ffn.backward, x, params, rng)


def test_swiglu_against_torch_autograd():
    torch = pytest.importorskip("torch")
    ffn, rng = swiglu(True), np.random.default_rng(3)
    x, G = rng.standard_normal((2, 5, 4)) * 2, rng.standard_normal((2, 5, 4))
    trace: dict = {}
    y = ffn.forward(x, trace=trace, keep_cache=True)
    dx, grads = ffn.backward(G)
    t = {n: torch.tensor(getattr(ffn, n), requires_grad=True) for n in NAMES}
    tx = torch.tensor(x, requires_grad=True)
    gate, up = tx @ t["W_gate"] + t["b_gate"], tx @ t["W_up"] + t["b_up"]
    ty = (torch.nn.functional.silu(gate) * up) @ t["W_down"] + t["b_down"]
    (ty * torch.tensor(G)).sum().backward()
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(trace["ffn.gate"], gate.detach().numpy(), rtol=1e-13)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-11, atol=1e-13)
    for name in NAMES:
        np.testing.assert_allclose(grads[name], t[name].grad.numpy(), rtol=1e-11, atol=1e-13)


def test_a_neuron_is_one_gate_times_up_product():
    ffn = swiglu(False)
    x = np.random.default_rng(4).standard_normal((1, 3, 4))
    trace: dict = {}
    out = ffn.forward(x, trace=trace)
    gate, up, post = trace["ffn.gate"], trace["ffn.up"], trace["ffn.post"]
    np.testing.assert_allclose(post, gate / (1 + np.exp(-gate)) * up, rtol=1e-13)
    np.testing.assert_allclose(out, post @ ffn.W_down, rtol=1e-13)  # neurons times W_down rows


def test_make_mlp_follows_the_config():
    gelu = make_mlp(GPTConfig(n_embd=8, n_head=2, n_inner=12, mlp_bias=False), None, F64)
    assert isinstance(gelu, FeedForward) and gelu.W1.shape == (8, 12) and gelu.b1 is None
    gated = make_mlp(GPTConfig(n_embd=8, n_head=2, mlp="swiglu", n_inner=20), None, F64)
    assert isinstance(gated, SwiGLU) and gated.W_down.shape == (20, 8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_untraced_swiglu_gives_the_traced_numbers_exactly(dtype):
    """The inference path (silu_gate, one array written in place) is a shortcut of the traced
    one: the same bits, whatever is kept."""
    ffn = SwiGLU(8, 12, 2, np.random.default_rng(5), dtype)
    x = (np.random.default_rng(6).standard_normal((2, 7, 8)) * 3).astype(dtype)
    plain = ffn.forward(x)
    traced = ffn.forward(x, trace={})
    kept = ffn.forward(x, keep_cache=True)
    assert plain.dtype == dtype
    np.testing.assert_array_equal(plain, traced)
    np.testing.assert_array_equal(plain, kept)
