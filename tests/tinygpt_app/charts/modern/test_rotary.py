"""Charts of charts/rotary.py, decoded and compared with the readouts of a random Llama-shaped
model's own trace."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.modern_models import LLAMA, prompt, random_model
from tinygpt.readouts.modern import rotary as ro
from tinygpt_app.charts.modern import rotary as charts

LABELS = [f"{i}:t{i}" for i in range(20)]


@pytest.fixture(scope="module")
def traced():
    model = random_model(LLAMA, np.float32)
    _, trace = model.run_with_trace(prompt(20))
    return model, trace


def test_pair_vectors_draw_q_before_and_after_and_the_keys(traced):
    model, trace = traced
    pair = ro.rotary_pair(model, trace, 1, 2, 0)
    fig = charts.pair_vectors(pair.q, pair.q_rot, pair.k_rot, 12, LABELS, "t")
    names = [d.name for d in fig.data]
    keys = fig.data[names.index("k after its turn")]
    np.testing.assert_allclose(keys.x, pair.k_rot[:13, 0])  # keys 0..12, the query's visible
    np.testing.assert_allclose(keys.y, pair.k_rot[:13, 1])
    turned = fig.data[names.index("q after the turn")]
    np.testing.assert_allclose([turned.x[1], turned.y[1]], pair.q_rot[12])
    before = fig.data[names.index("q before the turn")]
    np.testing.assert_allclose([before.x[1], before.y[1]], pair.q[12])
    circle = fig.data[names.index("where q turns to")]  # the turn keeps q's length
    np.testing.assert_allclose(np.hypot(circle.x, circle.y), np.hypot(*pair.q[12]), rtol=1e-6)
    assert fig.layout.yaxis.scaleanchor == "x"  # a turn looks like a turn: equal scales


def test_pair_vectors_draw_at_most_the_last_keys():
    q = np.ones((100, 2))
    fig = charts.pair_vectors(q, q, q, 99, [str(i) for i in range(100)], "t")
    assert len(fig.data[2].x) == charts.MAX_KEYS_DRAWN


def test_score_by_offset_marks_the_models_score(traced):
    model, trace = traced
    curve = ro.score_by_offset(model, trace, 0, 1, 15, 4)
    fig = charts.score_by_offset(curve.offsets, curve.scores, curve.offset, curve.score, "t")
    np.testing.assert_allclose(fig.data[0].y, curve.scores)
    assert list(fig.data[1].x) == [11] and fig.data[1].y[0] == pytest.approx(curve.score)


def test_with_and_without_are_the_rows_bars(traced):
    model, trace = traced
    row = ro.row_without_rotation(model, trace, 0, 3, 9)
    fig = charts.with_and_without(LABELS[:10], row.scores, row.scores_unturned, "t")
    np.testing.assert_allclose(fig.data[0].y, row.scores)
    np.testing.assert_allclose(fig.data[1].y, row.scores_unturned)
    assert "with RoPE" in fig.data[0].name and "without RoPE" in fig.data[1].name
