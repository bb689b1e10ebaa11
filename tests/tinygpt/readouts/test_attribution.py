"""tinygpt.readouts.attribution: the parts add up to the model's own logit, and each part is checked
against an independent computation from the trace tensors and the weights."""

from pathlib import Path

import numpy as np
import pytest

import tinygpt
from tinygpt import GPT, GPTConfig, load, logit_attribution, logit_difference_attribution
from tinygpt.network.functional import gelu_forward
from tinygpt.readouts.attribution import neuron_effects, neuron_token_effects

ROOT = Path(__file__).resolve().parents[3]
SHAPES = {
    "small-tied": dict(vocab_size=50, n_ctx=16, n_embd=16, n_head=2, n_layer=2),
    "untied-bias": dict(
        vocab_size=97, n_ctx=24, n_embd=24, n_head=3, n_layer=3, tie_weights=False,
        output_bias=True,
    ),
    "tied-bias-1-layer": dict(
        vocab_size=40, n_ctx=12, n_embd=32, n_head=4, n_layer=1, output_bias=True
    ),
    "untied-1-head-exact-gelu": dict(
        vocab_size=60, n_ctx=20, n_embd=8, n_head=1, n_layer=4, tie_weights=False,
        activation="gelu",
    ),
}  # fmt: skip
TOLERANCE = {np.float32: 1e-4, np.float64: 1e-9}


def random_model(shape: str, dtype=np.float32, seed: int = 0) -> GPT:
    """A random model whose LayerNorms and biases are far from 1 / 0 (so every part counts)."""
    model = GPT(GPTConfig(**SHAPES[shape]), seed=seed, dtype=np.float64)
    rng = np.random.default_rng(seed + 10)
    for p in model.parameters().values():
        p += rng.standard_normal(p.shape) * 0.3
    return model.astype(dtype)


def prompt(model: GPT, seed: int = 1) -> np.ndarray:
    n = model.config.n_ctx - 3
    return np.random.default_rng(seed).integers(0, model.config.vocab_size, n)


def linearised_readout(model: GPT, residual: np.ndarray, vector: np.ndarray, token: int) -> float:
    """vector's share of the logit, the long way: centred on its own mean, divided by the std
    of the whole residual (recomputed here from the final LayerNorm's input, not read from the
    trace), times gamma, multiplied elementwise with W_out[:, token] and summed."""
    r = residual.astype(np.float64)
    std = np.sqrt(np.mean((r - r.mean()) ** 2) + model.ln_f.eps)
    v = vector.astype(np.float64)
    gamma = model.ln_f.gamma.astype(np.float64)
    return float(np.sum((v - v.mean()) / std * gamma * model.output.W_out[:, token]))


