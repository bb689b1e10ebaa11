"""Model invariants checked on the trace, against references written out in the test."""

import math

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, Interventions

CFG = GPTConfig(vocab_size=50, n_ctx=16, n_embd=16, n_head=4, n_layer=2)
H, HS, C, V, L = CFG.n_head, CFG.head_size, CFG.n_embd, CFG.vocab_size, CFG.n_layer
IDS = np.array([3, 17, 4, 4, 49, 0, 22, 8, 31, 9])
T = len(IDS)


def make_model(dtype=np.float32, **kw) -> GPT:
    model = GPT(GPTConfig(**{**CFG.to_dict(), **kw}), seed=0, dtype=dtype)
    rng = np.random.default_rng(1)
    for p in model.parameters().values():  # LayerNorm and biases away from 1 / 0
        p += (rng.standard_normal(p.shape) * 0.1).astype(p.dtype)
    return model


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def traced(model):
    return model.run_with_trace(IDS)


def run(model, **iv):
    return model.run_with_trace(IDS, Interventions(**iv))


# ----------------------------------------------------------------------------- trace contents


def expected_shapes() -> dict[str, tuple]:
    shapes = {
        "tokens": (T,),
        "embed.token": (T, C),
        "embed.position": (T, C),
        "embed.sum": (T, C),
        "logits": (T, V),
    }
    ln = {"input": (T, C), "mean": (T,), "var": (T,), "normalized": (T, C), "output": (T, C)}
    for i in range(L):
        b = f"blocks.{i}"
        for name in ("ln1", "ln2"):
            shapes.update({f"{b}.{name}.{k}": s for k, s in ln.items()})
        for k in ("q", "k", "v", "heads"):
            shapes[f"{b}.attn.{k}"] = (H, T, HS)
        for k in ("scores", "scores_masked", "weights"):
            shapes[f"{b}.attn.{k}"] = (H, T, T)
        shapes[f"{b}.attn.output"] = (T, C)
        shapes[f"{b}.resid_attn"] = (T, C)
        shapes[f"{b}.ffn.pre"] = (T, 4 * C)
        shapes[f"{b}.ffn.post"] = (T, 4 * C)
        shapes[f"{b}.ffn.output"] = (T, C)
        shapes[f"{b}.resid_ffn"] = (T, C)
    shapes.update({f"ln_f.{k}": s for k, s in ln.items()})
    return shapes


def test_trace_has_every_documented_name_and_shape(traced):
    _, trace = traced
    expected = expected_shapes()
    assert set(trace) == set(expected)
    for name, shape in expected.items():
        assert trace[name].shape == shape, name
    np.testing.assert_array_equal(trace["tokens"], IDS)


def test_trace_logits_equal_plain_forward(model, traced):
    logits, trace = traced
    np.testing.assert_array_equal(trace["logits"], logits)
    np.testing.assert_allclose(model.forward(IDS), logits, atol=1e-6)
    batch = np.stack([IDS, IDS[::-1]])
    out = model.forward(batch)
    assert out.shape == (2, T, V)
    np.testing.assert_allclose(out[0], logits, atol=1e-5)
    np.testing.assert_allclose(out[1], model.forward(IDS[::-1]), atol=1e-5)


def test_causality_later_tokens_do_not_change_earlier_logits(model):
    changed = IDS.copy()
    changed[6:] = (changed[6:] + 1) % V
    a, b = model.forward(IDS), model.forward(changed)
    np.testing.assert_array_equal(a[:6], b[:6])
    assert not np.allclose(a[6:], b[6:])


# ----------------------------------------------------------------------------- invariants


def test_embedding_is_a_row_lookup_plus_position(model, traced):
    _, trace = traced
    np.testing.assert_array_equal(trace["embed.token"], model.embedding.embeddings[IDS])
    np.testing.assert_array_equal(trace["embed.position"], model.embedding.position_embeddings[:T])
    np.testing.assert_allclose(trace["embed.sum"], trace["embed.token"] + trace["embed.position"])


