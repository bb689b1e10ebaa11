"""Back into the class after a reload (tinygpt_hosting.classroom.resume), on both stores: the way
back is bound to the browser's token, never holds the secret in the clear, can be revoked and
ends with the class; a student's seat is the browser's."""

from __future__ import annotations

import pytest

from tests.tinygpt_hosting.classroom.test_rules import (  # noqa: F401 - pytest fixtures
    Clock,
    open_store,
    redis_url,
    spec,
)
from tinygpt_hosting.classroom import resume
from tinygpt_hosting.classroom.rules import Classroom, Limits

TOKEN = "wxUnUZhDikmO4hDyStn4FWhLbS0yBMiEeXdtwBsB2iI"
OTHER = "Q" * 43


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def room(spec, clock):  # noqa: F811 - the fixture above
    return Classroom(open_store(spec), Limits(max_students=3), clock=clock)


def teaching(room, token=TOKEN):
    new = room.create_class()
    resume.keep_teacher(room, new.code, new.secret, token)
    return new


def test_a_teacher_resumes_from_the_same_browser(room):
    new = teaching(room)
    assert resume.teacher_for_browser(room, TOKEN) == (new.code, new.secret)


def test_a_token_from_another_browser_does_not_resume(room):
    teaching(room)
    assert resume.teacher_for_browser(room, OTHER) is None
    assert resume.student_for_browser(room, OTHER) is None


def test_the_store_never_holds_the_secret_or_the_token(room):
    new = teaching(room)
    key = resume.browser_key(resume.TEACHER, TOKEN)
    code, sealed = room.store.resume_of(key, room.clock())
    assert code == new.code
    assert new.secret not in sealed and TOKEN not in sealed and TOKEN not in key
    assert resume.unseal(sealed, new.code, TOKEN) == new.secret
    assert resume.unseal(sealed, new.code, OTHER) != new.secret


def test_a_sealed_secret_moved_to_another_browsers_key_is_refused(room):
    """Someone who can write the store still needs the browser's token to unseal it."""
    new = teaching(room)
    sealed = room.store.resume_of(resume.browser_key(resume.TEACHER, TOKEN), room.clock())[1]
    room.store.keep_resume(resume.browser_key(resume.TEACHER, OTHER), new.code, sealed,
                           room.clock(), 10)
    assert resume.teacher_for_browser(room, OTHER) is None


def test_revoked(room):
    teaching(room)
    resume.forget(room, resume.TEACHER, TOKEN)
    assert resume.teacher_for_browser(room, TOKEN) is None


def test_revoked_when_the_class_ends(room):
    new = teaching(room)
    room.close_class(new.code, new.secret)
    assert resume.teacher_for_browser(room, TOKEN) is None
    assert room.store.resume_of(resume.browser_key(resume.TEACHER, TOKEN), room.clock()) is None


def test_gone_when_the_class_expires(room, clock):
    teaching(room)
    clock.advance(room.limits.ttl_seconds + 1)
    assert resume.teacher_for_browser(room, TOKEN) is None
    room.create_class()  # purges the expired class, and its ways back with it
    assert room.store.resume_of(resume.browser_key(resume.TEACHER, TOKEN), room.clock()) is None


def test_a_newer_class_replaces_the_browsers_way_back(room):
    teaching(room)
    newer = teaching(room)
    assert resume.teacher_for_browser(room, TOKEN) == (newer.code, newer.secret)


def test_a_student_comes_back_to_the_same_seat(room):
    new = room.create_class()
    seat = room.join(new.code, "ana", browser=TOKEN)
    assert room.join(new.code, "ana", browser=TOKEN) == seat  # the browser's own seat
    resume.keep_student(room, new.code, TOKEN)
    assert resume.student_for_browser(room, TOKEN) == (new.code, seat)
    assert resume.student_for_browser(room, OTHER) is None
    assert resume.teacher_for_browser(room, TOKEN) is None  # a seat is not a teacher's way


def test_a_student_whose_seat_went_to_someone_else_is_not_offered_it(room, clock):
    new = room.create_class()
    seat = room.join(new.code, browser=TOKEN)
    resume.keep_student(room, new.code, TOKEN)
    clock.advance(room.limits.connected_seconds + 1)  # gone quiet; the class fills up
    for i in range(3):
        room.join(new.code, f"s{i}")
    assert seat  # given away to the third newcomer
    assert resume.student_for_browser(room, TOKEN) is None


def test_the_ways_back_of_a_class_are_bounded(room):
    new = room.create_class()
    most = resume.RESUMES_PER_STUDENT_SEAT * room.limits.max_students + 1
    tokens = [f"{i:043d}" for i in range(most + 5)]
    for token in tokens:
        resume.keep_student(room, new.code, token)
    kept = [t for t in tokens
            if room.store.resume_of(resume.browser_key(resume.STUDENT, t), room.clock())]
    assert len(kept) == most


def test_the_teachers_way_back_survives_400_joins(room, clock):
    """Issue 45: the ways back were capped per class by age, the teacher's included: after
    308 joins the teacher's browser no longer got "Resume class". Joins push out only the
    oldest students' ways back (a student who joins again from the same browser gets the
    same seat); the teacher's stays until the class ends or the browser is forgotten."""
    new = teaching(room)
    most = resume.RESUMES_PER_STUDENT_SEAT * room.limits.max_students + 1
    tokens = [f"{i:043d}" for i in range(400)]
    for token in tokens:
        clock.advance(0.5)
        resume.keep_student(room, new.code, token)
    assert resume.teacher_for_browser(room, TOKEN) == (new.code, new.secret)
    kept = [t for t in tokens
            if room.store.resume_of(resume.browser_key(resume.STUDENT, t), room.clock())]
    assert kept == tokens[-most:]  # the students' ways back: bounded, the newest kept
    resume.keep_teacher(room, new.code, new.secret, TOKEN)  # a reload keeps one row, not two
    resume.forget(room, resume.TEACHER, TOKEN)
    assert resume.teacher_for_browser(room, TOKEN) is None


@pytest.mark.parametrize("sealed", ["zz", "not hex", "ff" * 43])
def test_what_is_not_a_sealed_secret_does_not_unseal(sealed):
    assert resume.unseal(sealed, "ABCDEF", TOKEN) is None
