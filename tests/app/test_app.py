"""The home page and pages 1-3 under streamlit.testing: every page alone and from app.py, with
normal, empty, emoji + CJK and over-long prompts; controls change what is drawn; bad models."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import (  # noqa: E402
    FIXTURES,
    PROMPTS,
    assert_clean,
    assert_drawn_for,
    chart,
    charts,
    decode,
    open_page,
    query_param,
)

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGES = [
    "app.py",
    "pages/1_Tokens_and_embeddings.py",
    "pages/2_LayerNorm.py",
    "pages/3_Attention.py",
]


def first_z(at: AppTest, title_part: str) -> np.ndarray:
    return decode(chart(at, title_part)["data"][0]["z"], float)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("kind", list(PROMPTS))
def test_page_runs_with_every_kind_of_prompt(page, kind):
    at = open_page(page, PROMPTS[kind])
    assert_drawn_for(at, kind)
    assert at.sidebar.text_area[0].value == PROMPTS[kind]


@pytest.mark.parametrize("page", PAGES[1:])
def test_page_reached_from_the_home_page_keeps_the_prompt(page):
    at = open_page("app.py", "Hello there")
    at.sidebar.text_area[0].set_value("What light through yonder window").run()
    at.sidebar.select_slider[0].set_value(2).run()
    at.switch_page(page).run()
    assert_clean(at)
    assert at.sidebar.text_area[0].value == "What light through yonder window"
    assert at.sidebar.select_slider[0].value == 2
    assert charts(at)


def test_deep_link_sets_prompt_and_position():
    at = open_page("pages/3_Attention.py", "to be or not to be", pos="1")
    assert_clean(at)
    assert at.sidebar.select_slider[0].value == 1
    assert query_param(at, "prompt") == "to be or not to be"


def test_home_predictions_follow_the_position():
    at = open_page("app.py", "ROMEO:\nBut soft, what light")
    before = at.dataframe[0].value
    assert before["probability"].is_monotonic_decreasing
    at.sidebar.select_slider[0].set_value(1).run()
    assert_clean(at)
    assert not before.equals(at.dataframe[0].value)


def test_tokens_page_view_selector_changes_the_heatmap():
    at = open_page("pages/1_Tokens_and_embeddings.py", "Hello world")
    token = first_z(at, "Token embedding")
    at.radio(key="tok_view").set_value("Position embedding P[t]").run()
    assert_clean(at)
    position = first_z(at, "Position embedding")
    at.radio(key="tok_view").set_value("Sum: the block input x = E[id] + P[t]").run()
    total = first_z(at, "Sum")
    np.testing.assert_allclose(total, token + position, rtol=1e-5, atol=1e-6)


def test_layernorm_page_norm_selector_changes_the_histograms():
    at = open_page("pages/2_LayerNorm.py", "Hello world")
    before = decode(charts(at)[0]["data"][0]["x"], float)
    at.selectbox(key="ln_norm").set_value("Final LayerNorm (before the output layer)").run()
    assert_clean(at)
    after = decode(charts(at)[0]["data"][0]["x"], float)
    assert before.shape == after.shape and not np.array_equal(before, after)


def test_attention_page_head_selector_changes_the_map():
    at = open_page("pages/3_Attention.py", "Hello world, hello")
    head0 = first_z(at, "Attention weights")
    at.selectbox(key="attn_head").set_value(1).run()
    assert_clean(at)
    head1 = first_z(at, "Attention weights")
    assert head0.shape == head1.shape and not np.array_equal(head0, head1, equal_nan=True)
    at.radio(key="attn_view").set_value("scores before the mask").run()
    assert_clean(at)
    assert np.isfinite(first_z(at, "Scores before")).all()  # nothing hidden before the mask


def test_query_key_table_matches_the_trace_score():
    at = open_page("pages/3_Attention.py", "Hello world, hello")
    table = at.dataframe[0].value
    by_hand, in_trace = table["value"].iloc[1], table["value"].iloc[2]
    assert by_hand == pytest.approx(in_trace, rel=1e-5, abs=1e-7)


def test_invalid_model_shows_an_error_and_keeps_the_previous_one(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "tiny.npz", tmp_path / "good.npz")
    (tmp_path / "broken.npz").write_bytes(b"this is not a zip file")
    (tmp_path / "half_gpt2").mkdir()
    (tmp_path / "half_gpt2" / "config.json").write_text("{}")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "good.npz")
    at = open_page("pages/1_Tokens_and_embeddings.py", "Hello")
    assert_clean(at)
    for bad in ("broken.npz", "half_gpt2"):
        at.sidebar.selectbox[0].set_value(bad).run()
        assert not at.exception
        assert any(bad in e.value for e in at.error)
        assert at.sidebar.selectbox[0].value == "good.npz"
        assert query_param(at, "model") == "good.npz"
        assert charts(at)


def test_unknown_model_in_the_url_falls_back_to_the_default():
    at = open_page("app.py", "Hello", model="../../etc/passwd")
    assert_clean(at)
    assert at.sidebar.selectbox[0].value == "tiny.npz"


def test_merge_replay_offers_only_chunks_inside_the_window():
    at = open_page("pages/1_Tokens_and_embeddings.py", PROMPTS["over_long"])
    assert_clean(at)
    replay = at.selectbox[0]
    assert 0 < len(replay.options) <= 64  # the window holds 64 tokens, so at most 64 chunks
    assert replay.value == int(replay.options[-1].split(":")[0])  # the last token's chunk
