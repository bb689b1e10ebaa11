"""tinygpt.readouts.explain: the named contributors and the waterfall of an attribution."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.network.config import GPTConfig
from tinygpt.network.model import GPT
from tinygpt.readouts.attribution import logit_attribution, logit_difference_attribution
from tinygpt.readouts.explain import (
    attention_maps,
    glance_from_maps,
    head_grid,
    parts_difference,
    surprise_summary,
    top_contributors,
    top_heads,
    waterfall,
)


@pytest.fixture(scope="module")
def model():
    cfg = GPTConfig(vocab_size=50, n_ctx=16, n_embd=16, n_head=4, n_layer=3)
    return GPT(cfg, seed=0)


def test_waterfall_sums_to_the_logit_for_every_k(model):
    ids = np.array([3, 7, 1, 9, 4])
    logits = model.forward(ids)
    att = logit_attribution(model, ids, 3, 11)
    for k in (0, 1, 5, len(att.values), 1000):
        w = waterfall(att, k)
        assert abs(w.values.sum() - logits[3, 11]) < 1e-4
        assert w.rest == max(0, len(att.values) - k)
        assert len(w.names) == len(w.values)


def test_top_contributors_are_the_largest_in_order(model):
    ids = np.array([3, 7, 1, 9, 4])
    att = logit_attribution(model, ids, 4, 2)
    top = top_contributors(att, 4)
    assert [c.value for c in top] == sorted((c.value for c in top), key=lambda v: -abs(v))
    assert abs(top[0].value) == np.abs(att.values).max()
    c = top[0]
    for c in top:
        assert c.sentence.startswith(c.name) and f"{abs(c.value):.2f}" in c.sentence
        assert ("adds" in c.sentence) == (c.value >= 0)


def test_heads_grid_and_blocks_add_up(model):
    ids = np.array([3, 7, 1, 9, 4])
    att = logit_difference_attribution(model, ids, 4, 2, 5)
    grid = head_grid(att, 3, 4)
    for c in top_heads(att, 12):
        layer, head = c.head
        assert grid[layer, head] == c.value
    heads = sum(v for key, v in zip(att.keys, att.values, strict=True) if key[0] == "head")
    assert np.isclose(grid.sum(), heads)


def test_parts_difference_of_two_prompts(model):
    a = logit_attribution(model, np.array([1, 2, 3]), 2, 7)
    b = logit_attribution(model, np.array([1, 2, 4]), 2, 7)
    d = parts_difference(a, b)
    assert np.isclose(d.sum(), a.total - b.total, atol=1e-4)


def test_surprise_summary_mean_is_the_training_loss(model):
    from tinygpt.network.functional import cross_entropy
    from tinygpt.readouts.surprise import surprise

    ids = np.array([3, 7, 1, 9, 4, 4, 2])
    summary = surprise_summary(surprise(model, ids))
    loss, _ = cross_entropy(model.forward(ids[None, :-1]), ids[None, 1:])
    assert abs(summary.mean - loss) < 1e-5
    assert surprise_summary(np.zeros(0, dtype=np.float32)) is None


def test_heads_at_a_glance_full_maps_and_rows(model):
    ids = np.array([3, 7, 1, 9, 4])
    _, trace = model.run_with_trace(ids)
    maps = attention_maps(trace, 3)  # (L, H, n, n), as the app keeps them per trace
    full = glance_from_maps(maps, 2, max_cells=10_000)
    assert full.full and full.maps.shape == (3, 4, 5, 5)
    w = trace["blocks.1.attn.weights"][2]
    assert np.allclose(full.maps[1, 2][np.tril_indices(5)], w[np.tril_indices(5)])
    assert np.isnan(full.maps[1, 2][np.triu_indices(5, 1)]).all()
    row = glance_from_maps(maps, 2, max_cells=100)
    assert not row.full and row.maps.shape == (3, 4, 1, 5)
    assert np.allclose(row.maps[1, 2, 0, :3], w[2, :3]) and np.isnan(row.maps[1, 2, 0, 3:]).all()


def test_difference_waterfall_sums_to_the_difference_of_logits(model):
    from tinygpt.readouts.explain import difference_waterfall

    a = logit_attribution(model, np.array([1, 2, 3, 5]), 3, 7)
    b = logit_attribution(model, np.array([1, 2, 4]), 2, 7)
    for k in (0, 3, 100):
        w = difference_waterfall(a, b, k)
        assert abs(w.values.sum() - (model.forward(np.array([1, 2, 3, 5]))[3, 7]
                                     - model.forward(np.array([1, 2, 4]))[2, 7])) < 1e-4


def test_prediction_snapshot_is_the_models_top_k(model):
    from tinygpt.readouts import top_k
    from tinygpt.readouts.explain import prediction_snapshot

    ids = np.array([3, 7, 1])
    snap = prediction_snapshot(model, ids, 10, 2.5, k=4)
    tokens, probs = top_k(model.forward(ids)[-1], 4)
    assert snap.step == 10 and np.array_equal(snap.tokens, tokens)
    assert np.allclose(snap.probs, probs)
