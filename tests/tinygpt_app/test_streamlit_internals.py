"""Streamlit's internals behind guards (tinygpt_app.streamlit_internals): today every name is
there; with a name removed (as an upgrade might), the feature that needs it is off, said once
in the log, and nothing raises."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.runtime import Runtime  # noqa: E402
from streamlit.runtime.pages_manager import PagesManager  # noqa: E402

from tinygpt_app import streamlit_internals as si  # noqa: E402


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test starts with no feature off and the start-up check not yet made."""
    monkeypatch.setattr(si, "_degraded", {})
    monkeypatch.setattr(si, "_checked", False)


def test_this_streamlit_has_every_name_the_app_uses():
    assert si.check() == {}
    for names in si.NEEDS.values():
        for module, path in names:
            si._look_up(module, path)  # raises if missing (a flag may be None)


def test_a_missing_name_turns_its_feature_off_once_in_the_log(monkeypatch, caplog):
    monkeypatch.delattr(Runtime, "exists")
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        off = si.check()
        si.check()
        assert si.serves_browsers() is False  # and the feature itself does not raise
        assert si.wake_session("any") is False
    assert list(off) == ["class push (students poll instead)"]
    said = [r.getMessage() for r in caplog.records if "class push" in r.getMessage()]
    assert len(said) == 1 and "exists" in said[0]


def test_outside_a_run_there_is_no_tab_and_no_page():
    assert si.session_id() == ""
    assert si.script_path_of_this_run() == ""
    assert si.serves_browsers() is False  # pytest is no Streamlit server
    assert si.wake_session("no such tab", page_hash="x") is False
    assert si.degraded() == {}


def test_leaving_the_pages_directory_mode_is_said_once(monkeypatch):
    monkeypatch.setattr(PagesManager, "uses_pages_directory", True)
    assert si.leave_pages_directory_mode() is True
    assert PagesManager.uses_pages_directory is False
    assert si.leave_pages_directory_mode() is False  # the rerun goes through app.py


def test_without_the_pages_directory_flag_a_deep_link_still_works(monkeypatch):
    monkeypatch.delattr(PagesManager, "uses_pages_directory")
    assert si.leave_pages_directory_mode() is False  # no rerun: the page runs as it is
    assert "deep link" in " ".join(si.degraded())


def test_a_page_without_its_hash_gives_none():
    class NoHash:
        pass

    assert si.page_hash(NoHash()) is None
    assert "teacher's page" in " ".join(si.degraded())


def test_the_projector_style_sheet_names_its_selectors():
    for selector in si.PROJECTOR_SELECTORS:
        assert selector.startswith("[data-testid=") and selector in si.PROJECTOR_CSS
    assert si.PROJECTOR_CSS.startswith("<style>") and si.PROJECTOR_CSS.endswith("</style>")


@pytest.mark.usefixtures("tiny_models")
def test_with_internal_names_gone_every_page_still_works(monkeypatch):
    """As after an upgrade that renamed them (those Streamlit's own test harness does not need
    itself): the features are off, every page draws."""
    from streamlit.runtime import app_session

    from tests.apptest_support import NORMAL, PAGES, assert_clean, open_page

    monkeypatch.delattr(PagesManager, "uses_pages_directory")  # (st.navigation sets it again)
    monkeypatch.delattr(app_session, "_populate_theme_msg")
    for page in PAGES:
        assert_clean(open_page(page, NORMAL))
    assert "the kept config sections (each rerun scans the config)" in si.check()


def unchecked_widget_reads(monkeypatch) -> None:
    """Streamlit's own WStates.__getitem__ again, as before kit.wire_check installed its check
    (restored after the test)."""
    from streamlit.runtime.state.session_state import WStates

    plain = getattr(WStates.__getitem__, "_tinygpt_original", WStates.__getitem__)
    monkeypatch.setattr(WStates, "__getitem__", plain)


def test_the_widget_check_wraps_streamlit_once(monkeypatch):
    from streamlit.runtime.state.session_state import WStates

    unchecked_widget_reads(monkeypatch)
    plain = WStates.__getitem__
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None)
    wrapped = WStates.__getitem__
    assert wrapped is not plain and wrapped._tinygpt_original is plain
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None)
    assert WStates.__getitem__ is wrapped  # a second install wraps nothing more
    assert si.degraded() == {}


@pytest.mark.usefixtures("tiny_models")
def test_without_the_widget_state_name_the_check_is_off_and_pages_work(monkeypatch, caplog):
    from streamlit.proto import WidgetStates_pb2
    from streamlit.runtime.state.session_state import WStates

    from tests.apptest_support import NORMAL, assert_clean, open_page
    from tinygpt_app.kit import wire_check

    unchecked_widget_reads(monkeypatch)
    plain = WStates.__getitem__
    monkeypatch.delattr(WidgetStates_pb2, "WidgetState")  # (Streamlit bound it at import)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert wire_check.install() is False
        assert si.WIDGET_CHECK in si.check()
        for page in ("pages/13_Lesson.py", "pages/7_Decoding.py"):
            at = open_page(page, NORMAL)
            assert_clean(at)
            assert not at.exception, [e.value for e in at.exception]
    assert WStates.__getitem__ is plain  # nothing was patched
    said = [r.getMessage() for r in caplog.records if si.WIDGET_CHECK in r.getMessage()]
    assert len(said) == 1 and "WidgetState" in said[0]
