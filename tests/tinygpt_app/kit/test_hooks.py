"""Page hooks (tinygpt_app.kit.hooks): what an optional feature adds to every page, run by the
frame at fixed points of a page run, in order; the frame itself knows no feature."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import NORMAL, assert_clean, charts, open_page  # noqa: E402
from tinygpt_app.kit import hooks  # noqa: E402
from tinygpt_app.kit.state import AppState  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
NAME = "test.recorder"
NOTE = "A note instead of the page menu"


@pytest.fixture
def calls():
    """A feature that records what the frame calls, plugged in for one test."""
    seen: list[str] = []
    hooks.register(NAME, hooks.PageHooks(
        before_page=lambda: seen.append("before_page"),
        after_sidebar=lambda state: seen.append(f"after_sidebar {type(state).__name__} "
                                                f"{state.prompt}"),
        after_page=lambda: seen.append("after_page")))
    yield seen
    hooks.unregister(NAME)


def test_register_replaces_by_name_and_unregister_removes():
    first, second = hooks.PageHooks(), hooks.PageHooks(leads_others=lambda: True)
    before = hooks.registered()
    hooks.register(NAME, first)
    hooks.register(NAME, second)
    try:
        assert hooks.registered() == [*before, second]  # one entry per name
        assert first not in hooks.registered()
    finally:
        hooks.unregister(NAME)
    assert hooks.registered() == before
    hooks.unregister(NAME)  # twice: nothing to remove, no error


def test_an_empty_feature_does_nothing():
    empty = hooks.PageHooks()
    assert empty.before_page() is None and empty.after_page() is None
    assert empty.sidebar_note() is None and empty.leads_others() is False


def test_the_frame_runs_the_hooks_in_order_with_the_pages_state(calls):
    at = open_page("pages/6_Logits.py", NORMAL)
    assert_clean(at)
    assert charts(at)
    assert calls == ["before_page", f"after_sidebar {AppState.__name__} {NORMAL}", "after_page"]


def test_a_page_stopped_for_its_invitation_runs_no_after_page(calls):
    at = open_page("pages/6_Logits.py", "")
    assert_clean(at)
    assert calls == ["before_page", f"after_sidebar {AppState.__name__} "]


def test_a_sidebar_note_takes_the_place_of_the_page_menu():
    at = open_page("app.py", NORMAL)
    assert at.sidebar.get("page_link"), "the menu, through app.py's navigation"
    hooks.register(NAME, hooks.PageHooks(sidebar_note=lambda: NOTE))
    try:
        at.run()
    finally:
        hooks.unregister(NAME)
    assert_clean(at)
    assert NOTE in [c.value for c in at.sidebar.caption]
    assert not at.sidebar.get("page_link")
