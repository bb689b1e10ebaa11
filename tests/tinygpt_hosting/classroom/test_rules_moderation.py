# ruff: noqa: F811 - the fixtures imported from test_rules are parameters of the tests
"""The class no prankster can take over (issue 26), on both stores: a seat is a browser, seats
per address are capped, the teacher locks, removes and hides names, and starting a class is
earned (teacher key, rate per address, one class per teacher browser, left classes freed)."""

from __future__ import annotations

import pytest

from tests.tinygpt_hosting.classroom.test_rules import (  # noqa: F401 - fixtures used by name
    clock,
    make,
    open_store,
    payload_bytes,
    reason,
    redis_url,
    spec,
)
from tinygpt_hosting.classroom.rules import ClassError, Classroom, Limits

PHONE, LAPTOP, SCRIPT = "p" * 43, "l" * 43, "s" * 43


def browser(n: int) -> str:
    return f"{n:043d}"


# a seat is a browser


def test_a_reload_from_the_same_browser_keeps_its_seat_and_its_answer(make):
    room = make()
    new = room.create_class()
    first = room.join(new.code, "ada", browser=PHONE, address="10.0.0.2")
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="To be")
    room.submit_guess(new.code, first, number, " or")
    again = room.join(new.code, "ada", browser=PHONE, address="10.0.0.2")  # a new session
    assert again == first
    assert room.poll(new.code, again).answered
    assert reason(room.submit_guess, new.code, again, number, " not") == "answered"
    assert room.teacher_view(new.code, new.secret).students == 1
    assert room.student_for_browser(new.code, PHONE) == first
    assert room.student_for_browser(new.code, LAPTOP) is None


def test_leave_and_join_cannot_stuff_a_round(make):
    """Forty Leave -> Join -> guess from one browser count once."""
    room = make()
    new = room.create_class()
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="To be")
    for _ in range(40):
        student = room.join(new.code, browser=SCRIPT, address="10.0.0.9")
        try:
            room.submit_guess(new.code, student, number, "prank")
        except Exception:  # noqa: BLE001 - "answered" after the first
            pass
    room.reveal(new.code, new.secret, number)
    assert room.round_result(new.code, number, secret=new.secret).guesses == (("prank", 1),)


def test_one_seat_too_many_from_an_address_is_refused(make):
    room = make(seats_per_address=3)
    new = room.create_class()
    for n in range(3):
        room.join(new.code, browser=browser(n), address="10.0.0.5")
    assert reason(room.join, new.code, browser=browser(9), address="10.0.0.5") == "address_full"
    assert reason(room.join, new.code, address="10.0.0.5") == "address_full"  # no token either
    room.join(new.code, browser=browser(9), address="10.0.0.6")  # another phone: welcome
    room.join(new.code, browser=browser(0), address="10.0.0.5")  # a seated browser comes back


def test_one_ipv6_64_holds_four_seats_however_many_addresses_it_uses(make):
    """Issue 45: one /64 took 308 seats from 77 addresses, 4 per address. A home or a phone
    picks any address of its /64: the seats are counted per /64 (the session door's key)."""
    room = make(seats_per_address=4)
    new = room.create_class()
    seated = refused = 0
    for n in range(40):
        try:
            room.join(new.code, browser=browser(n), address=f"2001:db8:1:2::{n + 1:x}")
            seated += 1
        except ClassError as err:
            assert err.reason == "address_full"
            refused += 1
    assert (seated, refused) == (4, 36)
    room.join(new.code, browser=browser(99), address="2001:db8:1:3::1")  # the next /64: welcome


def test_a_stale_seat_of_the_address_makes_room(make, clock):
    room = make(seats_per_address=2)
    new = room.create_class()
    room.join(new.code, browser=browser(1), address="10.0.0.5")
    clock.advance(60)
    room.join(new.code, browser=browser(2), address="10.0.0.5")
    room.join(new.code, browser=browser(3), address="10.0.0.5")  # browser 1 went silent: its seat
    assert room.student_for_browser(new.code, browser(1)) is None
    assert room.teacher_view(new.code, new.secret).students == 2


