"""Charts of the attention page: masked cells are kept apart from small weights; one score taken
apart matches an independent projection; the head output is the trace's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinygpt.readouts import attention_with_mask, query_key_check
from tinygpt_app.charts import attention


def z_of(fig, i: int = 0) -> np.ndarray:
    return np.asarray(fig.data[i].z, dtype=np.float64)


def test_attention_map_keeps_masked_cells_apart_from_small_weights(run):
    n = len(run.ids)
    fig = attention.attention_map(attention_with_mask(run.trace, 1, 2), run.labels, "a")
    values, grey = np.asarray(fig.data[0].customdata, dtype=np.float64), z_of(fig, 1)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)  # key after query: masked
    weights = run.trace["blocks.1.attn.weights"][2]
    np.testing.assert_array_equal(values[~upper], weights[~upper])  # what the hover says
    assert np.isnan(values[upper]).all() and np.isnan(z_of(fig)[upper]).all()
    assert (grey[upper] == 1).all() and np.isnan(grey[~upper]).all()


def test_weights_default_to_log_colours_named_on_the_colour_bar(run):
    """Issue 25: most weights are 0.02-0.1, so a 0..1 scale is almost uniformly dark. By
    default each factor of ten is one step of colour, floored at 0.001, ticks in weights."""
    w = attention_with_mask(run.trace, 0, 0)
    trace = attention.attention_map(w, run.labels, "a").data[0]
    seen = np.isfinite(w)
    expected = [math.log10(max(float(x), 0.001)) for x in w[seen]]
    np.testing.assert_allclose(np.asarray(trace.z, dtype=np.float64)[seen], expected, rtol=1e-6)
    assert (trace.zmin, trace.zmax) == (-3, 0)
    assert list(trace.colorbar.ticktext) == ["0.001", "0.01", "0.1", "1"]
    assert trace.colorbar.title.text == attention.SCALES["log"] == "weight (log scale)"
    assert "customdata" in trace.hovertemplate  # the hover shows the weight, not its log


def test_row_scale_makes_each_rows_strongest_look_brightest(run):
    w = attention_with_mask(run.trace, 1, 0)
    trace = attention.attention_map(w, run.labels, "a", scale="row").data[0]
    z = np.asarray(trace.z, dtype=np.float64)
    for i in range(len(w)):
        row = w[i][np.isfinite(w[i])]
        np.testing.assert_allclose(z[i][np.isfinite(w[i])], row / row.max(), rtol=1e-6)
    assert trace.colorbar.title.text == attention.SCALES["row"]
    with pytest.raises(ValueError):
        attention.attention_map(w, run.labels, "a", scale="cubic")


def test_attention_map_of_scores_masks_the_minus_infinities(run):
    scores = run.trace["blocks.0.attn.scores_masked"][0]
    fig = attention.attention_map(scores, run.labels, "s", diverging=True)
    finite = np.isfinite(scores)
    np.testing.assert_array_equal(z_of(fig)[finite], scores[finite])
    assert np.isnan(z_of(fig)[~finite]).all() and fig.data[0].zmid == 0


def test_attention_map_with_only_the_last_rows_and_a_fixed_range(run):
    w = attention_with_mask(run.trace, 0, 1)[3:]
    fig = attention.attention_map(w, run.labels, "a", y_labels=run.labels[3:], zrange=(0, 1))
    assert z_of(fig).shape == (len(run.ids) - 3, len(run.ids))
    assert list(fig.data[0].y) == run.labels[3:] and list(fig.data[0].x) == run.labels
    assert (fig.data[0].zmin, fig.data[0].zmax) == (0, 1)


def test_query_key_bars_hold_each_series(run):
    check = query_key_check(run.trace, 0, 3, len(run.ids) - 1, 2)
    fig = attention.query_key_bars({"q": check.q, "k": check.k, "q*k": check.products}, "qk")
    np.testing.assert_array_equal(np.asarray(fig.data[2].y), check.products)


def test_query_key_check_matches_an_independent_projection(run):
    """q and k rebuilt from LN1's output and W_qkv: the score is the trace's, up to rounding."""
    model, trace = run.model, run.trace
    layer, head, query, key = 1, 2, len(run.ids) - 1, 1
    attn = model.blocks[layer].attn
    h = trace[f"blocks.{layer}.ln1.output"].astype(np.float64)  # (T, C)
    hs, C = attn.head_size, model.config.n_embd
    cols_q = slice(head * hs, (head + 1) * hs)
    cols_k = slice(C + head * hs, C + (head + 1) * hs)
    q = h[query] @ attn.W_qkv[:, cols_q] + attn.b_qkv[cols_q]
    k = h[key] @ attn.W_qkv[:, cols_k] + attn.b_qkv[cols_k]
    check = query_key_check(trace, layer, head, query, key)
    assert check.scaled == pytest.approx(float(q @ k) / math.sqrt(hs), rel=1e-4, abs=1e-6)
    assert check.scaled == pytest.approx(check.score, rel=1e-5, abs=1e-7)


def test_head_output_heatmap_is_the_trace(run):
    z = run.trace["blocks.0.attn.heads"][1]
    fig = attention.head_output_heatmap(z, "h", run.labels, [str(j) for j in range(z.shape[1])])
    np.testing.assert_array_equal(z_of(fig), z)


def test_masked_cells_are_crossed_and_named_in_the_legend_not_grey_alone(run):
    n = len(run.ids)
    fig = attention.attention_map(attention_with_mask(run.trace, 0, 0), run.labels, "a")
    crosses = [tr for tr in fig.data if tr.name == attention.MASK_LEGEND]
    assert len(crosses) == 1 and crosses[0].showlegend and crosses[0].marker.symbol == "x-thin"
    marked = set(zip(crosses[0].x, crosses[0].y, strict=True))
    expected = {(run.labels[j], run.labels[i]) for i in range(n) for j in range(i + 1, n)}
    assert marked == expected  # every masked cell, and no visible one
    assert "masked" in fig.data[1].hovertemplate


def test_no_crosses_without_a_mask_or_beyond_the_budget(run):
    scores = run.trace["blocks.0.attn.scores"][0]  # before the mask: nothing hidden
    fig = attention.attention_map(scores, run.labels, "s", diverging=True)
    assert [tr.name for tr in fig.data if tr.type == "scatter"] == []
    n = int(np.sqrt(2 * attention.MAX_MASK_MARKS)) + 4  # more masked cells than the budget
    w = np.where(np.triu(np.ones((n, n), dtype=bool), k=1), np.nan, 0.5).astype(np.float32)
    fig = attention.attention_map(w, [str(i) for i in range(n)], "big")
    assert not any(tr.type == "scatter" for tr in fig.data)