@pytest.mark.parametrize("ln", ["blocks.0.ln1", "blocks.1.ln2", "ln_f"])
def test_layernorm_normalizes_each_token(model, traced, ln):
    _, trace = traced
    x_hat = trace[f"{ln}.normalized"]
    np.testing.assert_allclose(x_hat.mean(axis=-1), 0, atol=1e-5)
    np.testing.assert_allclose(x_hat.var(axis=-1), 1, atol=1e-3)  # eps makes it a hair below 1
    x = trace[f"{ln}.input"].astype(np.float64)
    np.testing.assert_allclose(trace[f"{ln}.mean"], x.mean(-1), atol=1e-5)
    np.testing.assert_allclose(trace[f"{ln}.var"], x.var(-1), rtol=1e-4)
    layer = model.ln_f if ln == "ln_f" else getattr(model.blocks[int(ln[7])], ln.split(".")[-1])
    np.testing.assert_allclose(
        trace[f"{ln}.output"], x_hat * layer.gamma + layer.beta, atol=1e-6
    )


def reference_attention(x: np.ndarray, attn) -> tuple[np.ndarray, np.ndarray]:
    """Attention one head and one query at a time, with plain loops (float64)."""
    x = x.astype(np.float64)
    W, b = attn.W_qkv.astype(np.float64), attn.b_qkv.astype(np.float64)
    q_all, k_all, v_all = np.split(x @ W + b, 3, axis=-1)
    weights = np.zeros((H, T, T))
    heads = np.zeros((H, T, HS))
    for h in range(H):
        cols = slice(h * HS, (h + 1) * HS)
        q, k, v = q_all[:, cols], k_all[:, cols], v_all[:, cols]
        for t in range(T):
            s = np.array([q[t] @ k[j] / math.sqrt(HS) for j in range(t + 1)])
            e = np.exp(s - s.max())
            weights[h, t, : t + 1] = e / e.sum()
            heads[h, t] = weights[h, t, : t + 1] @ v[: t + 1]
    out = np.concatenate(list(heads), axis=-1) @ attn.W_proj + attn.b_proj
    return weights, out


@pytest.mark.parametrize("layer", range(L))
def test_attention_matches_a_loop_reference(model, traced, layer):
    _, trace = traced
    b = f"blocks.{layer}"
    weights, out = reference_attention(trace[f"{b}.ln1.output"], model.blocks[layer].attn)
    np.testing.assert_allclose(trace[f"{b}.attn.weights"], weights, atol=1e-5)
    np.testing.assert_allclose(trace[f"{b}.attn.output"], out, atol=1e-5)


def test_attention_rows_sum_to_one_and_future_is_exactly_zero(traced):
    _, trace = traced
    future = np.triu(np.ones((T, T), bool), k=1)
    for i in range(L):
        w = trace[f"blocks.{i}.attn.weights"]
        np.testing.assert_allclose(w.sum(axis=-1), 1, atol=1e-6)
        assert (w[:, future] == 0).all()
        assert (w[:, ~future] > 0).all()
        masked = trace[f"blocks.{i}.attn.scores_masked"]
        assert np.isneginf(masked[:, future]).all()
        np.testing.assert_array_equal(
            masked[:, ~future], trace[f"blocks.{i}.attn.scores"][:, ~future]
        )


def test_scores_are_scaled_dot_products(traced):
    _, trace = traced
    q, k = trace["blocks.0.attn.q"], trace["blocks.0.attn.k"]
    np.testing.assert_allclose(
        trace["blocks.0.attn.scores"], q @ k.transpose(0, 2, 1) / math.sqrt(HS), atol=1e-6
    )


def test_ffn_is_gelu_mlp(model, traced):
    _, trace = traced
    ffn = model.blocks[1].ffn
    x = trace["blocks.1.ln2.output"]
    pre = x @ ffn.W1 + ffn.b1
    np.testing.assert_allclose(trace["blocks.1.ffn.pre"], pre, atol=1e-6)
    gelu_tanh = 0.5 * pre * (1 + np.tanh(math.sqrt(2 / math.pi) * (pre + 0.044715 * pre**3)))
    np.testing.assert_allclose(trace["blocks.1.ffn.post"], gelu_tanh, atol=1e-6)
    np.testing.assert_allclose(
        trace["blocks.1.ffn.output"], gelu_tanh @ ffn.W2 + ffn.b2, atol=1e-5
    )


def test_exact_gelu_uses_erf():
    model = make_model(activation="gelu")
    _, trace = model.run_with_trace(IDS)
    pre = trace["blocks.0.ffn.pre"].astype(np.float64)
    exact = np.vectorize(lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))))(pre)
    np.testing.assert_allclose(trace["blocks.0.ffn.post"], exact, atol=1e-6)


