"""Page 5, logits: the heatmap is the model's output; a large vocabulary shows the union of the
top tokens; the tying selector rebuilds the chosen logit; the row follows the position."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    chart,
    chart_title,
    decode,
    open_page,
    query_param,
    title_of,
    widget,
)
from tinygpt.checkpoint.files import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/6_Logits.py"


@pytest.fixture(scope="module")
def tiny():
    return load(TINY)


def test_logits_heatmap_is_the_models_output(tiny):
    model, tok = tiny
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    logits = model.forward(np.array(tok.encode(NORMAL)))
    spec = chart(at, "Logits: n =")
    np.testing.assert_allclose(decode(spec["data"][0]["z"]), logits, rtol=1e-5, atol=1e-6)
    assert "whole vocabulary" in title_of(spec)


def test_large_vocabulary_shows_the_union_of_top_tokens(monkeypatch):
    from tinygpt_app.charts import common

    monkeypatch.setattr(common, "MAX_HEATMAP_CELLS", 2_000)
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    spec = chart(at, "Logits: n =")
    n_cols = decode(spec["data"][0]["z"]).shape[1]
    assert n_cols < 512 and f"{n_cols} of the v = 512" in title_of(spec)
    widget(at.slider, "Columns").set_value(1).run()
    assert decode(chart(at, "Logits: n =")["data"][0]["z"]).shape[1] < n_cols
    assert len(decode(chart(at, "Row ")["data"][0]["y"])) == 512  # the full-row overview


def test_tying_token_selector_changes_the_products(tiny):
    model, tok = tiny
    at = open_page(PAGE, NORMAL)
    box = widget(at.selectbox, "Token whose logit")
    before = chart(at, "logit(")
    token = int(re.search(r"\((\d+)\)$", box.options[3]).group(1))  # "·the (262)"
    box.set_value(token).run()
    assert_clean(at)
    after = chart(at, "logit(")
    assert before["data"][0]["y"] != after["data"][0]["y"]
    # the bars sum to the model's own logit for that position and token
    ids = np.array(tok.encode(NORMAL))
    logits = model.forward(ids)
    chosen = widget(at.selectbox, "Token whose logit").value
    assert chosen == token
    total = decode(after["data"][0]["y"]).astype(np.float64).sum()
    assert total == pytest.approx(float(logits[len(ids) - 1, chosen]), abs=1e-4)


def test_position_changes_the_logit_row():
    at = open_page(PAGE, NORMAL)
    row_last = chart_title(at, "Row ")
    at.sidebar.select_slider[0].set_value(1).run()
    assert_clean(at)
    assert chart_title(at, "Row ") != row_last


def test_the_parts_are_tabs():
    """One part at a time (issue 49: the page ran to ~7,900 px on a projector)."""
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["1 · The logits", "2 · Shift by one",
                                          "3 · Weight tying", "4 · The rank bottleneck",
                                          "Surprise map"]


def test_a_link_sets_the_columns_and_a_bad_value_is_refused(monkeypatch):
    from tinygpt_app.charts import common

    monkeypatch.setattr(common, "MAX_HEATMAP_CELLS", 2_000)  # the top-k slider shows
    at = open_page(PAGE, NORMAL, logits_k="3")
    assert_clean(at)
    assert widget(at.slider, "Columns").value == 3 and query_param(at, "logits_k") == "3"
    for bad in ("51", "0", "2.5", "lots"):
        at = open_page(PAGE, NORMAL, logits_k=bad)
        assert_clean(at)
        assert widget(at.slider, "Columns").value == 10  # the declared default
        assert any("value for" in w.value and "starts at 10" in w.value for w in at.warning)
