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


def test_a_teachers_view_keeps_this_pages_controls_when_it_must_cut(monkeypatch):
    """The class carries at most max_controls - 1 controls (one place is the model's): when
    the teacher has set more, across pages, the ones in this page's link go first, so the
    students' page is the teacher's; the cut is not alphabetical."""
    from tinygpt_app.kit import state as s
    from tinygpt_hosting.classroom import rules as cr

    fake = SimpleNamespace(session_state={}, query_params={"temperature": "0.5", "top_k": "4"})
    monkeypatch.setattr(s, "st", fake)
    monkeypatch.setattr(live_class, "st", fake)
    monkeypatch.setattr(live_class, "current_page", lambda: "Softmax_and_sampling")
    fake.session_state.update({s.KEY_MODEL: "shakespeare.npz", s.KEY_PROMPT: "To be"})
    cap = cr.Limits().max_controls - 1
    for i in range(cap + 10):  # "a00" ... sort before "temperature" and "top_k"
        s.take_control(f"a{i:02d}", i)
    s.take_control("temperature", 0.5)
    s.take_control("top_k", 4)
    controls = live_class.view_state()["controls"]
    assert controls["temperature"] == 0.5 and controls["top_k"] == 4
    assert len(controls) == cap + 1  # and the model
