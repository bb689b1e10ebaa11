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


def test_long_titles_wrap_between_words_and_the_top_margin_grows():
    """Plotly never wraps a title (a phone cut it): lines of at most TITLE_LINE_CHARS, joined
    by <br>, each escaped, and one line's room more in the top margin and the height."""
    title = "Next token after position 23: normal vs with the switches (8 tokens of <v>)"
    lines = common.title_lines(title)
    assert " ".join(lines) == title and len(lines) == 2
    assert all(len(line) <= common.TITLE_LINE_CHARS for line in lines)
    short = common.figure([], "short", 300)
    long = common.figure([], title, 300)
    assert long.layout.title.text == "<br>".join(common.plotly_text(line) for line in lines)
    assert "&lt;v&gt;" in long.layout.title.text
    assert long.layout.margin.t - short.layout.margin.t == common.TITLE_LINE_PX
    assert long.layout.height - short.layout.height == common.TITLE_LINE_PX
    assert common.title_lines("a" * 50) == ["a" * 50]  # a word longer than a line stays whole


def test_a_legend_above_the_plot_gets_a_row_of_its_own():
    plain = common.figure([], "t", 300, legend=dict(orientation="h", y=-0.2))
    above = common.figure([], "t", 300, legend=common.LEGEND_ABOVE)
    assert above.layout.margin.t - plain.layout.margin.t == common.TITLE_LINE_PX


def test_projected_titles_keep_room_for_every_line():
    """Projected, a title line grows from TITLE_LINE_PX to PROJECTOR_TITLE_LINE_PX: the top
    margin grows by the difference for each line (and for a legend's row above the plot)."""
    grow = common.PROJECTOR_TITLE_LINE_PX - common.TITLE_LINE_PX
    for title, legend, rows in (("t", {}, 1), ("word " * 20, {}, 3),
                                ("t", common.LEGEND_ABOVE, 2)):
        fig = common.figure([], title, 300, legend=legend)
        top = fig.layout.margin.t
        assert common.projector_style(fig).layout.margin.t == top + rows * grow


def test_crowded_category_axes_write_every_second_label():
    """Plotly spaces category labels 1.2 font sizes apart, an upright label is wider: above
    CROWDED_CATEGORIES columns every second label Plotly places is written."""
    few = common.category_ticks(common.CROWDED_CATEGORIES)
    many = common.category_ticks(common.CROWDED_CATEGORIES + 1)
    assert "ticklabelstep" not in few and many["ticklabelstep"] == 2
    _, axis = common.position_axis([f"t{i}" for i in range(40)])
    assert axis["ticklabelstep"] == 2 and axis["type"] == "category"
