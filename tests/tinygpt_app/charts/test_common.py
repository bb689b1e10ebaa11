"""Shared chart builders: the heatmap holds the values it is given; the cell budget."""

from __future__ import annotations

import numpy as np

from tinygpt_app.charts import common


def test_heatmap_holds_the_trace_values(run):
    fig = common.heatmap(run.trace["embed.sum"], "x", y_labels=run.labels)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z, np.float64), run.trace["embed.sum"])
    assert list(fig.data[0].y) == run.labels
    assert fig.data[0].zmid == 0  # diverging scale centred at zero
    assert fig.layout.title.text == "x"


def test_bar_holds_the_vector(run):
    gamma = run.model.blocks[0].ln2.gamma
    np.testing.assert_array_equal(np.asarray(common.bar(gamma, "g").data[0].y), gamma)


def test_cell_budget():
    assert common.first_row_within_budget(10, 10, budget=1000) == 0
    assert common.first_row_within_budget(1000, 768, budget=200_000) == 1000 - 260
    assert common.first_row_within_budget(5, 10**7, budget=100) == 4  # always at least one row


def test_position_axis_keeps_every_position_apart():
    """One category per position: the labels as they are when they differ, numbered when two
    tokens have the same text (categories with one name would merge into one column)."""
    assert common.position_axis(["a", "b"]) == (["a", "b"], dict(type="category", tickmode="auto"))
    names, _ = common.position_axis(["·the", "·cat", "·the"])
    assert names == ["0:·the", "1:·cat", "2:·the"] and len(set(names)) == 3


def test_crowded_x_labels_turn_upright_and_colour_bar_titles_sit_aside():
    trace = dict(type="heatmap", z=np.eye(2, dtype=np.float32),
                 colorbar=dict(title=dict(text="weight")))
    fig = common.figure([trace], "t", 300, xaxis=common.axis("x"),
                        xaxis2=dict(tickangle=-90), yaxis=common.axis("y"))
    assert list(fig.layout.xaxis.autotickangles) == [0, 90]  # never slanted at 30 degrees
    assert fig.layout.xaxis2.tickangle == -90 and fig.layout.xaxis2.autotickangles is None
    assert fig.layout.yaxis.autotickangles is None
    assert fig.data[0].colorbar.title.side == "right"
    assert fig.data[0].colorbar.title.text == "weight"


def test_column_numbers_go_on_a_number_axis():
    z = np.arange(6, dtype=np.float32).reshape(2, 3)
    numbered = common.heatmap(z, "t", x_labels=["0", "1", "2"])
    assert numbered.data[0].x is None and numbered.layout.xaxis.type is None
    named = common.heatmap(z, "t", x_labels=["a", "b", "c"])
    assert list(named.data[0].x) == ["a", "b", "c"] and named.layout.xaxis.type == "category"
