"""Charts of the what-if page: the prediction change holds both distributions."""

from __future__ import annotations

import json

import numpy as np

from tests.apptest_support import decode
from tinygpt_app.charts import whatif


def test_prediction_change():
    fig = whatif.prediction_change(["'a'", "'b'"], np.array([0.7, 0.2]), np.array([0.1, 0.6]), "t")
    spec = json.loads(fig.to_json())
    np.testing.assert_allclose(decode(spec["data"][0]["x"]), [0.7, 0.2], rtol=1e-6)
    np.testing.assert_allclose(decode(spec["data"][1]["x"]), [0.1, 0.6], rtol=1e-6)
    assert spec["data"][0]["y"] == spec["data"][1]["y"] == ["'a'", "'b'"]


def test_projected_paired_bars_are_taller_than_their_values_text():
    """Projected, "0.700" beside the normal bar ran into "0.700" beside the switched one: each
    bar (two per token, Plotly's bar gap 0.2) must be taller than a line of projected text,
    with the x axis and its title (~90 px) below the plot."""
    from tinygpt_app.charts.common import PROJECTOR_FONT, projector_style

    for n in (3, 8, 20):
        tokens = [f"t{i}" for i in range(n)]
        fig = projector_style(whatif.prediction_change(tokens, np.full(n, 0.5), np.full(n, 0.5),
                                                       "t"))
        plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b - 90
        assert plot / n * 0.8 / 2 >= 1.2 * PROJECTOR_FONT