def test_a_bad_browser_token_counts_as_none(make):
    room = make()
    new = room.create_class()
    one = room.join(new.code, browser="<script>")
    two = room.join(new.code, browser="<script>")
    assert one != two  # not one browser: no token at all
    assert room.student_for_browser(new.code, "<script>") is None


# the teacher moderates


def test_a_locked_class_refuses_joins_but_keeps_its_students(make):
    room = make()
    new = room.create_class()
    seated = room.join(new.code, browser=PHONE)
    room.lock(new.code, new.secret)
    assert reason(room.join, new.code, browser=LAPTOP) == "locked"
    assert room.join(new.code, browser=PHONE) == seated  # a reload is no newcomer
    assert room.teacher_view(new.code, new.secret).locked
    room.lock(new.code, new.secret, False)
    room.join(new.code, browser=LAPTOP)
    assert reason(room.lock, new.code, "x" * 43) == "wrong_secret"


def test_a_removed_browser_cannot_rejoin_and_its_guess_is_gone(make):
    room = make()
    new = room.create_class()
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="To be")
    prankster = room.join(new.code, "lol", browser=SCRIPT)
    honest = room.join(new.code, "ada", browser=PHONE)
    room.submit_guess(new.code, prankster, number, "prank")
    room.submit_guess(new.code, honest, number, " or")
    seats = {seat.nickname: seat.student for seat in room.seats(new.code, new.secret)}
    assert set(seats) == {"lol", "ada"}
    room.remove_student(new.code, new.secret, seats["lol"])
    assert reason(room.join, new.code, "again", browser=SCRIPT) == "removed"
    assert reason(room.poll, new.code, prankster) == "not_member"
    room.reveal(new.code, new.secret, number)
    assert room.round_result(new.code, number, secret=new.secret).guesses == ((" or", 1),)
    assert reason(room.remove_student, new.code, new.secret, prankster) == "not_member"


def test_each_removal_costs_its_address_a_seat_for_the_rest_of_the_class(make):
    """Issue 45: a removed student who cleared their storage (a new token), or one with no
    token at all, joined again at once from the same address. Now each removal takes one seat
    from that address's cap for the rest of the class; the lock stays the strong tool."""
    room = make(seats_per_address=2)
    new = room.create_class()
    first = room.join(new.code, "lol", browser=browser(1), address="10.0.0.5")
    room.remove_student(new.code, new.secret, first)
    again = room.join(new.code, "lol2", browser=browser(2), address="10.0.0.5")  # storage cleared
    assert reason(room.join, new.code, address="10.0.0.5") == "address_removed"  # no token
    room.remove_student(new.code, new.secret, again)
    assert reason(room.join, new.code, browser=browser(3), address="10.0.0.5") == \
        "address_removed"
    assert reason(room.join, new.code, browser=browser(4),
                  address="10.0.0.5") == "address_removed"  # and so it stays
    room.join(new.code, "ada", browser=PHONE, address="10.0.0.6")  # another address: welcome
    room.join(new.code, "bob", browser=LAPTOP, address="10.0.0.6")


def test_the_removed_browsers_of_a_class_are_bounded(make):
    """Join -> removed -> a new browser joins -> removed ...: the class keeps at most
    max_removed browsers out; the next removal is refused (the teacher is told to lock) and
    that seat stays, while the ones removed stay out."""
    room = make(max_removed=3, seats_per_address=100)
    new = room.create_class()
    for n in range(3):
        room.remove_student(new.code, new.secret, room.join(new.code, browser=browser(n)))
    fourth = room.join(new.code, "lol", browser=browser(3))
    assert reason(room.remove_student, new.code, new.secret, fourth) == "removed_full"
    assert room.poll(new.code, fourth) is not None  # still seated
    assert all(reason(room.join, new.code, browser=browser(n)) == "removed" for n in range(3))
    room.lock(new.code, new.secret)  # the defence the message names
    assert reason(room.join, new.code, browser=browser(4)) == "locked"
    assert payload_bytes(Limits(max_removed=3)) < payload_bytes(Limits(max_removed=300))


