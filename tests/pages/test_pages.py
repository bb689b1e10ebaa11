"""Every page under streamlit.testing: alone and reached from the home page, with normal, empty,
emoji + CJK and over-long prompts; deep links; damaged or unknown models; the navigation; and
session_state that does not grow with the number of prompts tried."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    FIXTURES,
    NORMAL,
    PAGES,
    PROMPTS,
    ROOT,
    WITHOUT_CHARTS,
    assert_clean,
    assert_drawn_for,
    charts,
    open_page,
    query_param,
    session_keys,
)
from tinygpt_app.kit import navigation  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("kind", list(PROMPTS))
def test_every_page_runs_with_every_kind_of_prompt(page, kind):
    at = open_page(page, PROMPTS[kind])
    assert_drawn_for(at, kind, page)
    assert at.sidebar.text_area[0].value == PROMPTS[kind]


@pytest.mark.parametrize("page", navigation.PAGE_FILES)
def test_page_reached_from_the_home_page_keeps_prompt_and_position(page):
    at = open_page("app.py", "Hello there")
    at.sidebar.text_area[0].set_value("What light through yonder window").run()
    at.sidebar.select_slider[0].set_value(2).run()
    at.switch_page(page).run()
    assert_clean(at)
    assert at.sidebar.text_area[0].value == "What light through yonder window"
    assert at.sidebar.select_slider[0].value == 2
    assert charts(at) or page in WITHOUT_CHARTS


def test_one_token_prompt():
    for page in PAGES:
        at = open_page(page, "R")
        assert_clean(at)


def test_deep_link_sets_prompt_and_position():
    at = open_page("pages/4_Attention.py", "to be or not to be", pos="1")
    assert_clean(at)
    assert at.sidebar.select_slider[0].value == 1
    assert query_param(at, "prompt") == "to be or not to be"


def test_invalid_model_shows_an_error_and_keeps_the_previous_one(tmp_path, monkeypatch):
    shutil.copy(FIXTURES / "tiny.npz", tmp_path / "good.npz")
    (tmp_path / "broken.npz").write_bytes(b"this is not a zip file")
    (tmp_path / "half_gpt2").mkdir()
    (tmp_path / "half_gpt2" / "config.json").write_text("{}")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "good.npz")
    at = open_page("pages/2_Tokens_and_embeddings.py", "Hello")
    assert_clean(at)
    for bad in ("broken.npz", "half_gpt2"):
        at.sidebar.selectbox[0].set_value(bad).run()
        assert not at.exception
        assert any(bad in e.value.replace("\\", "") for e in at.error)  # markdown escapes
        assert at.sidebar.selectbox[0].value == "good.npz"
        assert query_param(at, "model") == "good.npz"
        assert charts(at)


def test_unknown_model_in_the_url_falls_back_to_the_default():
    at = open_page("app.py", "Hello", model="../../etc/passwd")
    assert_clean(at)
    assert at.sidebar.selectbox[0].value == "tiny.npz"


def test_the_page_list_is_every_file_in_pages():
    assert sorted(navigation.PAGE_FILES) == sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "pages").rglob("*.py"))
    paths = [navigation.url_path(p) for p in navigation.PAGE_FILES]
    assert paths[paths.index("Attention") + 1] == "Residual_stream"
    assert navigation.url_path("pages/1_Lesson.py") == "Lesson"
    assert navigation.url_path("pages/7_Softmax_and_sampling.py") == "Softmax_and_sampling"


def test_navigation_lists_home_first_and_keeps_every_url_path():
    """The pages st.navigation registers: Home at "/", each file at today's path (/Attention,
    /Softmax_and_sampling, ...). The sections are checked in a browser (tests/e2e)."""
    at = open_page("app.py", NORMAL)
    assert_clean(at)
    pages = list(at._registered_pages.values())  # what st.navigation told the browser
    assert (pages[0]["page_name"], pages[0]["url_pathname"]) == ("Home", "")
    assert [p["url_pathname"] for p in pages[1:]] == [
        navigation.url_path(f) for f in navigation.PAGE_FILES]
    assert [Path(p["script_path"]) for p in pages[1:]] == [
        ROOT / f for f in navigation.PAGE_FILES]


@pytest.mark.parametrize("page, prefix", [
    ("pages/2_Tokens_and_embeddings.py", "tokens"),
                                          ("pages/4_Attention.py", "attention")])
def test_session_state_does_not_grow_with_the_prompts_tried(page, prefix):
    """Widget keys are fixed names: five prompts leave the same keys as two."""
    at = open_page(page, "first prompt")
    keys = []
    prompts = ["to be or not", "that is the question", "whether 'tis nobler", "in the mind",
               "to suffer the slings and arrows"]
    for prompt in prompts:
        at.sidebar.text_area[0].set_value(prompt).run()
        at.sidebar.select_slider[0].set_value(1).run()
        assert_clean(at)
        keys.append(session_keys(at))
    assert keys[1] == keys[-1]
    for prompt in prompts:
        assert not any(str(hash(prompt)) in key for key in keys[-1])
    prefixes = {key.rsplit("-", 1)[-1].split(".")[0] for key in keys[-1] if key.startswith("$$ID")}
    # every widget keyed by its page's name, or one of the frame's fixed ones (the browser
    # token's component, the menu's sidebar closer)
    assert prefixes <= {"sidebar", prefix, "browser_token", "navigation"}
