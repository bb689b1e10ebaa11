"""The watcher that wakes students when their class changes (tinygpt_hosting.classroom.push), over a
real SQLite class store; `tick()` is driven by hand and the wakes are recorded.

The browser test (tests/e2e/test_class_e2e.py) runs it in a real server, with the students'
own heartbeat slowed down so that only the push can make them follow in time.
"""

from __future__ import annotations

import pytest

from tinygpt_hosting.classroom import push as class_push
from tinygpt_hosting.classroom.push import Watcher, needs_waking
from tinygpt_hosting.classroom.rules import Pulse, open_classroom


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    return open_classroom("sqlite")


@pytest.fixture
def lesson(room):
    """A class, the watcher over it and the list of sessions it woke."""
    new = room.create_class()
    woken: list[str] = []
    gone: set[str] = set()

    def wake(session_id: str, code: str, pulse: Pulse, following: bool) -> bool:
        if session_id in gone:
            return False
        woken.append(session_id)
        return True

    watcher = Watcher(room.pulse, wake, interval=3600.0, forget_after=3600.0)
    return room, new, watcher, woken, gone


def test_what_needs_waking():
    drawn = Pulse(3, 1, False)
    assert not needs_waking(drawn, Pulse(3, 1, False), following=True)
    assert needs_waking(drawn, Pulse(4, 1, False), following=True)
    assert not needs_waking(drawn, Pulse(4, 1, False), following=False)  # exploring on their own
    assert needs_waking(drawn, Pulse(3, 2, False), following=False)  # a new question
    assert needs_waking(drawn, Pulse(3, 1, True), following=False)  # the reveal


def test_a_following_student_is_woken_once_per_change(lesson):
    room, new, watcher, woken, _ = lesson
    watcher.watch("follows", new.code, room.pulse(new.code), following=True)
    watcher.watch("explores", new.code, room.pulse(new.code), following=False)
    assert watcher.tick() == 0 and woken == []
    room.publish(new.code, new.secret, page="Logits", prompt="To be")
    assert watcher.tick() == 1 and woken == ["follows"]
    assert watcher.tick() == 0  # woken already: not again while its run catches up
    watcher.watch("follows", new.code, Pulse(0, 0, False), following=True)  # a run from before
    assert watcher.tick() == 0  # ...still not: once per change
    watcher.watch("follows", new.code, room.pulse(new.code), following=True)  # caught up
    room.open_round(new.code, new.secret, kind="next_token", prompt="To be")
    assert watcher.tick() == 2 and sorted(woken[1:]) == ["explores", "follows"]


def test_a_closed_tab_or_an_ended_class_is_let_go(lesson):
    room, new, watcher, woken, gone = lesson
    watcher.watch("closed", new.code, room.pulse(new.code), following=True)
    watcher.watch("elsewhere", "ZZZZZZ", Pulse(0, 0, False), following=True)  # no such class
    gone.add("closed")
    room.publish(new.code, new.secret, page="Logits", prompt="To be")
    assert watcher.tick() == 0 and woken == []
    assert len(watcher) == 1  # the closed tab is forgotten; the other waits for its heartbeat
    watcher.forget("elsewhere")
    assert len(watcher) == 0


def test_sessions_not_heard_from_are_forgotten(lesson):
    room, new, watcher, _, _ = lesson
    watcher.forget_after = 0.0
    watcher.watch("quiet", new.code, room.pulse(new.code), following=True)
    watcher.tick()
    assert len(watcher) == 0


def test_the_watch_list_is_capped(lesson, monkeypatch):
    room, new, watcher, _, _ = lesson
    monkeypatch.setattr(class_push, "MAX_WATCHED", 3)
    for i in range(5):
        watcher.watch(f"s{i}", new.code, Pulse(0, 0, False), following=True)
    assert len(watcher) == 3
    watcher.watch("s0", new.code, Pulse(1, 0, False), following=True)  # known: still updated
    assert len(watcher) == 3
