"""tinygpt.network.trace: a Trace stores only what cannot be derived, and still answers every
name with the same numbers as a forward that records everything; the shortcuts that read a
trace in part (tinygpt.fast.attention) give the same numbers too."""

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, Interventions
from tinygpt.fast.attention import keys_values, trace_attention_weights, trace_heads_at
from tinygpt.network.attention import causal_mask

CFG = GPTConfig(vocab_size=50, n_ctx=512, n_embd=16, n_head=4, n_layer=3)
IDS = np.array([3, 17, 4, 4, 49, 0, 22, 8, 31, 9])
CASES = [
    Interventions(),
    Interventions(zero_heads=frozenset({(1, 2)}), skip_ffn=frozenset({0})),
    Interventions(skip_attn=frozenset({2}), no_position=True),
    Interventions(no_layernorm=True, no_causal_mask=True),
    Interventions(no_residual=True),
]
LONG_IDS = np.random.default_rng(2).integers(0, 50, 300)  # > QUERY_BLOCK: attention by blocks


@pytest.fixture(scope="module")
def model():
    model = GPT(CFG, seed=0)
    rng = np.random.default_rng(1)
    for p in model.parameters().values():  # LayerNorm and biases away from 1 / 0
        p += (rng.standard_normal(p.shape) * 0.1).astype(p.dtype)
    return model


def record_everything(model, iv, ids=IDS) -> dict:
    """The forward writing every tensor into a plain dict (what a trace used to hold)."""
    record: dict = {}
    logits = model._forward(ids[None], trace=record, interventions=iv)
    full = {name: value[0] for name, value in record.items()}
    full["tokens"], full["logits"] = ids, logits[0]
    for i in range(CFG.n_layer):
        scores = full[f"blocks.{i}.attn.scores"]
        hidden = np.zeros_like(scores, dtype=bool)
        if not iv.no_causal_mask:
            hidden[:] = causal_mask(len(ids), len(ids))
        full[f"blocks.{i}.attn.scores_masked"] = np.where(hidden, -np.inf, scores)
    return full


@pytest.mark.parametrize("ids", [IDS, LONG_IDS], ids=["short", "long"])
@pytest.mark.parametrize("iv", CASES, ids=range(len(CASES)))
def test_every_name_gives_the_numbers_of_a_full_record(model, iv, ids):
    logits, trace = model.run_with_trace(ids, iv)
    full = record_everything(model, iv, ids)
    assert sorted(trace) == sorted(full) and len(trace) == len(full)
    for name in reversed(list(full)):  # out of order: every part is computed again
        np.testing.assert_array_equal(trace[name], full[name], err_msg=name)
        assert trace[name].dtype == full[name].dtype, name
    np.testing.assert_array_equal(trace["logits"], logits)


def test_scores_masked_hides_the_future_only(model):
    _, trace = model.run_with_trace(IDS)
    masked, scores = trace["blocks.1.attn.scores_masked"], trace["blocks.1.attn.scores"]
    future = np.triu(np.ones((len(IDS), len(IDS)), dtype=bool), k=1)
    assert np.isneginf(masked[:, future]).all()
    np.testing.assert_array_equal(masked[:, ~future], scores[:, ~future])


def test_stores_a_quarter_or_less_and_is_read_only(model):
    _, trace = model.run_with_trace(IDS)
    full = sum(a.nbytes for a in record_everything(model, Interventions()).values())
    assert trace.nbytes <= full / 4 + 2**10  # with no part computed yet
    trace["blocks.0.attn.weights"]
    assert trace.nbytes < full / 2  # one block's detail is kept while it is read
    with pytest.raises(ValueError):
        trace["blocks.0.attn.weights"][0, 0, 0] = 1.0
    with pytest.raises(KeyError):
        trace["blocks.3.attn.q"]  # no such layer
    assert "blocks.2.ffn.post" in trace and "blocks.3.ffn.post" not in trace


def test_block_causal_attention_matches_the_full_path():
    """Long inputs skip the scores right of the diagonal block (tinygpt.kernels); a trace (full
    T x T path) and the plain forward agree to float32 rounding."""
    from tinygpt.kernels.blocked_attention import QUERY_BLOCK

    cfg = GPTConfig(vocab_size=50, n_ctx=3 * QUERY_BLOCK, n_embd=16, n_head=4, n_layer=2)
    model = GPT(cfg, seed=0)
    ids = np.random.default_rng(0).integers(0, 50, 2 * QUERY_BLOCK + 17)
    logits, trace = model.run_with_trace(ids)
    np.testing.assert_allclose(model.forward(ids), logits, atol=1e-5)
    cache = model.new_cache()  # a prompt read in two long pieces: start > 0
    model.forward_cached(ids[:150], cache)
    np.testing.assert_allclose(model.forward_cached(ids[150:], cache), logits[150:], atol=1e-5)


def test_reading_a_block_and_the_final_layernorm_in_turn_runs_each_once(model, monkeypatch):
    from tinygpt.network.trace import Trace

    _, trace = model.run_with_trace(IDS)
    runs = []
    real_run = Trace._run
    monkeypatch.setattr(Trace, "_run", lambda self, part, record: (
        runs.append(part), real_run(self, part, record))[1])
    for _ in range(3):  # a neuron's effect reads both (tinygpt.readouts.attribution.neuron_effects)
        post = trace["blocks.1.ffn.post"]
        var = trace["ln_f.var"]
    assert runs == ["blocks.1", "ln_f"]
    assert post.shape[0] == var.shape[0] == len(IDS)


