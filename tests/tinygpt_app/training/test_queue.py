"""tinygpt_app.training.queue: trainings take turns, first come first served, one per student;
whoever finishes and starts again goes behind those who wait; places of closed tabs expire."""

from __future__ import annotations

import pytest

from tinygpt_app.training.queue import STALE, TrainingQueue


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
