"""tinygpt_app.training.queue: trainings take turns, first come first served, one per student;
whoever finishes and starts again goes behind those who wait; places of closed tabs expire."""

from __future__ import annotations

import pytest

from tinygpt_app.training.queue import ADDRESS, FULL, OFF, RUNNING, STALE, TrainingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_first_come_first_served_with_places_and_waits(clock):
    queue = TrainingQueue(1, 10, clock)
    first, ticket = queue.ask("a", 100.0)
    assert first.started and ticket is not None
    b, c = queue.ask("b", 60.0)[0], queue.ask("c", 30.0)[0]
    assert (b.started, b.place, b.wait) == (False, 1, 100.0)  # a's whole time limit
    assert (c.started, c.place, c.wait) == (False, 2, 160.0)  # then b's
    clock.now += 40.0
    assert queue.ask("b", 60.0)[0].wait == 60.0  # a has 60 s left at most
    queue.finish(ticket)
    assert not queue.ask("c", 30.0)[0].started  # c is behind b: b's turn first
    assert queue.ask("b", 60.0)[0].started


def test_one_who_finishes_and_restarts_goes_behind_those_waiting(clock):
    """The issue: a student who starts again each time theirs ends kept the class out."""
    queue = TrainingQueue(1, 10, clock)
    _, ticket = queue.ask("eager", 300.0)
    assert queue.ask("patient", 300.0)[0].place == 1
    queue.finish(ticket)
    again = queue.ask("eager", 300.0)[0]  # pressed Start the moment theirs ended
    assert not again.started and again.place == 2
    assert queue.ask("patient", 300.0)[0].started


def test_one_training_per_student(clock):
    queue = TrainingQueue(2, 10, clock)
    assert queue.ask("a", 10.0)[0].started
    second = queue.ask("a", 10.0)
    assert second == (second[0], None) and second[0].full and not second[0].started
    assert queue.running() == 1


def test_the_line_is_bounded(clock):
    queue = TrainingQueue(1, 2, clock)
    queue.ask("a", 10.0)
    assert queue.ask("b", 10.0)[0].place == 1
    assert queue.ask("c", 10.0)[0].place == 2
    assert queue.ask("d", 10.0)[0].full
    assert queue.waiting() == 2


def test_a_place_not_asked_about_expires(clock):
    """A closed tab stops asking: after STALE seconds the next in line moves up."""
    queue = TrainingQueue(1, 10, clock)
    _, ticket = queue.ask("a", 10.0)
    queue.ask("gone", 10.0)
    assert queue.ask("b", 10.0)[0].place == 2
    clock.now += STALE / 2
    assert queue.ask("b", 10.0)[0].place == 2
    clock.now += STALE / 2 + 1
    assert queue.ask("b", 10.0)[0].place == 1
    queue.finish(ticket)
    assert queue.ask("b", 10.0)[0].started


def test_leaving_the_line(clock):
    queue = TrainingQueue(1, 10, clock)
    queue.ask("a", 10.0)
    queue.ask("b", 10.0)
    queue.ask("c", 10.0)
    queue.leave("b")
    assert queue.ask("c", 10.0)[0].place == 1


def test_two_slots_serve_the_line_in_order(clock):
    queue = TrainingQueue(2, 10, clock)
    _, t1 = queue.ask("a", 50.0)
    _, t2 = queue.ask("b", 80.0)
    assert queue.ask("c", 10.0)[0].wait == 50.0  # the slot that frees first
    assert queue.ask("d", 10.0)[0].wait == 60.0  # then c's 10 s on that same slot
    queue.finish(t2)
    assert queue.ask("d", 10.0)[0].place == 2  # behind c, though a slot is free for one
    assert queue.ask("c", 10.0)[0].started
    queue.finish(t1)
    assert queue.ask("d", 10.0)[0].started


def test_no_slots_refuses_every_start_plainly(clock):
    """TINYGPT_MAX_TRAININGS=0: before, the second student got an IndexError (no slot free)."""
    queue = TrainingQueue(0, 10, clock)
    for client in ("a", "b", "c"):
        turn, ticket = queue.ask(client, 60.0)
        assert ticket is None and turn.full and turn.why == OFF
    assert queue.waiting() == 0 and queue.running() == 0


def test_one_address_holds_at_most_its_places_in_line(clock):
    """One student with many tabs (one client each) cannot fill the line."""
    queue = TrainingQueue(1, 60, clock, per_address=2)
    assert queue.ask("other", 60.0, "10.0.0.9")[1] is not None  # holds the slot
    assert queue.ask("tab1", 60.0, "10.0.0.1")[0].place == 1
    assert queue.ask("tab2", 60.0, "10.0.0.1")[0].place == 2
    third = queue.ask("tab3", 60.0, "10.0.0.1")[0]
    assert (third.full, third.why) == (True, ADDRESS)
    assert queue.ask("tab1", 60.0, "10.0.0.1")[0].place == 1  # a kept place is no new one
    assert queue.ask("next door", 60.0, "10.0.0.2")[0].place == 3  # another machine waits
    queue.leave("tab1")
    assert queue.ask("tab3", 60.0, "10.0.0.1")[0].place == 3  # a place freed: it may wait


def test_the_places_of_one_ipv6_64_are_counted_together(clock):
    """Issue 45: 15 addresses of one /64 would have filled all 60 places in line."""
    queue = TrainingQueue(1, 60, clock, per_address=4)
    assert queue.ask("other", 60.0, "10.0.0.9")[1] is not None  # holds the slot
    places = [queue.ask(f"tab{n}", 60.0, f"2001:db8:5:6::{n + 1:x}")[0] for n in range(15)]
    assert [p.place for p in places[:4]] == [1, 2, 3, 4]
    assert all((p.full, p.why) == (True, ADDRESS) for p in places[4:])
    assert queue.waiting() == 4


def test_the_full_line_and_a_running_training_say_why(clock):
    queue = TrainingQueue(1, 1, clock)
    assert queue.ask("a", 60.0)[1] is not None
    assert queue.ask("a", 60.0)[0].why == RUNNING
    assert queue.ask("b", 60.0, "10.0.0.2")[0].place == 1
    assert queue.ask("c", 60.0, "10.0.0.3")[0].why == FULL
