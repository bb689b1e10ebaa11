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