def test_residual_stream_is_the_sum_of_every_write(traced):
    _, trace = traced
    total = trace["embed.sum"].astype(np.float64)
    for i in range(L):
        total = total + trace[f"blocks.{i}.attn.output"]
        np.testing.assert_allclose(trace[f"blocks.{i}.resid_attn"], total, atol=1e-5)
        total = total + trace[f"blocks.{i}.ffn.output"]
        np.testing.assert_allclose(trace[f"blocks.{i}.resid_ffn"], total, atol=1e-5)
    np.testing.assert_array_equal(trace["ln_f.input"], trace[f"blocks.{L - 1}.resid_ffn"])


def test_logits_are_dot_products_with_the_token_embeddings(model, traced):
    logits, trace = traced
    np.testing.assert_allclose(
        logits, trace["ln_f.output"] @ model.embedding.embeddings.T, atol=1e-5
    )


def test_tied_output_shares_memory_with_the_embedding(model):
    assert model.output.W_out.shape == (C, V)
    assert np.shares_memory(model.output.W_out, model.embedding.embeddings)
    assert model.output.b_out is None
    assert "output.W_out" not in model.parameters()


def test_untied_output_with_bias():
    model = make_model(tie_weights=False, output_bias=True)
    assert not np.shares_memory(model.output.W_out, model.embedding.embeddings)
    logits, trace = model.run_with_trace(IDS)
    expected = trace["ln_f.output"] @ model.output.W_out + model.output.b_out
    np.testing.assert_allclose(logits, expected, atol=1e-5)


# ----------------------------------------------------------------------------- interventions


def test_no_interventions_changes_nothing(model, traced):
    logits, _ = run(model)
    np.testing.assert_array_equal(logits, traced[0])


def test_zero_head(model, traced):
    logits, trace = run(model, zero_heads=frozenset({(0, 1)}))
    heads = trace["blocks.0.attn.heads"]
    assert (heads[1] == 0).all()
    for h in (0, 2, 3):
        np.testing.assert_array_equal(heads[h], traced[1]["blocks.0.attn.heads"][h])
    assert not np.allclose(logits, traced[0], atol=1e-4)
    assert np.abs(trace["blocks.1.attn.heads"][1]).max() > 0  # only layer 0's head 1 is zeroed


def test_no_causal_mask(model, traced):
    logits, trace = run(model, no_causal_mask=True)
    future = np.triu(np.ones((T, T), bool), k=1)
    for i in range(L):
        w = trace[f"blocks.{i}.attn.weights"]
        assert (w[:, future] > 0).all()
        np.testing.assert_allclose(w.sum(axis=-1), 1, atol=1e-6)
        np.testing.assert_array_equal(
            trace[f"blocks.{i}.attn.scores_masked"], trace[f"blocks.{i}.attn.scores"]
        )
    assert not np.allclose(logits[:-1], traced[0][:-1], atol=1e-4)


def test_no_position(model):
    _, trace = run(model, no_position=True)
    assert (trace["embed.position"] == 0).all()
    np.testing.assert_array_equal(trace["embed.sum"], trace["embed.token"])


def test_skip_attn(model):
    _, trace = run(model, skip_attn=frozenset({0}))
    assert (trace["blocks.0.attn.output"] == 0).all()
    np.testing.assert_array_equal(trace["blocks.0.resid_attn"], trace["embed.sum"])
    assert np.abs(trace["blocks.1.attn.output"]).max() > 0


def test_skip_ffn(model):
    _, trace = run(model, skip_ffn=frozenset({1}))
    assert (trace["blocks.1.ffn.output"] == 0).all()
    np.testing.assert_array_equal(trace["blocks.1.resid_ffn"], trace["blocks.1.resid_attn"])
    assert np.abs(trace["blocks.0.ffn.output"]).max() > 0


def test_no_layernorm(model):
    _, trace = run(model, no_layernorm=True)
    for ln in [f"blocks.{i}.{n}" for i in range(L) for n in ("ln1", "ln2")] + ["ln_f"]:
        np.testing.assert_array_equal(trace[f"{ln}.output"], trace[f"{ln}.input"])


def test_no_residual(model):
    _, trace = run(model, no_residual=True)
    for i in range(L):
        b = f"blocks.{i}"
        np.testing.assert_array_equal(trace[f"{b}.resid_attn"], trace[f"{b}.attn.output"])
        np.testing.assert_array_equal(trace[f"{b}.resid_ffn"], trace[f"{b}.ffn.output"])


