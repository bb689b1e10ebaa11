"""The teacher key's guard (classroom.teacher_key) and the classroom that uses it: wrong keys
from one address (its /64 for IPv6) wait longer and longer, are logged without the guess, and
the right key clears the count."""

from __future__ import annotations

import logging

import pytest

from tests.tinygpt_hosting.classroom.test_rules import Clock
from tinygpt_hosting.classroom import teacher_key as tk
from tinygpt_hosting.classroom.rules import ClassError, Classroom, Limits
from tinygpt_hosting.classroom.store_sqlite import SqliteClassStore

KEY = "correct horse battery"


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def room(tmp_path, clock):
    return Classroom(SqliteClassStore(tmp_path / "c.sqlite3"), Limits(classes_per_address=100),
                     clock, teacher_key=KEY, key_guard=tk.KeyGuard())


def why(room, key, address):
    with pytest.raises(ClassError) as caught:
        room.create_class(key, address=address)
    return caught.value.reason


def test_the_waits_double_after_the_free_tries():
    assert [tk.backoff(n) for n in range(1, 9)] == [0, 0, 0, 1, 2, 4, 8, 16]
    assert tk.backoff(10_000) == tk.MAX_WAIT


def test_650_guesses_take_days_not_a_minute():
    """Issue 45: 650 wrong keys took about 37 s; now the waits alone add up to days."""
    assert sum(tk.backoff(n) for n in range(1, 651)) > 5 * 24 * 3600


def test_wrong_keys_wait_then_the_right_key_clears_the_count(room, clock):
    for _ in range(tk.FREE):
        assert why(room, "guess", "10.0.0.5") == "teacher_key"
    assert why(room, "guess", "10.0.0.5") == "teacher_key"  # the 4th: now it waits 1 s
    assert why(room, KEY, "10.0.0.5") == "teacher_key_wait"  # not even checked
    clock.advance(1.01)
    assert why(room, "guess", "10.0.0.5") == "teacher_key"  # the 5th: 2 s
    clock.advance(1.5)
    assert why(room, KEY, "10.0.0.5") == "teacher_key_wait"
    clock.advance(0.6)
    room.create_class(KEY, address="10.0.0.5")  # the right key, after the wait
    for _ in range(tk.FREE):  # and the count starts again
        assert why(room, "guess", "10.0.0.5") == "teacher_key"


def test_the_wait_is_per_address_and_a_64_is_one_address(room, clock):
    for n in range(tk.FREE + 3):
        clock.advance(tk.backoff(n))
        assert why(room, "guess", f"2001:db8:7:7::{n + 1:x}") == "teacher_key"
    assert why(room, KEY, "2001:db8:7:7::ffff") == "teacher_key_wait"  # same /64, new address
    room.create_class(KEY, address="10.0.0.7")  # a real teacher elsewhere is not held up


def test_a_wrong_key_is_logged_without_the_guess(room, caplog):
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        why(room, "my-secret-guess", "10.0.0.8")
    assert "wrong teacher key from 10.0.0.8" in caplog.text
    assert "my-secret-guess" not in caplog.text


def test_the_message_says_how_long_to_wait(room, clock):
    for n in range(1, tk.FREE + 4):
        clock.advance(tk.backoff(n - 1))
        why(room, "guess", "10.0.0.9")  # the 6th wrong key in a row: 4 s
    clock.advance(0.5)
    with pytest.raises(ClassError, match="checked in 4 s"):
        room.create_class(KEY, address="10.0.0.9")


def test_addresses_are_forgotten_and_bounded(clock):
    guard = tk.KeyGuard(max_addresses=2)
    for _ in range(tk.FREE + 2):
        guard.failed("a", clock())
    assert guard.wait("a", clock()) > 0
    assert guard.wait("a", clock() + tk.FORGET + 1) == 0  # an hour without a wrong key
    guard.failed("b", clock())
    guard.failed("c", clock())  # "a" was the least recently used: gone
    assert guard.wait("a", clock()) == 0
