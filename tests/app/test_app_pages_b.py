"""Pages 4 (residual stream), 5 (logits) and 8 (what if) under streamlit.testing.

Every page alone and reached from app.py, with normal, empty, emoji + CJK and over-long prompts;
each control changes what is drawn; the drawn numbers are the model's own.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    PROMPTS,
    TINY,
    assert_clean,
    assert_drawn_for,
    chart,
    charts,
    decode,
    open_page,
)
from tinygpt import Interventions  # noqa: E402
from tinygpt.checkpoint import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
RESIDUAL, LOGITS, WHAT_IF = "pages/4_Residual_stream.py", "pages/5_Logits.py", "pages/8_What_if.py"
PAGES = [RESIDUAL, LOGITS, WHAT_IF]


@pytest.fixture(scope="module")
def tiny():
    return load(TINY)


def widget(elements, label: str):
    for el in elements:
        if el.label.startswith(label):
            return el
    raise AssertionError(f"no widget labelled {label!r}")


# ----------------------------------------------------------------------------- every page


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("kind", list(PROMPTS))
def test_page_runs_with_every_kind_of_prompt(page, kind):
    at = open_page(page, PROMPTS[kind])
    assert_drawn_for(at, kind)


@pytest.mark.parametrize("page", PAGES)
def test_page_reached_from_the_home_page(page):
    at = open_page("app.py", NORMAL)
    at.switch_page(page).run()
    assert_clean(at)
    assert at.sidebar.text_area[0].value == NORMAL
    assert charts(at)


def test_one_token_prompt():
    for page in PAGES:
        at = open_page(page, "R")
        assert_clean(at)


# ----------------------------------------------------------------------------- residual stream


def test_residual_norms_are_the_trace_norms(tiny):
    model, tok = tiny
    at = open_page(RESIDUAL, NORMAL)
    _, trace = model.run_with_trace(np.array(tok.encode(NORMAL)))
    z = decode(chart(at, "Residual norm")["data"][0]["z"])
    np.testing.assert_allclose(z[0], np.linalg.norm(trace["embed.sum"], axis=-1), rtol=1e-5)


def test_residual_view_and_lens_controls_change_the_charts():
    at = open_page(RESIDUAL, NORMAL)
    assert chart(at, "Residual norm")["data"][0]["type"] == "heatmap"
    widget(at.radio, "Show").set_value("lines: chosen tokens").run()
    assert_clean(at)
    assert chart(at, "‖x‖ of 1 token")["data"][0]["type"] == "scatter"

    rows_per_block = len(decode(chart(at, "Logit lens")["data"][0]["z"]))
    widget(at.radio, "Read the stream").set_value("after each sublayer").run()
    assert_clean(at)
    rows_per_sublayer = len(decode(chart(at, "Logit lens")["data"][0]["z"]))
    assert (rows_per_block, rows_per_sublayer) == (3, 5)  # 1 + L vs 1 + 2L, L = 2


def test_lens_window_follows_the_position():
    at = open_page(RESIDUAL, PROMPTS["over_long"])
    last = chart(at, "Logit lens")["layout"]["xaxis"]["ticktext"]
    at.sidebar.select_slider[0].set_value(3).run()
    assert_clean(at)
    first = chart(at, "Logit lens")["layout"]["xaxis"]["ticktext"]
    assert first != last and first[0].startswith("0:") and last[-1].startswith("63:")


# ----------------------------------------------------------------------------- logits


def test_logits_heatmap_is_the_models_output(tiny):
    model, tok = tiny
    at = open_page(LOGITS, NORMAL)
    assert_clean(at)
    logits = model.forward(np.array(tok.encode(NORMAL)))
    z = decode(chart(at, "Logits: n =")["data"][0]["z"])
    np.testing.assert_allclose(z, logits, rtol=1e-5, atol=1e-6)


def test_large_vocabulary_shows_the_union_of_top_tokens(monkeypatch):
    import ui

    monkeypatch.setattr(ui, "MAX_HEATMAP_CELLS", 2_000)
    at = open_page(LOGITS, NORMAL)
    assert_clean(at)
    n_cols = decode(chart(at, "Logits: n =")["data"][0]["z"]).shape[1]
    assert n_cols < 512
    widget(at.slider, "Columns").set_value(1).run()
    assert decode(chart(at, "Logits: n =")["data"][0]["z"]).shape[1] < n_cols
    assert len(decode(chart(at, "Row ")["data"][0]["y"])) == 512  # the full-row overview


def test_tying_token_selector_changes_the_products(tiny):
    model, tok = tiny
    at = open_page(LOGITS, NORMAL)
    box = widget(at.selectbox, "Token whose logit")
    before = chart(at, "logit(")
    token = box.options[3]
    box.set_value(int(token.split(":")[0]) if isinstance(token, str) else token).run()
    assert_clean(at)
    after = chart(at, "logit(")
    assert before["data"][0]["y"] != after["data"][0]["y"]
    # the bars sum to the model's own logit for that position and token
    ids = np.array(tok.encode(NORMAL))
    logits = model.forward(ids)
    chosen = widget(at.selectbox, "Token whose logit").value
    total = decode(after["data"][0]["y"]).astype(np.float64).sum()
    assert total == pytest.approx(float(logits[len(ids) - 1, chosen]), abs=1e-4)


def test_position_changes_the_logit_row():
    at = open_page(LOGITS, NORMAL)
    row_last = chart(at, "Row ")["layout"]["title"]["text"]
    at.sidebar.select_slider[0].set_value(1).run()
    assert_clean(at)
    assert chart(at, "Row ")["layout"]["title"]["text"] != row_last


# ----------------------------------------------------------------------------- what if


def test_what_if_switch_changes_the_prediction(tiny):
    model, tok = tiny
    at = open_page(WHAT_IF, NORMAL)
    assert at.info  # all switches off
    widget(at.toggle, "No causal mask").set_value(True).run()
    assert_clean(at)
    fig = chart(at, "Next token after position")
    normal, switched = decode(fig["data"][0]["x"]), decode(fig["data"][1]["x"])
    assert not np.allclose(normal, switched)
    # the switched bars are the model's own probabilities with the mask removed
    ids = np.array(tok.encode(NORMAL))
    ref = model.forward(ids, interventions=Interventions(no_causal_mask=True))[-1]
    p = np.exp(ref - ref.max())
    p /= p.sum()
    assert switched.max() == pytest.approx(p.max(), rel=1e-4)
    # without the mask the attention map has no hidden (NaN) cells any more
    z_normal = decode(chart(at, "normal: block 0")["data"][0]["z"]).astype(float)
    z_switched = decode(chart(at, "switched: block 0")["data"][0]["z"]).astype(float)
    assert np.isnan(z_normal).any() and not np.isnan(z_switched).any()


def test_what_if_zero_head_and_stage_views():
    at = open_page(WHAT_IF, NORMAL)
    widget(at.multiselect, "Zero these heads").set_value([(0, 1), (1, 2)]).run()
    widget(at.multiselect, "Skip the feed-forward").set_value([1]).run()
    assert_clean(at)
    fig = chart(at, "Next token after position")
    assert not np.allclose(decode(fig["data"][0]["x"]), decode(fig["data"][1]["x"]))
    for stage, title in (("residual norms", "switched: ‖x‖"), ("logit lens", "switched: logit")):
        widget(at.radio, "Stage").set_value(stage).run()
        assert_clean(at)
        assert chart(at, title)


def test_what_if_head_selector_changes_the_map():
    at = open_page(WHAT_IF, NORMAL)
    z0 = decode(chart(at, "normal: block 0")["data"][0]["z"])
    widget(at.selectbox, "Head").set_value(2).run()
    assert_clean(at)
    z2 = decode(chart(at, "normal: block 0, head 2")["data"][0]["z"])
    assert not np.allclose(np.nan_to_num(z0), np.nan_to_num(z2))


def test_what_if_every_switch_at_once():
    at = open_page(WHAT_IF, PROMPTS["over_long"])
    for label in ("No position", "No causal mask", "No LayerNorm", "No residual"):
        widget(at.toggle, label).set_value(True).run()
    widget(at.multiselect, "Skip attention").set_value([0, 1]).run()
    assert_clean(at)
    for stage in ("residual norms", "logit lens"):
        widget(at.radio, "Stage").set_value(stage).run()
        assert_clean(at)