# ----------------------------------------------------------------------------- exact sums


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_parts_sum_to_the_models_logit(shape, dtype):
    model = random_model(shape, dtype)
    ids = prompt(model)
    logits = model.forward(ids)  # a plain forward, not the trace the attribution reads
    rng = np.random.default_rng(2)
    for position in (0, len(ids) // 2, len(ids) - 1):
        top = int(np.argmax(logits[position]))
        for token in (top, int(rng.integers(model.config.vocab_size))):
            a = logit_attribution(model, ids, position, token)
            assert a.total == pytest.approx(float(logits[position, token]), abs=TOLERANCE[dtype])
            assert abs(a.values.sum() - a.total) <= TOLERANCE[dtype]
            assert a.values.dtype == np.float64 and len(a.values) == len(a.names)
    assert np.abs(logits).max() > 1.0  # the sums are not between near-zero numbers


@pytest.mark.parametrize("shape", list(SHAPES))
def test_names_and_keys(shape):
    model = random_model(shape)
    cfg = model.config
    a = logit_attribution(model, prompt(model), 2, 5)
    with_bias = cfg.output_bias
    assert len(a.names) == len(a.keys) == 2 + cfg.n_layer * (cfg.n_head + 2) + 1 + with_bias
    assert a.names[:2] == ["token embedding", "position embedding"]
    assert a.keys[:2] == [("token_embedding",), ("position_embedding",)]
    last = cfg.n_layer - 1
    i = a.keys.index(("head", last, cfg.n_head - 1))
    assert a.names[i] == f"block {last} head {cfg.n_head - 1}"
    assert a.names[i + 1] == f"block {last} attention bias"
    assert a.keys[i + 1] == ("attention_bias", last)
    assert a.names[i + 2] == f"block {last} feed-forward"
    assert a.keys[i + 2] == ("feed_forward", last)
    assert a.names[i + 3] == "final LayerNorm shift"
    assert ("output_bias",) in a.keys if with_bias else ("output_bias",) not in a.keys
    assert (a.position, a.token, a.versus) == (2, 5, None)


@pytest.mark.parametrize("shape", ["small-tied", "untied-bias"])
def test_each_part_equals_an_independent_computation_from_the_trace(shape):
    model = random_model(shape, np.float64)
    cfg = model.config
    H, hs = cfg.n_head, cfg.head_size
    ids = prompt(model)
    _, trace = model.run_with_trace(ids)
    position, token = len(ids) - 2, 7
    a = logit_attribution(model, ids, position, token)
    part = dict(zip(a.keys, a.values, strict=True))
    residual = trace["ln_f.input"][position]

    def share(vector):
        return linearised_readout(model, residual, vector, token)

    E, P = model.embedding.embeddings, model.embedding.position_embeddings
    assert part[("token_embedding",)] == pytest.approx(share(E[ids[position]]), abs=1e-10)
    assert part[("position_embedding",)] == pytest.approx(share(P[position]), abs=1e-10)
    for layer, block in enumerate(model.blocks):
        weights = trace[f"blocks.{layer}.attn.weights"]  # (H, T, T) softmax rows
        v = trace[f"blocks.{layer}.attn.v"]  # (H, T, hs)
        for h in range(H):
            # this head alone: its weighted values in its columns, the other heads' zeroed
            merged = np.zeros(cfg.n_embd)
            merged[h * hs : (h + 1) * hs] = weights[h, position] @ v[h]
            expected = share(merged @ block.attn.W_proj)
            assert part[("head", layer, h)] == pytest.approx(expected, abs=1e-10)
        assert part[("attention_bias", layer)] == pytest.approx(share(block.attn.b_proj))
        post = trace[f"blocks.{layer}.ffn.post"][position]
        ffn = share(post @ block.ffn.W2 + block.ffn.b2)
        assert part[("feed_forward", layer)] == pytest.approx(ffn, abs=1e-10)
    beta_share = float(model.ln_f.beta @ model.output.W_out[:, token])
    assert part[("final_layernorm_shift",)] == pytest.approx(beta_share, abs=1e-12)
    if cfg.output_bias:
        assert part[("output_bias",)] == pytest.approx(float(model.output.b_out[token]))


def test_residual_parts_add_up_to_the_final_layernorm_input():
    model = random_model("untied-bias", np.float64)
    ids = prompt(model)
    _, trace = model.run_with_trace(ids)
    _, _, writes = tinygpt.readouts.attribution.residual_parts(model, trace, 4)
    np.testing.assert_allclose(writes.sum(axis=0), trace["ln_f.input"][4], rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_logit_difference(dtype):
    model = random_model("untied-bias", dtype)
    ids = prompt(model)
    logits = model.forward(ids)
    position, a_tok, b_tok = 6, 3, 40
    d = logit_difference_attribution(model, ids, position, a_tok, b_tok)
    expected = float(logits[position, a_tok]) - float(logits[position, b_tok])
    assert d.total == pytest.approx(expected, abs=TOLERANCE[dtype])
    assert abs(d.values.sum() - d.total) <= TOLERANCE[dtype]
    a = logit_attribution(model, ids, position, a_tok)
    b = logit_attribution(model, ids, position, b_tok)
    np.testing.assert_allclose(d.values, a.values - b.values, rtol=0, atol=TOLERANCE[dtype])
    assert d.names == a.names and (d.token, d.versus) == (a_tok, b_tok)


def test_largest_orders_by_size():
    model = random_model("small-tied")
    a = logit_attribution(model, prompt(model), 5, 9)
    top = a.largest(3)
    assert len(top) == 3
    sizes = np.abs(a.values)
    assert list(sizes[top]) == sorted(sizes, reverse=True)[:3]


# ----------------------------------------------------------------------------- real models


def test_shipped_model():
    model, tok = load(ROOT / "models" / "shakespeare.npz")
    ids = np.array(tok.encode("ROMEO:\nBut soft, what light through yonder window breaks?"))
    logits, trace = model.run_with_trace(ids)
    for position in (0, len(ids) - 1):
        token = int(np.argmax(logits[position]))
        a = logit_attribution(model, ids, position, token, trace=trace)
        assert a.total == float(logits[position, token])
        assert abs(a.values.sum() - a.total) <= 1e-4
    model64 = model.astype(np.float64)
    a = logit_attribution(model64, ids, len(ids) - 1, token)
    assert abs(a.values.sum() - float(model64.forward(ids)[-1, token])) <= 1e-9


def test_gpt2_folder(tmp_path):
    from tests.tinygpt.checkpoint.test_files import tiny_model, tiny_tokenizer, write_gpt2_folder

    write_gpt2_folder(tmp_path / "gpt2", tiny_model(seed=4), tiny_tokenizer())
    model, tok = load(tmp_path / "gpt2")
    ids = np.array(tok.encode("hello there, he said"))[: model.config.n_ctx]
    logits = model.forward(ids)
    for dtype, tolerance in ((np.float32, 1e-4), (np.float64, 1e-9)):
        m = model.astype(dtype)
        for position in range(len(ids)):
            token = int(np.argmax(logits[position]))
            a = logit_attribution(m, ids, position, token)
            assert abs(a.values.sum() - float(m.forward(ids)[position, token])) <= tolerance


# ----------------------------------------------------------------------------- neurons


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("shape", ["small-tied", "untied-bias", "untied-1-head-exact-gelu"])
def test_neuron_effects_sum_to_the_feed_forward_part(shape, dtype):
    model = random_model(shape, dtype)
    ids = prompt(model)
    _, trace = model.run_with_trace(ids)
    position, token = len(ids) - 1, 11
    a = logit_attribution(model, ids, position, token, trace=trace)
    for layer in range(model.config.n_layer):
        n = neuron_effects(model, ids, position, layer, token, trace=trace)
        assert n.effects.shape == n.activations.shape == (4 * model.config.n_embd,)
        ffn_part = a.values[a.keys.index(("feed_forward", layer))]
        assert n.total == pytest.approx(ffn_part, abs=TOLERANCE[dtype] / 10)
        assert n.effects.sum() + n.bias_effect == pytest.approx(n.total, abs=1e-12)
        # the activations are GELU(LN2(x) @ W1 + b1), recomputed here from the LN2 output
        ffn = model.blocks[layer].ffn
        pre = trace[f"blocks.{layer}.ln2.output"][position] @ ffn.W1 + ffn.b1
        expected, _ = gelu_forward(pre, approximate=model.config.activation == "gelu_tanh")
        np.testing.assert_allclose(n.activations, expected, rtol=1e-5, atol=1e-6)
    # the parts with every feed-forward layer opened up into neurons still add up to the logit
    opened = sum(
        neuron_effects(model, ids, position, layer, token, trace=trace).effects.sum()
        + neuron_effects(model, ids, position, layer, token, trace=trace).bias_effect
        for layer in range(model.config.n_layer)
    )
    others = sum(v for k, v in zip(a.keys, a.values, strict=True) if k[0] != "feed_forward")
    assert opened + others == pytest.approx(a.total, abs=TOLERANCE[dtype])


def test_neuron_token_effects_match_one_neurons_share():
    model = random_model("untied-bias", np.float64)
    ids = prompt(model)
    position, layer = 8, 1
    n = neuron_effects(model, ids, position, layer, 13)
    j = int(n.largest(1)[0])
    per_token = neuron_token_effects(model, ids, position, layer, j)
    assert per_token.shape == (model.config.vocab_size,)
    assert per_token[13] == pytest.approx(n.effects[j], abs=1e-12)
    for token in (0, 50, 96):
        assert per_token[token] == pytest.approx(
            neuron_effects(model, ids, position, layer, token).effects[j], abs=1e-12
        )


# ----------------------------------------------------------------------------- input checks


def test_trace_reuse_and_a_trace_of_other_tokens():
    model = random_model("small-tied")
    ids = prompt(model)
    _, trace = model.run_with_trace(ids)
    a = logit_attribution(model, ids, 3, 4, trace=trace)
    np.testing.assert_array_equal(a.values, logit_attribution(model, ids, 3, 4).values)
    with pytest.raises(ValueError, match="not the trace of these ids"):
        logit_attribution(model, ids[:-1], 3, 4, trace=trace)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(position=99), "position must be in"),
        (dict(position=-1), "position must be in"),
        (dict(position=True), "position must be an integer"),
        (dict(token=50), "token id must be in"),
        (dict(token=2.0), "token id must be an integer"),
        (dict(ids=[]), "non-empty"),
        (dict(ids=[1.5, 2.0]), "integers"),
        (dict(ids=[1, 77]), "vocabulary"),
        (dict(ids=list(range(17))), "context"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    model = random_model("small-tied")
    args = dict(ids=[1, 2, 3], position=1, token=4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        logit_attribution(model, args["ids"], args["position"], args["token"])


def test_bad_layer_and_neuron():
    model = random_model("small-tied")
    with pytest.raises(ValueError, match="layer must be in"):
        neuron_effects(model, [1, 2], 1, 2, 4)
    with pytest.raises(ValueError, match="neuron must be in"):
        neuron_token_effects(model, [1, 2], 1, 0, 64)


# ----------------------------------------------------------------------------- Llama / Qwen2 parts

MODERN = dict(vocab_size=50, n_ctx=16, n_embd=12, n_head=6, n_layer=2, norm="rmsnorm",
              position="rope", n_kv_head=2, mlp="swiglu", n_inner=20, tie_weights=False,
              attn_bias=True, proj_bias=False, mlp_bias=False)  # Qwen2's biases


def modern_model(dtype=np.float64) -> GPT:
    model = GPT(GPTConfig(**MODERN), seed=3, dtype=np.float64)
    rng = np.random.default_rng(4)
    for p in model.parameters().values():
        p += rng.standard_normal(p.shape) * 0.3
    return model.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_rmsnorm_rope_gqa_swiglu_parts_sum_to_the_models_logit(dtype):
    model = modern_model(dtype)
    ids = prompt(model)
    logits = model.forward(ids)
    for position in (0, len(ids) - 1):
        a = logit_attribution(model, ids, position, 9)
        assert abs(a.values.sum() - float(logits[position, 9])) <= TOLERANCE[dtype]
    # no position table, no o_proj bias, no final shift: none of them is a part
    assert a.keys[0] == ("token_embedding",) and ("position_embedding",) not in a.keys
    assert not any(k[0] in ("attention_bias", "final_layernorm_shift") for k in a.keys)
    assert len(a.keys) == 1 + 2 * (6 + 1)


def test_a_grouped_head_part_is_its_weights_on_its_shared_values_through_the_frozen_rms():
    model = modern_model()
    ids = prompt(model)
    _, trace = model.run_with_trace(ids)
    position, token, layer, h = len(ids) - 1, 7, 1, 5  # head 5 reads key/value head 5 // 3 = 1
    part = dict(zip(*(lambda a: (a.keys, a.values))(
        logit_attribution(model, ids, position, token)), strict=True))
    weights = trace[f"blocks.{layer}.attn.weights"][h, position]  # (T,)
    v = trace[f"blocks.{layer}.attn.v"][h // 3]  # (T, hs) the shared value head
    W_proj = model.blocks[layer].attn.W_proj[2 * h : 2 * h + 2]  # head h's rows (hs = 2)
    write = (weights @ v) @ W_proj  # (C,)
    r = trace["ln_f.input"][position]
    rms = np.sqrt(np.mean(r * r) + model.ln_f.eps)  # recomputed, not read from the trace
    expected = np.sum(write / rms * model.ln_f.gamma * model.output.W_out[:, token])
    assert part[("head", layer, h)] == pytest.approx(expected, abs=1e-10)


def test_swiglu_neuron_effects_add_up_to_the_feed_forward_part():
    model = modern_model()
    ids = prompt(model)
    position, token = 4, 11
    a = logit_attribution(model, ids, position, token)
    effects = neuron_effects(model, ids, position, 0, token)
    assert effects.bias_effect == 0.0 and effects.activations.shape == (20,)
    assert effects.total == pytest.approx(dict(zip(a.keys, a.values, strict=True))[
        ("feed_forward", 0)], abs=1e-10)
    per_token = neuron_token_effects(model, ids, position, 0, 3)
    assert per_token[token] == pytest.approx(effects.effects[3], abs=1e-10)