def test_hidden_names_leave_the_teachers_view(make):
    room = make()
    new = room.create_class()
    room.poll(new.code, room.join(new.code, "rude name", browser=PHONE))
    assert room.teacher_view(new.code, new.secret).nicknames == ("rude name",)
    room.hide_names(new.code, new.secret)
    view = room.teacher_view(new.code, new.secret)
    assert view.nicknames == () and view.names_hidden and view.connected == 1
    room.hide_names(new.code, new.secret, False)
    assert room.teacher_view(new.code, new.secret).nicknames == ("rude name",)


def test_an_ended_class_frees_its_slot_now(make):
    room = make(max_classes=1)
    new = room.create_class()
    assert reason(room.create_class) == "server_full"
    room.close_class(new.code, new.secret)
    room.create_class()


# starting a class is earned


def test_the_teacher_key_is_needed_when_the_server_has_one(spec, clock):
    room = Classroom(open_store(spec), Limits(), clock, teacher_key="correct horse")
    assert room.needs_teacher_key
    assert reason(room.create_class) == "teacher_key"
    assert reason(room.create_class, "wrong") == "teacher_key"
    assert reason(room.create_class, "x" * 10_000) == "teacher_key"
    room.create_class("correct horse")
    assert not Classroom(open_store(spec), Limits(), clock).needs_teacher_key


def test_class_creation_is_rate_limited_per_address(make, clock):
    room = make(classes_per_address=3, creation_window_seconds=600)
    for _ in range(3):
        room.create_class(address="10.0.0.66")
    assert reason(room.create_class, address="10.0.0.66") == "too_many_classes"
    room.create_class(address="10.0.0.7")  # a real teacher elsewhere is not held up
    clock.advance(601)
    room.create_class(address="10.0.0.66")


def test_class_starts_are_counted_per_ipv6_64(make):
    room = make(classes_per_address=3, creation_window_seconds=600)
    for n in range(3):
        room.create_class(address=f"2001:db8::{n + 1}")
    assert reason(room.create_class, address="2001:db8::ffff:9") == "too_many_classes"


def test_a_teacher_browser_leads_one_class(make):
    room = make(max_classes=2)
    first = room.create_class(browser=LAPTOP)
    second = room.create_class(browser=LAPTOP)
    assert reason(room.teacher_view, first.code, first.secret) == "no_class"
    room.teacher_view(second.code, second.secret)
    room.create_class(browser=PHONE)
    assert reason(room.create_class) == "server_full"  # two browsers, two classes


def test_a_class_left_by_everyone_frees_its_slot_within_minutes(make, clock):
    room = make(max_classes=2, left_seconds=300)
    left = room.create_class()
    followed = room.create_class()
    student = room.join(followed.code, browser=PHONE)
    clock.advance(200)
    assert reason(room.create_class) == "server_full"  # not yet
    clock.advance(150)
    room.poll(followed.code, student)  # a class its students follow stays
    room.create_class()  # the slot of the class nobody was in
    assert reason(room.teacher_view, left.code, left.secret) == "no_class"
    room.teacher_view(followed.code, followed.secret)


def test_limits_of_the_new_rules_from_the_environment():
    limits = Limits.from_env({"TINYGPT_SEATS_PER_ADDRESS": "60",
                              "TINYGPT_CLASSES_PER_ADDRESS": "2"})
    assert (limits.seats_per_address, limits.classes_per_address) == (60, 2)
    assert Limits().seats_per_address == 4
    with pytest.raises(ValueError):
        Limits(seats_per_address=0)
