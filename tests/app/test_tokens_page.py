"""Page 1, tokens and embeddings: the view selector and the BPE merge replay."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import PROMPTS, assert_clean, chart_z, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/1_Tokens_and_embeddings.py"


def test_tokens_page_view_selector_changes_the_heatmap():
    at = open_page(PAGE, "Hello world")
    token = chart_z(at, "Token embedding")
    at.radio(key="tokens.view").set_value("Position embedding P[t]").run()
    assert_clean(at)
    position = chart_z(at, "Position embedding")
    at.radio(key="tokens.view").set_value("Sum: the block input x = E[id] + P[t]").run()
    total = chart_z(at, "Sum")
    np.testing.assert_allclose(total, token + position, rtol=1e-5, atol=1e-6)


def test_merge_replay_offers_only_chunks_inside_the_window():
    at = open_page(PAGE, PROMPTS["over_long"])
    assert_clean(at)
    replay = at.selectbox(key="tokens.chunk")
    assert 0 < len(replay.options) <= 64  # the window holds 64 tokens, so at most 64 chunks
    assert replay.value == int(replay.options[-1].split(":")[0])  # the last token's chunk


def test_merge_replay_starts_from_the_chunk_of_the_inspected_token():
    """A fixed widget key still follows the position: a new position, a new start."""
    at = open_page(PAGE, "one two three four")
    last = at.selectbox(key="tokens.chunk").value
    at.selectbox(key="tokens.chunk").set_value(0).run()
    assert at.selectbox(key="tokens.chunk").value == 0  # the student's choice stays...
    at.sidebar.select_slider[0].set_value(2).run()
    assert_clean(at)
    assert 0 < at.selectbox(key="tokens.chunk").value < last  # ...until the position moves
