"""tinygpt.network.functional against plain Python math, finite differences, and its own source: it
holds the only log-sum-exp in tinygpt."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from tinygpt.network.functional import (
    cross_entropy,
    gelu,
    gelu_backward,
    gelu_forward,
    largest_k,
    linear,
    log_softmax,
    logsumexp,
    softmax,
    token_nll,
)

TINYGPT = Path(__file__).resolve().parents[3] / "tinygpt"


def softmax_by_hand(row):
    z = sum(math.exp(v) for v in row)
    return [math.exp(v) / z for v in row]


def test_softmax_and_log_softmax_match_the_formula():
    x = np.random.default_rng(0).normal(size=(3, 7)) * 4
    for axis in (-1, 0):
        p, logp = softmax(x, axis=axis), log_softmax(x, axis=axis)
        rows = x if axis == -1 else x.T
        ref = np.array([softmax_by_hand(r) for r in rows])
        ref = ref if axis == -1 else ref.T
        np.testing.assert_allclose(p, ref, rtol=1e-12)
        np.testing.assert_allclose(logp, np.log(ref), rtol=1e-12)


def test_softmax_is_stable_and_gives_masked_scores_zero():
    p = softmax(np.array([[1000.0, 999.0, -np.inf], [-np.inf, 5.0, -np.inf]]))
    assert np.isfinite(p).all() and p[0, 2] == 0.0
    assert p[0, 0] == pytest.approx(1 / (1 + math.exp(-1)))
    assert p[1].tolist() == [0.0, 1.0, 0.0]
    assert log_softmax(np.array([[0.0, -np.inf]]))[0].tolist() == [0.0, -np.inf]
    assert log_softmax(np.array([1e4, 0.0]))[1] == pytest.approx(-1e4)  # no underflow to -inf


def test_softmax_keeps_float32():
    assert softmax(np.ones((2, 3), dtype=np.float32)).dtype == np.float32


def test_cross_entropy_loss_and_gradient_by_hand():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 3, 5)) * 2
    targets = np.array([[0, 4, -1], [2, -1, 1]])  # -1: ignored
    loss, dlogits = cross_entropy(logits, targets)
    kept = [(b, t) for b in range(2) for t in range(3) if targets[b, t] != -1]
    ref = -sum(math.log(softmax_by_hand(logits[b, t])[targets[b, t]]) for b, t in kept)
    assert loss == pytest.approx(ref / len(kept), rel=1e-12)
    for b in range(2):
        for t in range(3):
            expected = np.zeros(5)
            if targets[b, t] != -1:  # (softmax - onehot) / n
                expected = np.array(softmax_by_hand(logits[b, t]))
                expected[targets[b, t]] -= 1
                expected /= len(kept)
            np.testing.assert_allclose(dlogits[b, t], expected, atol=1e-15)


def test_token_nll_by_hand():
    logits = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    targets = np.array([5, 0, 2, 2])
    nll = token_nll(logits, targets)
    assert nll.dtype == np.float64
    for t in range(4):
        p = softmax_by_hand(logits[t].astype(np.float64))[targets[t]]
        assert nll[t] == pytest.approx(-math.log(p), rel=1e-12)


def test_token_nll_matches_cross_entropy():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((2, 3, 7))
    targets = rng.integers(0, 7, (2, 3))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    expected = -np.log(np.take_along_axis(p, targets[..., None], -1)[..., 0])
    np.testing.assert_allclose(token_nll(logits, targets), expected, rtol=1e-12)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_matches_the_formula(approximate):
    x = np.linspace(-5, 5, 41)
    for i, v in enumerate(x):
        if approximate:
            ref = 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
        else:
            ref = v * 0.5 * (1 + math.erf(v / math.sqrt(2)))
        assert gelu(x, approximate=approximate)[i] == pytest.approx(ref, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_backward_matches_finite_differences(approximate):
    x = np.linspace(-4, 4, 33)
    y, saved = gelu_forward(x, approximate=approximate)
    np.testing.assert_array_equal(y, gelu(x, approximate=approximate))
    h = 1e-6
    up, down = gelu(x + h, approximate=approximate), gelu(x - h, approximate=approximate)
    numeric = (up - down) / (2 * h)
    np.testing.assert_allclose(gelu_backward(x, saved, approximate=approximate), numeric,
                               rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("approximate", [True, False])
def test_gelu_keeps_float32(approximate):
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    y, saved = gelu_forward(x, approximate=approximate)
    assert y.dtype == saved.dtype == gelu_backward(x, saved, approximate=approximate).dtype
    assert y.dtype == np.float32


def test_the_only_log_sum_exp_is_in_functional():
    """No other module exponentiates scores and takes a log of their sum itself."""
    pattern = re.compile(r"np\.log\(\s*(np\.)?sum\(\s*np\.exp"  # log(sum(exp(...)))
                         r"|np\.log\(np\.exp\(.*\)\.sum"  # log(exp(...).sum())
                         r"|def logsumexp|special\.logsumexp")  # calling functional's is fine
    for path in TINYGPT.rglob("*.py"):
        if path.name != "functional.py":
            assert not pattern.search(path.read_text(encoding="utf-8")), path.name


def test_logsumexp_is_log_softmax_s_normaliser():
    x = np.random.default_rng(0).normal(0, 30, size=(4, 50))
    expected = np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1)
    np.testing.assert_allclose(logsumexp(x.copy()), expected, rtol=1e-12)
    np.testing.assert_allclose(x - logsumexp(x)[:, None], log_softmax(x), rtol=1e-12)
    scratch = x.copy()
    np.testing.assert_allclose(logsumexp(scratch, overwrite=True), expected, rtol=1e-12)


@pytest.mark.parametrize("V", [7, 300, 1000, 50257])
@pytest.mark.parametrize("k", [1, 5, 40])
def test_largest_k_finds_the_values_a_full_sort_finds(V, k):
    """Against np.sort: the same k values, largest first, also with many ties (rounded rows)
    and rows whose best values sit in the tail past the last whole block."""
    rng = np.random.default_rng(V + k)
    for x in (rng.standard_normal((6, V)).astype(np.float32),
              np.round(rng.standard_normal((6, V))),
              np.concatenate([np.zeros((2, V - 3)), np.full((2, 3), 9.0)], axis=1)):
        ids = largest_k(x, k)
        want = -np.sort(-x, axis=-1)[:, :min(k, V)]
        np.testing.assert_array_equal(np.take_along_axis(x, ids, axis=-1), want)
    assert largest_k(rng.standard_normal((2, 3, V)), k).shape == (2, 3, min(k, V))


@pytest.mark.parametrize("rows", [1, 2, 5, 8, 9])
@pytest.mark.parametrize("layout", ["transposed", "contiguous"])
def test_linear_of_a_few_rows_is_the_same_product(rows, layout):
    """A few rows (decoding steps of several beams) times W in either layout (a transposed
    view, read back in a backward, or C-contiguous rows) against the product in float64."""
    rng = np.random.default_rng(rows)
    E = rng.standard_normal((1000, 48)).astype(np.float32)  # (V, C)
    W = E.T if layout == "transposed" else np.ascontiguousarray(E.T)  # (C, V)
    b = rng.standard_normal(1000).astype(np.float32)
    x = rng.standard_normal((rows, 1, 48)).astype(np.float32)  # (B, T, C): beams, one token
    y = linear(x, W, b)
    want = x.astype(np.float64) @ W.astype(np.float64) + b
    assert y.shape == (rows, 1, 1000) and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)
