"""Charts of charts/explain.py, drawn from the fixture model's own attribution and occlusion."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.readouts.attribution import logit_attribution
from tinygpt.readouts.explain import head_grid, waterfall
from tinygpt.readouts.occlusion import occlusion
from tinygpt_app.charts import explain as charts


def test_waterfall_bars_sum_to_the_logit_shown(run):
    position = len(run.ids) - 1
    token = int(np.argmax(run.logits[position]))
    w = waterfall(logit_attribution(run.model, run.ids, position, token, trace=run.trace), 8)
    fig = charts.attribution_waterfall(w.names, w.values, w.total, "t")
    bars = fig.data[0]
    assert list(bars.measure) == ["relative"] * len(w.values) + ["total"]
    assert abs(sum(bars.x[:-1]) - bars.x[-1]) < 1e-4
    assert abs(bars.x[-1] - float(run.logits[position, token])) < 1e-4
    assert list(bars.y[:-1]) == w.names


def test_waterfall_names_each_part_on_its_own_row():
    """Slanted names under vertical bars overlapped on phones (issue 25): the bars lie down,
    one name per row, rows far enough apart for a line of tick text at any width."""
    names = [f"block {i} head {h}" for i in range(3) for h in range(4)] + ["the other 30 parts"]
    fig = charts.attribution_waterfall(names, np.linspace(-1, 1, len(names)), 0.0, "t")
    bars = fig.data[0]
    assert bars.orientation == "h" and list(bars.y) == [*names, "logit"]
    assert fig.layout.xaxis.tickangle is None and fig.layout.yaxis.automargin
    margin = fig.layout.margin
    row = (fig.layout.height - margin.t - margin.b) / len(bars.y)
    assert row >= 20  # px: more than a 12 px line of text (x 1.4 with 20 px on a projector)


def test_head_shares_grid_is_blocks_by_heads(run):
    att = logit_attribution(run.model, run.ids, 2, 5, trace=run.trace)
    cfg = run.model.config
    fig = charts.head_shares(head_grid(att, cfg.n_layer, cfg.n_head), "t")
    assert np.asarray(fig.data[0].z).shape == (cfg.n_layer, cfg.n_head)


def test_occlusion_bars_one_per_removed_token(run):
    occ = occlusion(run.model, run.ids, 5)
    labels = [run.labels[i] for i in occ.removed]
    fig = charts.occlusion_bars(labels, occ.change, "t")
    assert list(fig.data[0].x) == labels
    assert np.allclose(fig.data[0].y, occ.change, atol=1e-6)


def test_heat_colours_white_at_zero_and_one_per_value():
    colours = charts.heat_colours(np.array([0.0, 1.0, -1.0, np.nan]), diverging=True)
    assert len(colours) == 4 and colours[0] == colours[3]
    plain = charts.heat_colours(np.array([0.0, 2.0]), diverging=False)
    assert plain[0] == "rgb(255, 255, 255)" and plain[1] != plain[0]


def test_surprise_bars_mark_the_mean(run):
    fig = charts.surprise_bars(["a", "b"], np.array([1.0, 3.0]), 2.0, "t")
    assert fig.layout.shapes[0].y0 == 2.0


def test_all_heads_cross_their_masked_cells_with_one_legend_entry():
    n, L, H = 5, 2, 3
    one = np.where(np.triu(np.ones((n, n), dtype=bool), k=1), np.nan, 0.2).astype(np.float32)
    maps = np.broadcast_to(one, (L, H, n, n))
    labels = [str(i) for i in range(n)]
    fig = charts.heads_small_multiples(maps, labels, labels, "t")
    crosses = [tr for tr in fig.data if tr.type == "scatter"]
    assert len(crosses) == L * H and sum(bool(tr.showlegend) for tr in crosses) == 1
    assert all(len(tr.x) == n * (n - 1) // 2 for tr in crosses)
    assert {tr.xaxis for tr in crosses} == {tr.xaxis for tr in fig.data if tr.type == "heatmap"}



def test_each_row_of_heads_is_named_by_its_first_axis_title():
    """Projected, the rows' names ("block 0", annotations beside the grid) left the figure: they
    are the titles of the first column's y axes, which Plotly makes room for (automargin)."""
    L, H, n = 3, 2, 4
    maps = np.full((L, H, n, n), 0.25, dtype=np.float32)
    labels = [str(i) for i in range(n)]
    layout = charts.heads_small_multiples(maps, labels, labels, "t").layout
    firsts = [layout["yaxis" + ("" if i == 0 else str(i * H + 1))] for i in range(L)]
    assert [axis.title.text for axis in firsts] == [f"block {i}" for i in range(L)]
    assert all(axis.automargin for axis in firsts)
    assert not any(note.text.startswith("block") for note in layout.annotations)
    assert [note.text for note in layout.annotations] == [f"head {h}" for h in range(H)]

def relative_luminance(rgb: str) -> float:
    """WCAG 2 relative luminance of "rgb(r, g, b)"."""
    channels = [int(c) / 255 for c in rgb.strip("rgb()").split(",")]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


@pytest.mark.parametrize("diverging", [True, False])
def test_chip_colours_keep_the_chip_text_readable(diverging):
    """The darkest chip background against the chips' grey caption (#444): at least 4.5:1."""
    values = np.linspace(-1, 1, 41)
    caption = relative_luminance("rgb(68, 68, 68)")
    for colour in charts.heat_colours(values, diverging=diverging):
        ratio = (relative_luminance(colour) + 0.05) / (caption + 0.05)
        assert ratio >= 4.5, (colour, ratio)
