"""The page list and where a run is (tinygpt_app.kit.navigation): through app.py the page comes
from st.navigation's answer, each file page has our URL path, and a page run on its own links
by file name."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import NORMAL, ROOT, assert_clean, open_page  # noqa: E402
from tinygpt_app.kit import navigation  # noqa: E402
from tinygpt_app.kit.navigation import SIDEBAR_CLOSE_BUTTON  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


def where_am_i() -> None:
    """A page that says where it is (run alone, as AppTest.from_function does)."""
    import streamlit as st

    from tinygpt_app.kit import navigation

    st.text(f"{navigation.through_navigation()} {navigation.current_url_path()!r} "
            f"{navigation.page('pages/4_Attention.py')!r}")


def test_the_page_st_navigation_chose_is_kept_and_forgotten_by_a_page_run_alone():
    """Home through app.py: st.navigation's answer is kept for the page's fragments. AppTest's
    switch_page runs the page file on its own (no app.py): that run forgets it."""
    at = open_page("app.py", NORMAL)
    assert_clean(at)
    assert at.session_state[navigation.KEY_CURRENT] == ""  # Home
    at.switch_page("pages/4_Attention.py").run()
    assert_clean(at)
    assert at.title[0].value == "Attention"
    assert navigation.KEY_CURRENT not in at.session_state
    assert not at.sidebar.get("page_link")  # run alone: no menu of pages it cannot reach


def test_the_page_hashes_are_the_ones_st_navigation_registered():
    at = open_page("app.py", NORMAL)
    registered = {info["url_pathname"]: page_hash
                  for page_hash, info in at._registered_pages.items()}
    for file in navigation.PAGE_FILES:
        path = navigation.url_path(file)
        assert navigation.script_hash(path) == registered[path]
    assert navigation.script_hash("") == registered[""]
    assert navigation.script_hash("No_such_page") is None


def test_a_page_run_on_its_own_knows_its_file_and_links_by_name():
    at = AppTest.from_function(where_am_i).run()
    assert not at.exception
    assert at.text[0].value == "False '' 'pages/4_Attention.py'"
    alone = AppTest.from_file(str(ROOT / "pages/4_Attention.py"), default_timeout=60)
    alone.query_params["prompt"] = NORMAL
    alone.run()
    assert_clean(alone)
    assert navigation.KEY_CURRENT not in alone.session_state


def test_page_file_is_the_inverse_of_url_path():
    for file in navigation.PAGE_FILES:
        assert navigation.page_file(navigation.url_path(file)) == file
    assert navigation.page_file("") == navigation.HOME
    assert navigation.page_file("../etc") == navigation.HOME


def test_pages_are_numbered_in_menu_order_and_keep_their_urls():
    """The files are numbered as the menu lists them (issue 44); the URL paths, and so every
    deep link and shared link made before the renumbering, are the names without number."""
    numbers = [int(file.rsplit("/", 1)[1].split("_", 1)[0]) for file in navigation.PAGE_FILES]
    assert numbers == list(range(1, len(navigation.PAGE_FILES) + 1))
    assert [navigation.url_path(file) for file in navigation.PAGE_FILES] == [
        "Lesson", "Tokens_and_embeddings", "LayerNorm", "Attention", "Residual_stream",
        "Logits", "Softmax_and_sampling", "Decoding", "Chat", "What_if", "Interventions",
        "Training", "Architectures", "Why_this_token", "Compare_prompts", "Class"]
    assert sorted(navigation.PAGE_FILES) == sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "pages").rglob("*.py"))


def test_the_menu_closes_the_sidebar_with_a_component_that_takes_no_room():
    """The listener the menu mounts (its behaviour is checked in Chromium: e2e
    test_lesson_room_e2e): it clicks Streamlit's own close button, hides its own box."""
    assert SIDEBAR_CLOSE_BUTTON in navigation.CLOSER_JS
    assert "SIDEBAR_CLOSE_BUTTON" not in navigation.CLOSER_JS  # the name was filled in
    assert "(max-width: 767.98px)" in navigation.CLOSER_JS and "projector" in navigation.CLOSER_JS


def test_the_home_page_mounts_the_closer_once():
    at = open_page("app.py", NORMAL)
    assert_clean(at)
    assert [c.key for c in at.get("bidi_component")].count(navigation.CLOSER_KEY) == 1
    assert at.sidebar.button(key="sidebar.apply_prompt")  # the prompt's Apply, for phones
