"""Patching, ablation and steering, each against separate plain forwards written out here:
the grid's shortcut (shared lower layers, patched runs side by side) against one forward per
cell, block by block, with the activation swapped by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.modern_models import GPT2, LLAMA, QWEN2, prompt, random_model
from tinygpt import readouts as ti
from tinygpt.decoding.generation import generate
from tinygpt.network.functional import log_softmax

SHAPES = {"gpt2": GPT2, "llama": LLAMA, "qwen2": QWEN2}


@pytest.fixture(scope="module", params=list(SHAPES))
def model(request):
    return random_model(SHAPES[request.param])


def _by_hand(model, corrupt, clean, layer, position, site):
    """One patched forward, block by block, with no edits: the block of `layer` is taken apart
    (norm, attention, norm, feed-forward) so that the swap is written here."""
    _, clean_trace = model.run_with_trace(clean)
    x = model.embedding.forward(corrupt[None])  # (1, T, C)
    for i, block in enumerate(model.blocks):
        if i == layer:
            if site == "resid_pre":
                x = x.copy()
                x[0, position] = ti.interventions.resid_pre(clean_trace, i)[position]
            a = block.attn.forward(block.ln1.forward(x))
            if site == "attn_out":
                a[0, position] = clean_trace[f"blocks.{i}.attn.output"][position]
            x = x + a
            f = block.ffn.forward(block.ln2.forward(x))
            if site == "mlp_out":
                f[0, position] = clean_trace[f"blocks.{i}.ffn.output"][position]
            x = x + f
        else:
            x = block.forward(x, index=i)
    return model.readout(x)[0, -1]  # (V,)


@pytest.mark.parametrize("site", ti.SITES)
def test_the_grid_equals_separate_forwards(model, site):
    clean, corrupt = prompt(9, seed=1), prompt(9, seed=2)
    result = ti.activation_patching(model, clean, corrupt, 7, site)
    assert result.scores.shape == (model.config.n_layer, 9)
    for layer in range(model.config.n_layer):
        for t in range(9):
            logits = _by_hand(model, corrupt, clean, layer, t, site)
            assert result.scores[layer, t] == pytest.approx(log_softmax(logits)[7], abs=1e-9)
            np.testing.assert_allclose(ti.patched_logits(model, clean, corrupt, layer, t, site),
                                       logits, atol=1e-9)
    assert result.clean_score == pytest.approx(log_softmax(model.forward(clean)[-1])[7])
    assert result.corrupt_score == pytest.approx(log_softmax(model.forward(corrupt)[-1])[7])


def test_clean_into_clean_gives_the_clean_score_everywhere(model):
    ids = prompt(8)
    for site in ti.SITES:
        result = ti.activation_patching(model, ids, ids, 3, site)
        np.testing.assert_allclose(result.scores, result.clean_score, atol=1e-9)


def test_only_the_position_where_the_prompts_differ_matters(model):
    """Prompts that differ in their last token alone: a patch there restores the clean run at
    any layer, a patch elsewhere swaps equal activations (fails if a patch lands elsewhere)."""
    clean = prompt(6)
    corrupt = clean.copy()
    corrupt[-1] = (clean[-1] + 1) % 40
    result = ti.activation_patching(model, clean, corrupt, 5)
    # only the last position differs: patching it (any layer) restores the clean run
    np.testing.assert_allclose(result.scores[:, -1], result.clean_score, atol=1e-9)
    # patching an earlier position swaps equal activations: the corrupted score stays
    np.testing.assert_allclose(result.scores[:, :-1], result.corrupt_score, atol=1e-9)


def test_the_grid_covers_the_last_positions_and_reports_progress(model):
    calls = []
    result = ti.activation_patching(model, prompt(10, 1), prompt(10, 2), 4, max_positions=3,
                                    progress=lambda done, total: calls.append((done, total)))
    assert list(result.positions) == [7, 8, 9]
    assert np.isnan(result.scores[:, :7]).all() and np.isfinite(result.scores[:, 7:]).all()
    n = model.config.n_layer
    assert calls == [(i + 1, n) for i in range(n)]
    recovered = result.recovered[:, 7:]
    expected = (result.scores[:, 7:] - result.corrupt_score) / (
        result.clean_score - result.corrupt_score)
    np.testing.assert_allclose(recovered, expected)


def test_bad_input_gets_a_clear_message(model):
    with pytest.raises(ValueError, match="same number of tokens"):
        ti.activation_patching(model, prompt(5), prompt(6), 1)
    with pytest.raises(ValueError, match="site"):
        ti.activation_patching(model, prompt(5), prompt(5), 1, site="resid_post")
    with pytest.raises(ValueError, match="answer_id"):
        ti.activation_patching(model, prompt(5), prompt(5), 40)
    with pytest.raises(ValueError, match="non-empty"):
        ti.activation_patching(model, [], [], 1)
    with pytest.raises(ValueError, match="head"):
        ti.ablated_logits(model, prompt(5), heads=[(0, model.config.n_head)])
    with pytest.raises(ValueError, match="layer"):
        ti.steering_vector(model, prompt(3), prompt(3), model.config.n_layer)


def test_zero_ablation_of_heads_is_the_what_if_switch(model):
    from tinygpt.network.config import Interventions

    ids = prompt(7)
    heads = [(0, 1), (1, 3)]
    np.testing.assert_array_equal(
        ti.ablated_logits(model, ids, heads=heads),
        model.forward(ids, Interventions(zero_heads=frozenset(heads)))[-1])


@pytest.mark.parametrize("mean", [False, True])
def test_ablating_neurons_of_the_last_block_by_hand(model, mean):
    ids = prompt(7)
    last = model.config.n_layer - 1
    block = model.blocks[last]
    _, trace = model.run_with_trace(ids)
    post = trace[f"blocks.{last}.ffn.post"].copy()  # (T, I)
    picked = [2, 5]
    post[:, picked] = post[:, picked].mean(axis=0) if mean else 0.0
    ffn = post @ block.ffn.W_down + (0 if block.ffn.b_down is None else block.ffn.b_down)
    expected = model.readout(trace[f"blocks.{last}.resid_attn"] + ffn)[-1]
    got = ti.ablated_logits(model, ids, neurons=[(last, n) for n in picked], mean=mean)
    np.testing.assert_allclose(got, expected, atol=1e-9)


def test_mean_ablation_of_a_head_of_the_last_block_by_hand(model):
    ids = prompt(7)
    last = model.config.n_layer - 1
    block = model.blocks[last]
    _, trace = model.run_with_trace(ids)
    heads = trace[f"blocks.{last}.attn.heads"].copy()  # (H, T, hs)
    heads[1] = heads[1].mean(axis=0)
    y = heads.transpose(1, 0, 2).reshape(len(ids), -1)  # (T, C)
    a = y @ block.attn.W_proj + (0 if block.attn.b_proj is None else block.attn.b_proj)
    x = ti.interventions.resid_pre(trace, last) + a
    x = x + block.ffn.forward(block.ln2.forward(x[None]))[0]
    expected = model.readout(x)[-1]
    got = ti.ablated_logits(model, ids, heads=[(last, 1)], mean=True)
    np.testing.assert_allclose(got, expected, atol=1e-9)


def test_steering_adds_the_vector_at_every_position(model):
    a, b, ids = prompt(5, 1), prompt(7, 2), prompt(6, 3)
    layer = 1
    vector = ti.steering_vector(model, a, b, layer)
    _, ta = model.run_with_trace(a)
    _, tb = model.run_with_trace(b)
    np.testing.assert_allclose(vector, ta[f"blocks.{layer - 1}.resid_ffn"][-1]
                               - tb[f"blocks.{layer - 1}.resid_ffn"][-1])
    _, trace = model.run_with_trace(ids)
    stream = ti.interventions.resid_pre(trace, layer) + 2.5 * vector  # (T, C)
    expected = model.forward_from(stream[None], layer)[0]
    np.testing.assert_allclose(ti.steered_logits(model, ids, vector, layer, 2.5), expected,
                               atol=1e-9)
    np.testing.assert_array_equal(ti.steered_logits(model, ids, vector, layer, 0.0),
                                  model.forward(ids))


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_steered_generation_with_and_without_the_cache(model, strategy):
    ids = prompt(5)
    vector = ti.steering_vector(model, prompt(4, 7), prompt(4, 8), 0)
    iv = ti.steering(model, vector, 0, 4.0)
    kw = dict(strategy=strategy, seed=3, interventions=iv)
    cached = generate(model, ids, 6, **kw)
    plain = generate(model, ids, 6, use_cache=False, **kw)
    np.testing.assert_array_equal(cached.tokens, plain.tokens)
    first = ti.steered_logits(model, ids, vector, 0, 4.0)[-1]
    if strategy == "greedy":
        assert cached.tokens[0] == int(np.argmax(first))
    # each step's logits: the steered forward of the sequence so far
    full = ti.steered_logits(model, cached.all_ids[:-1], vector, 0, 4.0)
    for i, step in enumerate(cached.steps):
        lp = log_softmax(full[len(ids) - 1 + i].astype(np.float64))
        assert step.logprob == pytest.approx(lp[step.token], abs=1e-9)


def test_best_cell_is_the_largest_recovery_among_the_patched_positions():
    scores = np.array([[np.nan, -3.0, -1.5], [np.nan, -1.2, -2.9]])  # position 0 not patched
    grid = ti.Patching(scores, clean_score=-1.0, corrupt_score=-3.0,
                       positions=np.array([1, 2]), site="resid_pre", answer_id=4)
    assert grid.best_cell() == (1, 0)  # block 1, the first patched position (1): 0.9 back
    same = ti.Patching(scores, -2.0, -2.0, np.array([1, 2]), "resid_pre", 4)
    assert same.best_cell() is None  # both runs score the same: nothing to recover


def test_the_pages_small_numbers_are_the_plain_formulas():
    logits = np.array([2.0, -1.0, 0.5, 3.0], dtype=np.float32)
    assert ti.answer_score(logits, 2) == pytest.approx(log_softmax(logits.astype(np.float64))[2])
    assert ti.most_active(np.array([0.1, -3.0, 2.0, 3.0]), 3) == [1, 3, 2]  # |.|, ties: index
    assert ti.vector_length(np.array([3.0, 4.0], dtype=np.float32)) == 5.0
