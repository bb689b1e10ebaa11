"""A tab's part of a live class (tinygpt_hosting.classroom.session): the heartbeat tells its own
reruns from its first call inside a page run by a count of page runs, a session value (not
Streamlit's internal list of the fragments of a run)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tinygpt_app.kit import slots  # noqa: E402
from tinygpt_hosting.classroom import session as live_class  # noqa: E402


@pytest.fixture
def tab(monkeypatch):
    """A tab's session values, without a Streamlit run."""
    fake = SimpleNamespace(session_state={})
    monkeypatch.setattr(slots, "st", fake)  # the slots keep the session's values
    return fake.session_state


def page_run(tab: dict) -> None:
    """What catch_up counts at the top of a student's page run."""
    tab[live_class.RUNS.key] = tab.get(live_class.RUNS.key, 0) + 1


def test_the_heartbeat_knows_its_own_reruns_from_a_page_run(tab):
    page_run(tab)
    assert live_class._ran_in_this_page_run() is False  # drawn by the page run
    assert live_class._ran_in_this_page_run() is True  # its timer's rerun
    assert live_class._ran_in_this_page_run() is True  # and the next
    page_run(tab)
    assert live_class._ran_in_this_page_run() is False  # the next page run draws it again
    assert live_class._ran_in_this_page_run() is True


def test_before_any_counted_page_run_the_first_call_is_the_page_runs(tab):
    assert live_class._ran_in_this_page_run() is False
    assert live_class._ran_in_this_page_run() is True
