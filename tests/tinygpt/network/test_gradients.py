"""Every backward pass against centred finite differences, in float64.

For a layer with output `out` we pick a random upstream gradient G and use the scalar
loss L = sum(out * G). Then dL/dout = G, so the layer's `backward(G)` must equal the
numerical derivative (L(p + eps) - L(p - eps)) / (2 eps) for every input and parameter entry.

Parameters are perturbed with noise first, so LayerNorm's gamma is not exactly 1, biases
are not exactly 0, and no gradient is right "by accident".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tinygpt.network.model import (
    GPT,
    Attention,
    EmbeddingLayer,
    FeedForward,
    GPTConfig,
    LayerNorm,
    OutputLayer,
    TransformerBlock,
)

F64 = np.float64
EPS = 1e-5
TOL = 1e-6
FLOOR = 1e-3


def rel_error(analytic: np.ndarray, numeric: np.ndarray) -> np.ndarray:
    """|a - n| / max(|a| + |n|, FLOOR): relative error, absolute for gradients near zero.

    Some gradients are exactly zero (a key bias cannot change a softmax row), and the finite
    difference of those is rounding noise of about 1e-10: the floor keeps that from counting.
    """
    return np.abs(analytic - numeric) / np.maximum(np.abs(analytic) + np.abs(numeric), FLOOR)


def numeric_grad(
    loss_fn: Callable[[], float], array: np.ndarray, indices: list[tuple] | None = None
) -> tuple[np.ndarray, list[tuple]]:
    """Centred differences of loss_fn w.r.t. entries of `array` (perturbed in place).

    Returns the numerical gradient at `indices` (all entries when None) and the indices.
    """
    if indices is None:
        indices = list(np.ndindex(array.shape))
    out = np.empty(len(indices))
    for n, idx in enumerate(indices):
        old = array[idx]
        array[idx] = old + EPS
        up = loss_fn()
        array[idx] = old - EPS
        down = loss_fn()
        array[idx] = old
        out[n] = (up - down) / (2 * EPS)
    return out, indices


def sample_indices(shape: tuple, n: int, rng: np.random.Generator) -> list[tuple] | None:
    """All entries of a small array, else n random ones."""
    size = int(np.prod(shape))
    if size <= n:
        return None
    flat = rng.choice(size, size=n, replace=False)
    return [np.unravel_index(i, shape) for i in flat]


def assert_grad_close(
    name: str, analytic: np.ndarray, loss_fn, array: np.ndarray, rng, n_samples: int = 400
) -> None:
    assert analytic.shape == array.shape, f"{name}: shape {analytic.shape} != {array.shape}"
    indices = sample_indices(array.shape, n_samples, rng)
    numeric, indices = numeric_grad(loss_fn, array, indices)
    picked = np.array([analytic[idx] for idx in indices])
    err = rel_error(picked, numeric)
    worst = int(np.argmax(err))
    assert err[worst] <= TOL, (
        f"{name}{indices[worst]}: analytic {picked[worst]:.10g} vs numeric "
        f"{numeric[worst]:.10g} (relative error {err[worst]:.2e})"
    )


def jitter(arrays: list[np.ndarray], rng: np.random.Generator, scale: float = 0.3) -> None:
    """Add noise in place so no parameter sits at a special value (gamma = 1, beta = 0)."""
    for a in arrays:
        a += scale * rng.standard_normal(a.shape)


def check_layer(forward, backward, x: np.ndarray, params: dict[str, np.ndarray], rng) -> None:
    """Check dx and every parameter gradient of a layer with L = sum(forward(x) * G)."""
    G = rng.standard_normal(forward(x, False).shape)

    def loss() -> float:
        return float(np.sum(forward(x, False) * G))

    forward(x, True)
    dx, grads = backward(G)
    assert set(grads) == set(params), f"gradient names {sorted(grads)} != {sorted(params)}"
    assert_grad_close("dx", dx, loss, x, rng)
    for name, p in params.items():
        assert_grad_close(name, grads[name], loss, p, rng)


# ----------------------------------------------------------------------------- layers


def test_layernorm_backward():
    rng = np.random.default_rng(0)
    ln = LayerNorm(6, 1e-5, F64)
    jitter([ln.gamma, ln.beta], rng)
    x = rng.standard_normal((2, 3, 6))
    check_layer(
        lambda x, keep: ln.forward(x, keep_cache=keep),
        ln.backward,
        x,
        {"gamma": ln.gamma, "beta": ln.beta},
        rng,
    )


@pytest.mark.parametrize("n_head", [1, 2])
def test_attention_backward(n_head):
    rng = np.random.default_rng(1)
    attn = Attention(8, n_head, 2, rng, F64)
    names = ("W_qkv", "b_qkv", "W_proj", "b_proj")
    params = {name: getattr(attn, name) for name in names}
    # large enough weights that the attention pattern is far from uniform
    jitter(list(params.values()), rng, scale=0.5)
    x = rng.standard_normal((2, 5, 8))
    check_layer(
        lambda x, keep: attn.forward(x, keep_cache=keep), attn.backward, x, params, rng
    )


@pytest.mark.parametrize("activation", ["gelu_tanh", "gelu"])
def test_feedforward_backward(activation):
    rng = np.random.default_rng(2)
    ffn = FeedForward(4, 2, activation, rng, F64)
    params = {"W1": ffn.W1, "b1": ffn.b1, "W2": ffn.W2, "b2": ffn.b2}
    jitter(list(params.values()), rng)
    x = rng.standard_normal((2, 3, 4))
    check_layer(lambda x, keep: ffn.forward(x, keep_cache=keep), ffn.backward, x, params, rng)


def test_transformer_block_backward():
    rng = np.random.default_rng(3)
    config = GPTConfig(vocab_size=5, n_ctx=8, n_embd=8, n_head=2, n_layer=2)
    block = TransformerBlock(config, rng, F64)
    params = {
        f"{sub}.{name}": getattr(getattr(block, sub), name)
        for sub, names in {
            "ln1": ("gamma", "beta"),
            "attn": ("W_qkv", "b_qkv", "W_proj", "b_proj"),
            "ln2": ("gamma", "beta"),
            "ffn": ("W1", "b1", "W2", "b2"),
        }.items()
        for name in names
    }
    jitter(list(params.values()), rng, scale=0.3)
    x = rng.standard_normal((2, 4, 8))
    check_layer(
        lambda x, keep: block.forward(x, index=0, keep_cache=keep), block.backward, x, params, rng
    )


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_output_layer_backward(tied, bias):
    rng = np.random.default_rng(4)
    emb = EmbeddingLayer(7, 4, 5, rng, F64)
    out = OutputLayer(emb, tied, bias, rng, F64)
    jitter([emb.embeddings] + ([] if tied else [out.W_out]), rng)
    if bias:
        jitter([out.b_out], rng)
    h = rng.standard_normal((2, 3, 5))
    # tied: W_out is a view of the embedding matrix, so perturbing the embeddings is the check
    params = {"W_out": emb.embeddings.T if tied else out.W_out}
    if bias:
        params["b_out"] = out.b_out
    check_layer(lambda h, keep: out.forward(h, keep_cache=keep), out.backward, h, params, rng)


def test_embedding_backward():
    rng = np.random.default_rng(5)
    emb = EmbeddingLayer(6, 8, 4, rng, F64)
    jitter([emb.embeddings, emb.position_embeddings], rng)
    ids = np.array([[1, 3, 1, 5, 1], [0, 3, 3, 2, 5]])  # repeats: gradients must add up
    G = rng.standard_normal((2, 5, 4))

    def loss() -> float:
        return float(np.sum(emb.forward(ids) * G))

    emb.forward(ids, keep_cache=True)
    grads = emb.backward(G)
    assert set(grads) == {"embeddings", "position_embeddings"}
    assert_grad_close("embeddings", grads["embeddings"], loss, emb.embeddings, rng)
    assert_grad_close(
        "position_embeddings", grads["position_embeddings"], loss, emb.position_embeddings, rng
    )


# ----------------------------------------------------------------------------- whole model


def tiny_model(tied: bool, bias: bool, activation: str = "gelu_tanh") -> GPT:
    config = GPTConfig(
        vocab_size=11, n_ctx=8, n_embd=8, n_head=2, n_layer=2,
        tie_weights=tied, output_bias=bias, activation=activation,
    )
    model = GPT(config, seed=7, dtype=F64)
    rng = np.random.default_rng(8)
    for p in model.parameters().values():
        p += 0.2 * rng.standard_normal(p.shape)
    return model


def tiny_batch(ignore_index: int = -1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    ids = rng.integers(0, 11, size=(2, 6))
    targets = rng.integers(0, 11, size=(2, 6))
    targets[0, 2] = targets[1, 5] = targets[1, 0] = ignore_index  # these positions do not count
    return ids, targets


@pytest.mark.parametrize(
    "tied, bias, activation",
    [(True, False, "gelu_tanh"), (False, False, "gelu"), (True, True, "gelu"),
     (False, True, "gelu_tanh")],
)
def test_model_loss_and_grads(tied, bias, activation):
    model = tiny_model(tied, bias, activation)
    ids, targets = tiny_batch()
    loss, grads = model.loss_and_grads(ids, targets, ignore_index=-1)
    params = model.parameters()
    assert set(grads) == set(params)
    assert ("output.W_out" in params) == (not tied)
    assert ("output.b_out" in params) == bias

    def loss_fn() -> float:
        return model.loss_and_grads(ids, targets, ignore_index=-1)[0]

    assert loss_fn() == pytest.approx(loss)
    rng = np.random.default_rng(10)
    for name, p in params.items():
        assert_grad_close(name, grads[name], loss_fn, p, rng, n_samples=60)


def test_tied_embedding_gradient_is_counted_once():
    """The shared matrix gets (input-side gradient + output-side gradient), exactly once each."""
    model = tiny_model(tied=True, bias=False)
    ids, targets = tiny_batch()
    _, grads = model.loss_and_grads(ids, targets)

    def loss_fn() -> float:
        return model.loss_and_grads(ids, targets)[0]

    E = model.embedding.embeddings
    numeric, _ = numeric_grad(loss_fn, E)  # every entry
    err = rel_error(grads["embedding.embeddings"].ravel(), numeric)
    assert err.max() <= TOL
    # the output side alone, or the output side twice, would be wrong
    only_output = model.output.backward(_dlogits(model, ids, targets))[1]["W_out"].T
    assert rel_error(only_output.ravel(), numeric).max() > 1e-3
    twice = grads["embedding.embeddings"] + only_output
    assert rel_error(twice.ravel(), numeric).max() > 1e-3


def _dlogits(model: GPT, ids, targets) -> np.ndarray:
    from tinygpt.network.functional import cross_entropy

    logits = model._forward(np.asarray(ids), keep_cache=True)
    return cross_entropy(logits, targets)[1]


def test_loss_is_the_mean_over_kept_targets():
    model = tiny_model(tied=True, bias=False)
    ids, targets = tiny_batch()
    loss, _ = model.loss_and_grads(ids, targets)
    kept = targets != -1
    # the mean is over the kept positions only: compare with the per-position loss by hand
    logits = model.forward(ids)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    manual = -np.mean(logp[kept, targets[kept]])
    assert loss == pytest.approx(manual, rel=1e-12)


def test_checker_catches_a_wrong_gradient():
    """The check is strict enough to notice a 0.01% error in one parameter's gradient."""
    model = tiny_model(tied=True, bias=False)
    ids, targets = tiny_batch()
    _, grads = model.loss_and_grads(ids, targets)
    rng = np.random.default_rng(11)
    p = model.parameters()["blocks.1.ln2.gamma"]
    with pytest.raises(AssertionError):
        assert_grad_close(
            "gamma", grads["blocks.1.ln2.gamma"] * 1.0001,
            lambda: model.loss_and_grads(ids, targets)[0], p, rng,
        )


