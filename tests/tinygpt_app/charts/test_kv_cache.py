"""Charts of charts/kv_cache.py, drawn from tinygpt.kv_cache_reuse on the fixture model."""

from __future__ import annotations

import numpy as np

from tinygpt.readouts.kv_reuse import kv_cache_reuse
from tinygpt_app.charts import kv_cache as charts


def test_reuse_bars_stack_to_the_cache_length(run):
    reuse = kv_cache_reuse(run.model, len(run.ids), 10)
    fig = charts.reuse_per_step(reuse.computed, reuse.reused, "t")
    new, old = (np.asarray(trace.y) for trace in fig.data)
    assert fig.layout.barmode == "stack"
    np.testing.assert_array_equal(new + old, reuse.cache_length)
    assert new[0] == len(run.ids) and old[0] == 0 and (new[1:] == 1).all()


def test_bytes_and_work_are_the_core_numbers(run):
    reuse = kv_cache_reuse(run.model, 4, 6)
    held = charts.bytes_held(reuse.bytes_held, reuse.bytes_allocated, "t")
    np.testing.assert_allclose(np.asarray(held.data[0].y) * 1024, reuse.bytes_held)
    assert held.layout.shapes[0].y0 * 1024 == reuse.bytes_allocated
    work = charts.work_per_step(reuse.multiply_adds_cached, reuse.multiply_adds_recompute, "t")
    np.testing.assert_array_equal(work.data[0].y, reuse.multiply_adds_cached)
    np.testing.assert_array_equal(work.data[1].y, reuse.multiply_adds_recompute)


def test_step_axis_labels_at_most_ten_whole_steps():
    """One label per step ran together on a phone (39 steps): every 1, 2, 5, 10, ... steps."""
    from tinygpt_app.charts.kv_cache import STEP_TICKS, step_axis

    for steps, every in ((5, 1), (10, 1), (11, 2), (39, 5), (100, 10), (101, 20)):
        axis = step_axis(steps)
        assert axis["dtick"] == every and axis["tick0"] == 0
        assert steps / every <= STEP_TICKS