def test_interventions_also_apply_to_batched_forward(model):
    iv = Interventions(zero_heads=frozenset({(1, 2)}), no_position=True)
    batched = model.forward(np.stack([IDS, IDS]), interventions=iv)
    single, _ = model.run_with_trace(IDS, iv)
    np.testing.assert_allclose(batched[0], single, atol=1e-5)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "ids, message",
    [
        (np.array([], dtype=np.int64), "empty"),
        ([], "empty"),
        (np.zeros((2, 0), dtype=np.int64), "empty"),
        ([1, 2, 50], "outside"),
        ([1, -1, 2], "outside"),
        (np.array([1.0, 2.0]), "integers"),
        (np.arange(17), "context"),
        (np.zeros((1, 2, 3), dtype=np.int64), "shape"),
    ],
)
def test_bad_input_raises_value_error(model, ids, message):
    with pytest.raises(ValueError, match=message):
        model.forward(ids)


def test_run_with_trace_takes_one_sequence(model):
    with pytest.raises(ValueError):
        model.run_with_trace(np.stack([IDS, IDS]))


def test_full_context_is_allowed(model):
    assert model.forward(np.arange(CFG.n_ctx) % V).shape == (CFG.n_ctx, V)


# ----------------------------------------------------------------------------- dtypes


def test_float64_copy(model):
    m64 = model.astype(np.float64)
    assert m64.dtype == np.float64
    for name, p in m64.parameters().items():
        assert p.dtype == np.float64, name
        assert not np.shares_memory(p, model.parameters()[name])
    assert np.shares_memory(m64.output.W_out, m64.embedding.embeddings)
    logits64, trace64 = m64.run_with_trace(IDS)
    assert logits64.dtype == np.float64
    assert all(v.dtype == np.float64 for k, v in trace64.items() if k != "tokens")
    np.testing.assert_allclose(logits64, model.forward(IDS), atol=1e-4)


def test_float32_stays_float32(traced):
    logits, trace = traced
    assert logits.dtype == np.float32
    assert all(v.dtype == np.float32 for k, v in trace.items() if k != "tokens")


# ----------------------------------------------------------------------------- structure


def test_parameter_names_are_declared_once(model):
    """GPT.parameters(), the gradients and the checkpoint all use model.parameter_shapes."""
    from tinygpt.checkpoint import shapes as checkpoint
    from tinygpt.network.model import parameter_shapes

    assert checkpoint.parameter_shapes is parameter_shapes  # what every loader checks against
    for kw in ({}, {"tie_weights": False, "output_bias": True}):
        m = make_model(**kw)
        shapes = parameter_shapes(m.config)
        assert list(m.parameters()) == list(shapes)
        assert {k: v.shape for k, v in m.parameters().items()} == shapes
        _, grads = m.loss_and_grads(IDS[None, :-1], IDS[None, 1:])
        assert set(grads) == set(shapes)


def test_submodule_finds_layers_by_name(model):
    assert model.submodule("blocks.1.ln2") is model.blocks[1].ln2
    assert model.submodule("blocks.0.attn") is model.blocks[0].attn
    assert model.submodule("ln_f") is model.ln_f and model.submodule("output") is model.output
    for bad in ("blocks.2.ln1", "blocks.-1.ln1", "blocks.x", "blocks", "nothing"):
        with pytest.raises(ValueError, match="no layer called"):
            model.submodule(bad)


def test_every_model_has_metadata(model):
    assert GPT(CFG, seed=0).metadata == {}
    m = make_model()
    m.metadata = {"note": "copied"}
    assert m.astype(np.float64).metadata == {"note": "copied"}


def test_embedding_dim_is_n_embd():
    assert CFG.embedding_dim == CFG.n_embd == C
    model = GPT(CFG, seed=0)
    assert model.embedding.embedding_dim == model.output.embedding_dim == C


def test_layer_options_are_keyword_only(model):
    """A layer's forward takes its main input by position and every option by keyword."""
    import inspect

    layers = [model.embedding, model.ln_f, model.blocks[0], model.blocks[0].attn,
              model.blocks[0].ffn, model.output]
    for layer in layers:
        params = list(inspect.signature(layer.forward).parameters.values())
        assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:]), layer
