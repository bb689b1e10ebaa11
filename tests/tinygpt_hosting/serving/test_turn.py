"""serving.turn's place of a run in the page-run line (fair_share.Admission): who is a newcomer."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tinygpt_app.kit import slots
from tinygpt_hosting.serving import fair_share, session_door, turn

TOKEN = "a" * 43


@pytest.fixture
def door(monkeypatch: pytest.MonkeyPatch) -> session_door.SessionDoor:
    gate = session_door.SessionDoor(40, 30.0)
    monkeypatch.setattr(session_door, "_door", gate)
    return gate


def test_a_tokenless_run_from_a_stranger_is_a_newcomer_but_not_from_a_known_address(door):
    full = fair_share.Bucket()  # a tokenless bucket starts full: by credit it would go first
    assert turn.place_in_line(full, None, "10.0.0.9") == (True, False)
    assert turn.place_in_line(full, TOKEN, "10.0.0.9") == (False, False)  # it said who it is
    door.established("10.0.0.50")  # a class whose students stayed
    assert turn.place_in_line(full, None, "10.0.0.50") == (False, False)
    assert turn.place_in_line(full, None, "127.0.0.1") == (False, False)  # this machine


def test_a_new_browser_is_a_newcomer_known_when_its_address_was_there_first(door):
    new = fair_share.Bucket(level=0.0)
    assert turn.place_in_line(new, TOKEN, "10.0.0.9") == (True, False)
    door.established("10.0.0.9")
    assert turn.place_in_line(new, TOKEN, "10.0.0.9") == (True, True)
    assert turn.place_in_line(None, None, "10.0.0.8") == (False, False)  # fair shares off


def test_a_click_hurries_the_turn_that_follows_it_only(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(slots, "st", SimpleNamespace(session_state={}))  # a tab's values
    assert not turn.took_hurry()
    turn.hurry()  # a write button's callback, before the run's turn
    assert turn.took_hurry()
    assert not turn.took_hurry()  # the next run (a push, a heartbeat) waits as any other
