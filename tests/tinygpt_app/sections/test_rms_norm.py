"""The Normalisation page on RMSNorm models: the RMS shown is recomputed by hand from the
trace's input, the mean LayerNorm would remove is the vector's mean; γ only; every view draws."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
pytest.importorskip("safetensors.numpy", reason="the folders are written with safetensors")

from tests.apptest_support import assert_clean, chart, decode, open_page  # noqa: E402
from tests.pages.modern_folders import PROMPT, choose, traced  # noqa: E402

PAGE = "pages/3_LayerNorm.py"


def metric(at, label: str) -> float:
    """The signed number of the metric labelled `label` ("+0.0123")."""
    return float(next(m.value for m in at.metric if m.label.startswith(label)))
POSITION = 4


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_the_rms_and_the_mean_are_the_inputs_own(modern_models, name):
    at = choose(open_page(PAGE, PROMPT, pos=str(POSITION)), name)
    at.selectbox(key="layernorm.rms_norm").set_value(
        "Block 1 · RMSNorm 2 (before the feed-forward network)").run()
    assert_clean(at)
    model, _, trace = traced(modern_models, name)
    x = trace["blocks.1.ln2.input"][POSITION].astype(np.float64)
    eps = model.blocks[1].ln2.eps
    rms = np.sqrt(sum(v * v for v in x) / len(x) + eps)
    assert metric(at, "RMS of x") == pytest.approx(rms, abs=1e-4)
    assert metric(at, "mean μ of x") == pytest.approx(x.mean(), abs=1e-4)
    assert metric(at, "the mean LayerNorm would remove") == pytest.approx(x.mean(), abs=1e-4)
    gamma = decode(chart(at, "γ of Block 1")["data"][0]["y"], float)
    np.testing.assert_allclose(gamma, model.blocks[1].ln2.gamma, rtol=1e-6)
    instead = decode(chart(at, "If LayerNorm")["data"][0]["x"], float)
    np.testing.assert_allclose(instead, (x - x.mean()) / np.sqrt(x.var() + eps), rtol=1e-4,
                               atol=1e-5)


def test_every_heatmap_stage_and_the_final_norm_draw(modern_models):
    at = choose(open_page(PAGE, PROMPT), "llama")
    at.selectbox(key="layernorm.rms_norm").set_value("Final RMSNorm (before the output layer)")
    at.run()
    for stage in at.radio(key="layernorm.rms_stage").options:
        at.radio(key="layernorm.rms_stage").set_value(stage).run()
        assert_clean(at)
        assert chart(at, stage)
    assert not [t for t in at.get("plotly_chart") if "β" in t.proto.spec]
