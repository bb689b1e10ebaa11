"""Page 4, the residual stream: the drawn norms are the trace's; the view and lens controls
change the charts; the lens window follows the position."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    PROMPTS,
    TINY,
    assert_clean,
    chart,
    decode,
    open_page,
    query_param,
    widget,
)
from tinygpt.checkpoint.files import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/5_Residual_stream.py"


def test_residual_norms_are_the_trace_norms():
    model, tok = load(TINY)
    at = open_page(PAGE, NORMAL)
    _, trace = model.run_with_trace(np.array(tok.encode(NORMAL)))
    z = decode(chart(at, "Residual norm")["data"][0]["z"])
    np.testing.assert_allclose(z[0], np.linalg.norm(trace["embed.sum"], axis=-1), rtol=1e-5)


def test_residual_view_and_lens_controls_change_the_charts():
    at = open_page(PAGE, NORMAL)
    assert chart(at, "Residual norm")["data"][0]["type"] == "heatmap"
    widget(at.radio, "Show").set_value("lines: chosen tokens").run()
    assert_clean(at)
    assert chart(at, "‖x‖ of 1 token")["data"][0]["type"] == "scatter"

    per_block = decode(chart(at, "Logit lens")["data"][0]["z"]).shape[1]  # a column a stage
    widget(at.radio, "Read the stream").set_value("after each sublayer").run()
    assert_clean(at)
    per_sublayer = decode(chart(at, "Logit lens")["data"][0]["z"]).shape[1]
    assert (per_block, per_sublayer) == (3, 5)  # 1 + L vs 1 + 2L, L = 2


def test_lens_window_follows_the_position():
    at = open_page(PAGE, PROMPTS["over_long"])
    last = chart(at, "Logit lens")["data"][0]["y"]  # a row per position
    at.sidebar.select_slider[0].set_value(3).run()
    assert_clean(at)
    first = chart(at, "Logit lens")["data"][0]["y"]
    assert first != last and first[0].startswith("0:") and last[-1].startswith("63:")


def test_the_sections_are_tabs():
    """One section at a time (issue 49: long pages become tabs)."""
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["1 · Lengths", "2 · Writes", "3 · Logit lens",
                                          "4 · Neurons"]
    assert [r.key for r in at.tabs[0].radio] == ["residual.norm_view"]
    assert "residual.neuron_layer" in {b.key for b in at.tabs[3].selectbox}


def test_a_link_sets_the_view_and_a_bad_value_is_refused():
    at = open_page(PAGE, NORMAL, norm_view="lines: chosen tokens", lens_k="5")
    assert_clean(at)
    assert widget(at.radio, "Show").value == "lines: chosen tokens"
    assert chart(at, "‖x‖ of 1 token")["data"][0]["type"] == "scatter"
    assert query_param(at, "lens_k") == "5"
    at = open_page(PAGE, NORMAL, norm_view="pie chart")
    assert_clean(at)
    assert widget(at.radio, "Show").value == "heatmap: stages × tokens"
    assert any("is not one of" in w.value and "starts at heatmap" in w.value for w in at.warning)