@pytest.mark.parametrize("ids", [IDS, LONG_IDS], ids=["short", "long"])
def test_heads_at_one_position_are_the_blocks_heads(model, ids):
    _, trace = model.run_with_trace(ids)
    for layer in range(CFG.n_layer):
        heads = trace[f"blocks.{layer}.attn.heads"]  # (H, T, hs): the whole block again
        for position in (0, 1, len(ids) // 2, len(ids) - 1):
            np.testing.assert_allclose(trace_heads_at(trace, layer, position), heads[:, position],
                                       rtol=1e-5, atol=1e-6)


def test_heads_at_a_new_position_reuses_the_layers_keys_and_values(model, monkeypatch):
    """A move to any position costs one query per layer: the keys and values of the whole
    prompt are computed once per layer (and weighed in nbytes), then only read."""
    _, trace = model.run_with_trace(LONG_IDS)
    before = trace.nbytes
    rows = []
    attn = model.blocks[1].attn
    real = attn.heads_of
    monkeypatch.setattr(attn, "heads_of", lambda x, *a, **k: (rows.append(x.shape[1]),
                                                                real(x, *a, **k))[1])
    for position in (len(LONG_IDS) - 1, 3, len(LONG_IDS) // 2, 0):
        trace_heads_at(trace, 1, position)
    assert rows == [len(LONG_IDS), 1, 1, 1, 1]  # the keys and values once, then one query each
    k, v = keys_values(trace, 1)
    assert k.shape == v.shape == (1, CFG.n_head, len(LONG_IDS), CFG.head_size)
    assert not k.flags.writeable and trace.nbytes == before + k.nbytes + v.nbytes


def test_heads_at_with_interventions_reads_the_traced_block(model):
    iv = Interventions(zero_heads=frozenset({(1, 2)}), no_causal_mask=True)
    _, trace = model.run_with_trace(IDS, interventions=iv)
    for layer in range(CFG.n_layer):
        np.testing.assert_array_equal(trace_heads_at(trace, layer, 4),
                                      trace[f"blocks.{layer}.attn.heads"][:, 4])


@pytest.mark.parametrize("ids", [IDS, LONG_IDS], ids=["short", "long"])
@pytest.mark.parametrize("iv", CASES, ids=range(len(CASES)))
def test_attention_weights_and_hidden_keys_equal_the_full_record(model, iv, ids):
    """The short cut (the scores only, not the whole block) gives the block's own numbers."""
    _, trace = model.run_with_trace(ids, iv)
    full = record_everything(model, iv, ids)
    for i in (2, 0, 1):  # another layer's part is kept meanwhile: it must not be used
        np.testing.assert_array_equal(trace_attention_weights(trace, i),
                                      full[f"blocks.{i}.attn.weights"])
        np.testing.assert_array_equal(trace.hidden_keys(i),
                                      np.isneginf(full[f"blocks.{i}.attn.scores_masked"][0]))
        trace[f"blocks.{i}.ln2.output"]  # keep block i's part: the next layer must not read it


MODERN_CFG = GPTConfig(vocab_size=50, n_ctx=512, n_embd=24, n_head=6, n_layer=3,
                       norm="rmsnorm", position="rope", n_kv_head=2, mlp="swiglu", n_inner=40,
                       attn_bias=True, proj_bias=False, mlp_bias=False)


@pytest.fixture(scope="module")
def modern():
    model = GPT(MODERN_CFG, seed=0)
    rng = np.random.default_rng(1)
    for p in model.parameters().values():
        p += (rng.standard_normal(p.shape) * 0.1).astype(p.dtype)
    return model


@pytest.mark.parametrize("ids", [IDS, LONG_IDS], ids=["short", "long"])
@pytest.mark.parametrize("iv", CASES, ids=range(len(CASES)))
def test_a_llama_shaped_trace_answers_every_name_as_a_full_record(modern, iv, ids):
    logits, trace = modern.run_with_trace(ids, iv)
    full = record_everything(modern, iv, ids)
    assert sorted(trace) == sorted(full)
    for name in ("blocks.0.ln1.rms", "blocks.1.attn.q_rot", "blocks.1.attn.k_rot",
                 "blocks.2.ffn.gate", "blocks.2.ffn.up", "ln_f.rms"):
        assert name in trace
    assert "blocks.0.ln1.mean" not in trace and "blocks.0.ffn.pre" not in trace
    for name in reversed(list(full)):
        np.testing.assert_array_equal(trace[name], full[name], err_msg=name)
    for i in range(MODERN_CFG.n_layer):
        np.testing.assert_array_equal(trace_attention_weights(trace, i),
                                      full[f"blocks.{i}.attn.weights"])
        for position in (0, len(ids) - 1):
            np.testing.assert_allclose(trace_heads_at(trace, i, position),
                                       full[f"blocks.{i}.attn.heads"][:, position], atol=1e-6)
    assert trace["blocks.0.attn.k"].shape == (2, len(ids), 4)  # the key/value heads only


def test_no_position_turns_the_rotation_off(modern):
    """Without positions and without the causal mask, the model cannot tell the order: the
    last token's logits are the same for every order of the same tokens."""
    iv = Interventions(no_position=True, no_causal_mask=True)
    order = np.random.default_rng(3).permutation(len(IDS))
    same = modern.forward(IDS, iv)[-1], modern.forward(IDS[order], iv)[order == len(IDS) - 1][0]
    np.testing.assert_allclose(*same, rtol=1e-4, atol=1e-5)
    plain = Interventions(no_causal_mask=True)
    moved = modern.forward(IDS, plain)[-1], modern.forward(IDS[order], plain)[order == 9][0]
    assert not np.allclose(*moved, atol=1e-3)
