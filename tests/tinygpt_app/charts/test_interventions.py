"""Charts of the Interventions page, drawn from the fixture model's own patching grid."""

from __future__ import annotations

import numpy as np

from tinygpt import readouts as ti
from tinygpt_app.charts import interventions as charts


def test_patching_map_draws_the_recovered_share_with_a_named_scale(run):
    clean, corrupt = run.ids[:8], run.ids[1:9]
    result = ti.activation_patching(run.model, clean, corrupt, 3, max_positions=5)
    z = result.recovered[:, result.positions]
    layers = [f"block {i}" for i in range(len(z))]
    fig = charts.patching_map(z, run.labels[3:8], "t")
    trace = fig.data[0]
    np.testing.assert_allclose(np.asarray(trace.z, dtype=float), z, rtol=1e-6)
    assert trace.zmid == 0 and trace.zmin == -trace.zmax and trace.zmax >= 1
    assert "0 = as corrupted, 1 = as clean" in trace.colorbar.title.text
    assert list(trace.y) == list(range(len(layers))) and list(trace.x) == run.labels[3:8]
    assert fig.layout.height <= charts.MAP_MAX_HEIGHT


def test_distributions_one_bar_series_per_run():
    runs = {"clean": np.array([0.5, 0.2]), "corrupted": np.array([0.1, 0.6]),
            "patched": np.array([0.3, 0.3])}
    fig = charts.distributions(["a", "b"], runs, "t")
    assert [d.name for d in fig.data] == list(runs)
    np.testing.assert_allclose(fig.data[1].y, runs["corrupted"])
    assert len({d.marker.color for d in fig.data}) == 3
