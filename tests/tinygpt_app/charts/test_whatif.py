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
