"""Charts of softmax and sampling: each figure holds exactly the numbers it claims to show."""

from __future__ import annotations

import numpy as np

from tinygpt.decoding.generation import pick_token
from tinygpt.readouts import draw_segments, top_k
from tinygpt_app.charts import sampling
from tinygpt_app.charts.common import FADED
from tinygpt_app.kit.labels import token_label


def test_top_probabilities_hold_the_top_of_the_softmax(run):
    ids, probs = top_k(run.logits[-1], 5)
    names = [token_label(run.tok, i) for i in ids]
    fig = sampling.top_probabilities(names, probs, "p")
    np.testing.assert_array_equal(np.asarray(fig.data[0].x), probs)
    assert list(fig.data[0].y) == names


def test_ranked_bars_split_kept_and_removed_in_rank_order():
    labels = ["a", "b", "c", "d"]
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    kept = np.array([True, True, False, False])
    fig = sampling.ranked_bars(labels, probs, kept, "t", picked=1)
    by_name = {tr.name: tr for tr in fig.data}
    kept_bars, cut_bars = by_name[sampling.KEPT_NAME], by_name[sampling.CUT_NAME]
    assert list(kept_bars.x) == ["a", "b"] and list(cut_bars.x) == ["c", "d"]
    np.testing.assert_allclose(kept_bars.y, [0.4, 0.3], rtol=1e-6)
    np.testing.assert_allclose(cut_bars.y, [0.2, 0.1], rtol=1e-6)
    assert list(fig.layout.xaxis.categoryarray) == labels  # bars stay in rank order
    assert fig.layout.annotations[0].x == "b"  # the picked token is pointed at


def test_cumulative_curve_marks_the_p_line_and_the_cutoff():
    cumulative = np.cumsum([0.5, 0.3, 0.1, 0.05, 0.05])
    fig = sampling.cumulative_curve(cumulative, 0.85, 2, "t")
    kept, removed = fig.data
    np.testing.assert_allclose(kept.y, cumulative[:2], rtol=1e-6)
    assert list(kept.x) == [1, 2] and list(removed.x) == [2, 3, 4, 5]
    lines = fig.layout.shapes
    assert any(s.y0 == s.y1 == 0.85 for s in lines)  # the top-p line
    assert any(s.x0 == s.x1 == 2.5 for s in lines)  # the cutoff, between ranks 2 and 3


def test_renormalised_bars_hold_both_distributions():
    fig = sampling.renormalised(["x", "y"], np.array([0.3, 0.2]), np.array([0.6, 0.4]), "t")
    np.testing.assert_allclose(fig.data[0].y, [0.3, 0.2], rtol=1e-6)
    np.testing.assert_allclose(fig.data[1].y, [0.6, 0.4], rtol=1e-6)


def test_draw_bar_segments_and_the_u_line():
    probs = np.array([0.1, 0.002, 0.003, 0.595, 0.3])
    seg = draw_segments(probs, 0.005)
    u = 0.42
    token, _ = pick_token(probs, u)
    picked = int(np.searchsorted(seg.starts, u, side="right")) - 1
    labels = [str(t) if t >= 0 else "… small" for t in seg.tokens]
    fig = sampling.draw_bar(seg.starts, seg.widths, labels, u, picked, "t")
    bar = fig.data[0]
    np.testing.assert_allclose(np.asarray(bar.base, float), seg.starts, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(bar.x, float), seg.widths, rtol=1e-6)
    assert seg.tokens[picked] == token == 3
    assert bar.marker.color[picked] == sampling.PICKED_COLOUR
    assert bar.marker.color[1] == FADED  # the merged small tokens are grey
    assert fig.layout.shapes[0].x0 == fig.layout.shapes[0].x1 == u


def test_cut_bars_and_the_picked_segment_are_marked_by_pattern_not_colour_alone():
    kept = np.array([True, False, True, False])
    fig = sampling.ranked_bars(["a", "b", "c", "d"], np.array([0.4, 0.3, 0.2, 0.1]), kept, "t")
    by_name = {tr.name: tr for tr in fig.data}
    assert by_name[sampling.KEPT_NAME].marker.pattern.shape in ("", None)
    assert by_name[sampling.CUT_NAME].marker.pattern.shape == sampling.CUT_PATTERN
    assert "striped" in sampling.CUT_NAME  # the legend says what the stripes mean
    assert all(tr.showlegend is not False for tr in fig.data)

    probs = np.array([0.1, 0.2, 0.3, 0.4])
    seg = draw_segments(probs, 0.005)
    fig = sampling.draw_bar(seg.starts, seg.widths, [str(t) for t in seg.tokens], 0.5, 2, "t")
    shapes = list(fig.data[0].marker.pattern.shape)
    assert shapes[2] == sampling.PICKED_PATTERN and shapes.count(sampling.PICKED_PATTERN) == 1
