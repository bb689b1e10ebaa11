"""The home page and pages 1-3 under streamlit.testing: every page alone and from app.py, with
normal, empty, emoji + CJK and over-long prompts; controls change what is drawn; bad models."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PAGES = [
    "app.py",
    "pages/1_Tokens_and_embeddings.py",
    "pages/2_LayerNorm.py",
    "pages/3_Attention.py",
]
PROMPTS = {
    "normal": "ROMEO:\nBut soft, what light",
    "empty": "",
    "emoji_cjk": "Hello 👋🏽 世界, 東京へ行きます! 🎭",
    "over_long": "To be, or not to be, that is the question. " * 60,  # far more than n_ctx = 64
}


@pytest.fixture(autouse=True)
def tiny_models(monkeypatch):
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(FIXTURES))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")


def open_page(page: str, prompt: str | None = None, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=60)
    if prompt is not None:
        at.query_params["prompt"] = prompt
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A figure's data field: a plain list, or Plotly's typed array {dtype, bdata, shape}."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = [int(x) for x in str(value.get("shape", len(flat))).split(",")]
        return flat.reshape(shape).astype(float)
    return np.asarray(value, dtype=float)


def first_z(at: AppTest, title_part: str) -> np.ndarray:
    for spec in charts(at):
        title = spec["layout"].get("title", {}).get("text", "")
        if title_part in title:
            return array(spec["data"][0]["z"])
    raise AssertionError(f"no chart titled like {title_part!r}")


def query_param(at: AppTest, key: str) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("kind", list(PROMPTS))
def test_page_runs_with_every_kind_of_prompt(page, kind):
    at = open_page(page, PROMPTS[kind])
    assert_clean(at)
    assert at.sidebar.text_area[0].value == PROMPTS[kind]
    if kind == "empty":
        assert at.info and not charts(at)  # an invitation to type, nothing drawn
    else:
        assert charts(at)
    if kind == "over_long":
        assert any("only the last 64" in w.value for w in at.warning)


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
    before = array(charts(at)[0]["data"][0]["x"])
    at.selectbox(key="ln_norm").set_value("Final LayerNorm (before the output layer)").run()
    assert_clean(at)
    after = array(charts(at)[0]["data"][0]["x"])
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
