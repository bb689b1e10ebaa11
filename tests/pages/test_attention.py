"""Page 3, attention: the head and view selectors, and one score rebuilt by hand."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import assert_clean, chart_z, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/4_Attention.py"


def test_attention_page_head_selector_changes_the_map():
    at = open_page(PAGE, "Hello world, hello")
    head0 = chart_z(at, "Attention weights")
    at.selectbox(key="attention.head").set_value(1).run()
    assert_clean(at)
    head1 = chart_z(at, "Attention weights")
    assert head0.shape == head1.shape and not np.array_equal(head0, head1, equal_nan=True)
    at.radio(key="attention.view").set_value("scores before the mask").run()
    assert_clean(at)
    assert np.isfinite(chart_z(at, "Scores before")).all()  # nothing hidden before the mask


def test_query_key_table_matches_the_trace_score():
    at = open_page(PAGE, "Hello world, hello")
    table = at.dataframe[0].value
    by_hand, in_trace = table["value"].iloc[1], table["value"].iloc[2]
    assert by_hand == pytest.approx(in_trace, rel=1e-5, abs=1e-7)


def test_key_selector_starts_at_the_query_and_follows_it():
    at = open_page(PAGE, "Hello world, hello")
    key = at.selectbox(key="attention.key")
    assert key.value == len(key.options) - 1  # keys 0..query: the last one is the query
    at.sidebar.select_slider[0].set_value(1).run()
    assert_clean(at)
    assert at.selectbox(key="attention.key").value == 1  # a query sees itself and before


def test_the_parts_are_tabs_under_the_block_and_head_choice():
    """One part at a time (issue 49: the page ran to ~8,000 px on a Llama model); the block
    and head, the page's main controls, stay above the tabs."""
    at = open_page(PAGE, "Hello world, hello")  # GPT-2 style: no rotary, no shared heads
    assert [t.label for t in at.tabs] == ["The map", "One score by hand",
                                          "What the head hands on", "Every head"]
    in_tabs = {box.key for tab in at.tabs for box in tab.selectbox}
    assert "attention.key" in in_tabs
    assert not in_tabs & {"attention.layer", "attention.head"}