MODERN = dict(norm="rmsnorm", position="rope", rope_theta=100.0, mlp="swiglu", n_inner=12,
              n_head=4, n_kv_head=2)


@pytest.mark.parametrize("tied, bias", [(True, False), (False, True)])
def test_modern_model_loss_and_grads(tied, bias):
    """A Llama-shaped model (RMSNorm, rotary positions, 4 query heads on 2 key/value heads,
    SwiGLU): every parameter's gradient against finite differences."""
    config = GPTConfig(vocab_size=11, n_ctx=8, n_embd=8, n_layer=2, tie_weights=tied,
                       attn_bias=bias, proj_bias=bias, mlp_bias=bias, **MODERN)
    model = GPT(config, seed=7, dtype=F64)
    rng = np.random.default_rng(8)
    for p in model.parameters().values():
        p += 0.2 * rng.standard_normal(p.shape)
    ids, targets = tiny_batch()
    loss, grads = model.loss_and_grads(ids, targets)
    params = model.parameters()
    assert set(grads) == set(params)
    assert "embedding.position_embeddings" not in params and "ln_f.beta" not in params
    assert params["blocks.0.attn.W_k"].shape == (8, 4)  # 2 key/value heads of size 2

    def loss_fn() -> float:
        return model.loss_and_grads(ids, targets)[0]

    for name, p in params.items():
        assert_grad_close(name, grads[name], loss_fn, p, rng, n_samples=40)
