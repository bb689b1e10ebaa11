"""The home page: the next-token guess follows the position."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import assert_clean, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


def test_home_predictions_follow_the_position():
    at = open_page("app.py", "ROMEO:\nBut soft, what light")
    before = at.dataframe[0].value
    assert before["probability"].is_monotonic_decreasing
    at.sidebar.select_slider[0].set_value(1).run()
    assert_clean(at)
    assert not before.equals(at.dataframe[0].value)


def test_the_whole_run_takes_one_turn(monkeypatch):
    """app.py's run, navigation and sidebar included, runs inside one fair turn (one page slot,
    its CPU charged): issue 26's floods of new sessions ran all that outside the line."""
    from tinygpt_app.kit import navigation
    from tinygpt_hosting.serving import fair_share, turn

    navigate, seen, slots = navigation.navigate, [], []

    def watched(home):
        seen.append(fair_share.current_cost() is not None)
        return navigate(home)

    acquire = turn.ADMISSION._acquire

    def counted(*args, **kwargs):
        slots.append(1)
        return acquire(*args, **kwargs)

    open_page("app.py", "ROMEO:\nBut soft, what light")  # the model's first load waits
    # outside the line (compute.models) and queues again: a second slot, once per server
    monkeypatch.setattr(navigation, "navigate", watched)
    monkeypatch.setattr(turn.ADMISSION, "_acquire", counted)
    at = open_page("app.py", "ROMEO:\nBut soft, what light")
    assert_clean(at)
    assert seen == [True] and len(slots) == 1  # in a turn from the start; page() took no second
