"""charts.common.projector_style: the projector's larger fonts, thicker lines and high contrast,
on any figure the chart modules build, without changing what the figure shows."""

from __future__ import annotations

import numpy as np

from tinygpt_app.charts import common, layernorm, sampling


def test_fonts_lines_height_and_contrast():
    fig = layernorm.statistics_lines({"mean": np.arange(4.0), "std": np.ones(4)},
                                     ["a", "b", "c", "d"], "Per-token statistics")
    height, data = fig.layout.height, [trace.to_plotly_json() for trace in fig.data]
    styled = common.projector_style(fig)
    assert styled.layout.font.size == common.PROJECTOR_FONT
    assert styled.layout.title.font.size == common.PROJECTOR_TITLE_FONT
    assert styled.layout.xaxis.tickfont.size >= 16 and styled.layout.yaxis.title.font.size >= 16
    assert styled.layout.font.color == "#000000"
    assert styled.layout.height == int(height * common.PROJECTOR_HEIGHT)
    assert all(trace.line.width == common.PROJECTOR_LINE for trace in styled.data)
    for before, after in zip(data, styled.data, strict=True):  # the same numbers and names
        np.testing.assert_array_equal(before["y"], after.y)
        assert before["name"] == after.name
    assert styled.layout.title.text == "Per-token statistics"


def test_bars_get_an_outline_and_keep_their_colours():
    fig = sampling.top_probabilities(["a", "b"], [0.7, 0.3], "Top")
    colour = fig.data[0].marker.color
    styled = common.projector_style(fig)
    assert styled.data[0].marker.line.width == 1
    assert styled.data[0].marker.color == colour
    assert styled.layout.uniformtext.minsize >= 14  # the percentages in the bars


def test_names_written_beside_points_grow_too():
    """The beam tree's token names were 10 px on a projector: named points get the projector's
    text size; other scatter traces get no text font."""
    named = dict(type="scatter", mode="markers+text", x=[0], y=[0], text=["a"],
                 textfont=dict(size=10))
    line = dict(type="scatter", mode="lines", x=[0, 1], y=[0, 1])
    styled = common.projector_style(common.figure([named, line], "t", 300))
    assert styled.data[0].textfont.size == common.PROJECTOR_FONT - 4
    assert styled.data[1].textfont.size is None
