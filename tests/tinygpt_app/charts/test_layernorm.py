"""Charts of the LayerNorm page: the histogram, the parameter bars and the statistics lines hold
the trace's and the model's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt_app.charts import layernorm


def test_histogram_and_bars_hold_the_vectors(run):
    x = run.trace["blocks.0.ln2.input"][4]
    fig = layernorm.histogram(x, "h", mean=float(run.trace["blocks.0.ln2.mean"][4]), std=1.0)
    np.testing.assert_array_equal(np.asarray(fig.data[0].x), x)
    assert len(fig.layout.shapes) == 3  # the mean and mean ± std
    gamma = run.model.blocks[0].ln2.gamma
    np.testing.assert_array_equal(np.asarray(layernorm.parameter_bars(gamma, "g").data[0].y),
                                  gamma)


def test_statistics_lines_hold_each_series(run):
    mean, var = run.trace["ln_f.mean"], run.trace["ln_f.var"]
    fig = layernorm.statistics_lines({"mean": mean, "var": var}, run.labels, "l")
    np.testing.assert_array_equal(np.asarray(fig.data[1].y), var)
    assert [tr.name for tr in fig.data] == ["mean", "var"]


def test_stage_heatmap_holds_the_stage(run):
    z = run.trace["blocks.1.ln1.normalized"]
    fig = layernorm.stage_heatmap(z, "t", run.labels, [str(j) for j in range(z.shape[1])])
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), z)


def test_histogram_marks_plus_and_minus_the_rms():
    values = np.array([3.0, -1.0, 2.0, 0.5])
    rms = float(np.sqrt((values**2).mean()))
    fig = layernorm.histogram(values, "t", mean=float(values.mean()), rms=rms)
    xs = sorted(shape.x0 for shape in fig.layout.shapes)
    assert xs == pytest.approx(sorted([values.mean(), -rms, rms]))
    assert any(note.text == "rms" for note in fig.layout.annotations)
