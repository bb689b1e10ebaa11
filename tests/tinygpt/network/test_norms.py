"""tinygpt.network.norms: RMSNorm against its formula, finite differences and torch autograd."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.network.test_gradients import F64, check_layer, jitter
from tinygpt.network.config import GPTConfig
from tinygpt.network.norms import LayerNorm, RMSNorm, make_norm


def rmsnorm(dim: int = 6, eps: float = 1e-5) -> RMSNorm:
    norm = RMSNorm(dim, eps, F64)
    jitter([norm.gamma], np.random.default_rng(0))
    return norm


def test_rmsnorm_is_x_over_its_root_mean_square_times_gamma():
    norm = rmsnorm()
    x = np.random.default_rng(1).standard_normal((2, 3, 6))
    trace: dict = {}
    y = norm.forward(x, trace=trace, name="n")
    rms = np.sqrt((x**2).mean(-1) + norm.eps)
    np.testing.assert_allclose(trace["n.rms"], rms, rtol=1e-15)
    np.testing.assert_allclose(y, x / rms[..., None] * norm.gamma, rtol=1e-14)
    assert not np.allclose(y.mean(-1), 0)  # no mean subtraction: a row keeps its mean's sign
    assert sorted(trace) == ["n.input", "n.normalized", "n.output", "n.rms"]


def test_rmsnorm_backward_against_finite_differences():
    norm, rng = rmsnorm(), np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6))
    check_layer(lambda x, keep: norm.forward(x, keep_cache=keep), norm.backward, x,
                {"gamma": norm.gamma}, rng)


def test_rmsnorm_backward_against_torch_autograd():
    torch = pytest.importorskip("torch")
    norm, rng = rmsnorm(), np.random.default_rng(3)
    x, G = rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 4, 6))
    norm.forward(x, keep_cache=True)
    dx, grads = norm.backward(G)
    tx = torch.tensor(x, requires_grad=True)
    tg = torch.tensor(norm.gamma, requires_grad=True)
    ty = tx * torch.rsqrt(tx.pow(2).mean(-1, keepdim=True) + norm.eps) * tg  # LlamaRMSNorm
    (ty * torch.tensor(G)).sum().backward()
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(grads["gamma"], tg.grad.numpy(), rtol=1e-12)


def test_make_norm_follows_the_config():
    assert isinstance(make_norm(GPTConfig(), F64), LayerNorm)
    norm = make_norm(GPTConfig(norm="rmsnorm", layer_norm_eps=1e-6), F64)
    assert isinstance(norm, RMSNorm) and norm.eps == 1e-6 and norm.beta is None


@pytest.mark.parametrize("kind", [RMSNorm, LayerNorm])
def test_the_untraced_norm_gives_the_traced_numbers_exactly(kind):
    """Untraced, the scale is written over x_hat in place: the same bits as the traced path,
    and x itself untouched."""
    rng = np.random.default_rng(7)
    norm = kind(6, 1e-5, np.float32)
    norm.gamma = rng.standard_normal(6).astype(np.float32)
    if norm.beta is not None:
        norm.beta = rng.standard_normal(6).astype(np.float32)
    x = rng.standard_normal((2, 5, 6)).astype(np.float32)
    before = x.copy()
    plain = norm.forward(x)
    trace: dict = {}
    traced = norm.forward(x, trace=trace)
    np.testing.assert_array_equal(plain, traced)
    np.testing.assert_array_equal(x, before)
    assert trace["ln.normalized"] is not trace["ln.output"]
