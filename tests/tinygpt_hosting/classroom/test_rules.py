"""The live class (tinygpt_hosting.classroom.rules): one suite, run on both stores.

SQLite runs in a temporary directory; Redis is a real redis-server (Debian's package) started on
a free loopback port for this module and stopped at its end. A clock the tests move stands in
for time, so expiry and "connected" are exact; the concurrency tests use real processes and the
real clock.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import shutil
import socket
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tinygpt_app import settings
from tinygpt_hosting.classroom.rules import (
    CODE_ALPHABET,
    MAX_BROWSER_KEY,
    MAX_STUDENT_ID,
    ClassError,
    Classroom,
    Limits,
    Pulse,
    open_classroom,
)
from tinygpt_hosting.classroom.store import StoreStats
from tinygpt_hosting.classroom.store_sqlite import SqliteClassStore
from tinygpt_hosting.classroom.stores import open_class_store

REDIS_SERVER = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin")


def payload_bytes(limits: Limits) -> int:
    """The most text a full store can hold under these limits: every class full, every round
    full, every text at its cap (4 bytes per character at worst). Backend overhead comes on
    top."""
    seat = MAX_STUDENT_ID + 4 * limits.max_nickname_chars
    answer = MAX_STUDENT_ID + 4 * limits.max_guess_chars
    per_round = limits.max_state_bytes + limits.max_students * answer
    per_class = (limits.max_state_bytes + limits.max_students * seat
                 + limits.max_rounds * per_round + limits.max_removed * MAX_BROWSER_KEY)
    return limits.max_classes * per_class


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A redis-server of our own on loopback, without persistence; stopped after the module."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    import redis

    port = free_port()
    server = subprocess.Popen(
        [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path_factory.mktemp("redis"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_timeout=1)
        deadline = time.monotonic() + 15
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(params=["sqlite", "redis"])
def spec(request, tmp_path):
    """Where the store lives, as something a child process can open: (kind, place)."""
    if request.param == "sqlite":
        return ("sqlite", str(tmp_path / "classes.sqlite3"))
    import redis

    url = request.getfixturevalue("redis_url")
    redis.Redis.from_url(url).flushdb()
    return ("redis", url)


def open_store(spec):
    kind, place = spec
    if kind == "sqlite":
        return SqliteClassStore(Path(place))
    from tinygpt_hosting.classroom.store_redis import RedisClassStore

    return RedisClassStore(place)


class Clock:
    """Seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def make(spec, clock):
    """make(**limits) -> a Classroom on this test's store, with these limits and the clock."""
    return lambda **limits: Classroom(open_store(spec), Limits(**limits), clock)


@pytest.fixture
def room(make):
    return make()


def reason(call, *args, **kwargs) -> str:
    with pytest.raises(ClassError) as caught:
        call(*args, **kwargs)
    return caught.value.reason


def stored_text(spec) -> str:
    """Everything the store keeps, as one text (to look for what must not be there)."""
    kind, place = spec
    if kind == "sqlite":
        with sqlite3.connect(place) as db:
            return "\n".join(db.iterdump())
    import redis

    client = redis.Redis.from_url(place, decode_responses=True)
    parts = []
    for key in client.scan_iter("*"):
        kind = client.type(key)
        value = {"hash": client.hgetall, "zset": lambda k: client.zrange(k, 0, -1),
                 "string": client.get, "set": client.smembers}[kind](key)
        parts.append(f"{key} {value}")
    return "\n".join(parts)


# creating, joining, following


def test_create_join_and_follow_the_teachers_versions(room):
    new = room.create_class()
    assert len(new.code) == 6 and set(new.code) <= set(CODE_ALPHABET)
    assert len(new.secret) >= 40
    typed = f" {new.code[:3].lower()}-{new.code[3:].lower()} "  # as a student might type it
    student = room.join(typed, "Ana")
    first = room.poll(new.code, student)
    assert first.state is None and first.round is None and not first.answered

    assert room.publish(new.code, new.secret, page="attention", prompt="The cat",
                        position=1, controls={"layer": 0, "head": 2, "temp": 0.7}) == 1
    assert room.publish(new.code, new.secret, page="output", prompt="The cat sat",
                        position=2, controls={"top_p": 0.9, "greedy": True, "note": None}) == 2
    state = room.poll(new.code, student).state
    assert state.version == 2
    assert (state.page, state.prompt, state.position) == ("output", "The cat sat", 2)
    assert state.controls == {"top_p": 0.9, "greedy": True, "note": None}
    assert room.teacher_view(new.code, new.secret).state == state


def test_the_pulse_says_what_changed_and_marks_no_one_seen(room, clock):
    new = room.create_class()
    student = room.join(new.code)
    assert room.pulse(new.code) == Pulse(0, 0, False)
    room.publish(new.code, new.secret, page="home", prompt="hi")
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="hi")
    assert room.pulse(new.code.lower()) == Pulse(1, number, False, "home")
    room.reveal(new.code, new.secret, number)
    assert room.pulse(new.code) == Pulse(1, number, True, "home")
    clock.advance(room.limits.connected_seconds + 1)
    room.pulse(new.code)
    assert room.teacher_view(new.code, new.secret).connected == 0  # a pulse is not a heartbeat
    room.poll(new.code, student)
    assert room.teacher_view(new.code, new.secret).connected == 1
    assert reason(room.pulse, "ZZZZZZ") == "no_class"


def test_a_peek_sees_what_a_poll_sees_and_marks_no_one_seen(room, clock):
    new = room.create_class()
    student = room.join(new.code)
    room.publish(new.code, new.secret, page="Logits", prompt="To be")
    room.open_round(new.code, new.secret, kind="next_token", prompt="To be")
    room.submit_guess(new.code, student, 1, " or")
    clock.advance(room.limits.connected_seconds + 1)
    assert room.peek(new.code, student) == room.poll(new.code, student, following=False)
    clock.advance(room.limits.connected_seconds + 1)
    room.peek(new.code, student)
    assert room.teacher_view(new.code, new.secret).connected == 0
    assert reason(room.peek, new.code, "someone-else-entirely") == "not_member"
    assert reason(room.peek, "ZZZZZZ", student) == "no_class"


def test_a_class_is_created_on_first_use_in_the_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("TINYGPT_CLASS_STORE", raising=False)
    room = open_classroom()
    assert isinstance(room.store, SqliteClassStore)
    room.join(room.create_class().code)
    db = tmp_path / "data" / "classes.sqlite3"
    assert db.is_file()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_store_is_chosen_by_its_url(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_CLASS_STORE", "redis://127.0.0.1:1/0")
    assert type(open_class_store()).__name__ == "RedisClassStore"
    assert isinstance(open_class_store(""), SqliteClassStore)
    with pytest.raises(ValueError) as caught:
        open_class_store("postgres://user:hunter2@db/x")
    assert "hunter2" not in str(caught.value)


def test_limits_from_the_environment():
    limits = Limits.from_env({"TINYGPT_CLASS_TTL_HOURS": "1.5", "TINYGPT_MAX_CLASSES": "7",
                              "TINYGPT_MAX_STUDENTS": "40"})
    assert (limits.ttl_seconds, limits.max_classes, limits.max_students) == (5400.0, 7, 40)
    assert Limits.from_env({}) == Limits()



def test_a_bad_limit_is_logged_and_its_default_kept(caplog, monkeypatch):
    """One settings policy (tinygpt_app.settings): a typo never raises, it is logged once."""
    monkeypatch.setattr(settings, "_warned", set())  # what earlier tests logged
    for bad in ({"TINYGPT_MAX_CLASSES": "many"}, {"TINYGPT_MAX_STUDENTS": "0"},
                {"TINYGPT_CLASS_TTL_HOURS": "-1"}):
        (name, value), = bad.items()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
            assert Limits.from_env(bad) == Limits()
            assert Limits.from_env(bad) == Limits()
        assert caplog.text.count(f"{name}={value!r}") == 1


# heartbeats


def test_heartbeats_count_connected_and_following_students(room, clock):
    new = room.create_class()
    ana, ben, cy = (room.join(new.code, nick) for nick in ("Ana", "Ben", ""))
    room.poll(new.code, ana, following=True)
    room.poll(new.code, ben, following=False)  # exploring on their own
    room.poll(new.code, cy, following=True)
    view = room.teacher_view(new.code, new.secret)
    assert (view.students, view.connected, view.following) == (3, 3, 2)
    assert view.nicknames == ("Ana", "Ben")

    step = room.limits.connected_seconds * 2 / 3
    clock.advance(step)
    room.poll(new.code, ana, following=True)
    room.poll(new.code, ben, following=True)  # "follow again"
    clock.advance(step)  # cy has now been silent for 4/3 of the connected window
    view = room.teacher_view(new.code, new.secret)
    assert (view.students, view.connected, view.following) == (3, 2, 2)
    clock.advance(step)
    view = room.teacher_view(new.code, new.secret)
    assert (view.connected, view.following, view.nicknames) == (0, 0, ())


# rounds


def test_one_guess_per_student_per_round(room):
    new = room.create_class()
    student = room.join(new.code)
    first = room.open_round(new.code, new.secret, kind="next_token", prompt="The cat")
    room.submit_guess(new.code, student, first, " sat")
    assert reason(room.submit_guess, new.code, student, first, " ran") == "answered"
    assert room.poll(new.code, student).answered
    assert room.teacher_view(new.code, new.secret).rounds[0].answers == 1

    second = room.open_round(new.code, new.secret, kind="attention", prompt="The cat sat",
                             position=2, details={"layer": 1, "head": 0})
    assert second == first + 1
    view = room.poll(new.code, student)
    assert view.round.number == second and not view.answered
    assert view.round.question.details == {"layer": 1, "head": 0}
    assert reason(room.submit_guess, new.code, student, first, "late") == "round_closed"
    for number in (0, second + 1, -1):
        assert reason(room.submit_guess, new.code, student, number, "x") == "no_round"
    room.reveal(new.code, new.secret, second)
    assert reason(room.submit_guess, new.code, student, second, " cat") == "round_closed"
    assert room.teacher_view(new.code, new.secret).rounds[1].answers == 0


def test_reveal_shows_counts_per_guess_and_no_student_ids(room):
    new = room.create_class()
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="Once upon a")
    guesses = [" time", " time", " hill", " time", " hill", " dragon", "\n"]
    students = [room.join(new.code) for _ in guesses]
    for student, guess in zip(students, guesses, strict=True):
        room.submit_guess(new.code, student, number, guess)

    assert room.teacher_view(new.code, new.secret).rounds[0].answers == len(guesses)
    assert reason(room.round_result, new.code, number, student_id=students[0]) == "not_revealed"
    assert reason(room.round_result, new.code, number, secret=new.secret) == "not_revealed"
    result = room.reveal(new.code, new.secret, number)
    assert result.guesses == ((" time", 3), (" hill", 2), ("\n", 1), (" dragon", 1))
    assert result.answers == len(guesses) and result.question.prompt == "Once upon a"
    assert room.round_result(new.code, number, student_id=students[-1]) == result
    assert room.round_result(new.code, number, secret=new.secret) == result
    assert not any(student in repr(result) for student in students)
    assert room.poll(new.code, students[0]).round.revealed


def test_rounds_are_kept_so_the_teacher_can_go_back(room):
    new = room.create_class()
    student = room.join(new.code)
    for prompt in ("A", "B", "C"):
        number = room.open_round(new.code, new.secret, kind="next_token", prompt=prompt)
        room.submit_guess(new.code, student, number, prompt.lower())
    room.reveal(new.code, new.secret, 1)  # back to the first question
    rounds = room.teacher_view(new.code, new.secret).rounds
    assert [(r.number, r.question.prompt, r.revealed, r.answers) for r in rounds] == \
        [(1, "A", True, 1), (2, "B", False, 1), (3, "C", False, 1)]
    assert room.round_result(new.code, 1, student_id=student).guesses == (("a", 1),)
    assert reason(room.round_result, new.code, 2, student_id=student) == "not_revealed"
    assert reason(room.reveal, new.code, new.secret, 4) == "no_round"


# expiry


def test_a_class_expires_after_its_teacher_is_inactive(make, clock):
    room = make(ttl_seconds=60, max_classes=1)
    new = room.create_class()
    student = room.join(new.code)
    clock.advance(50)
    room.poll(new.code, student)  # students do not keep a class alive...
    room.publish(new.code, new.secret, page="home", prompt="hi")  # ...its teacher does
    clock.advance(50)
    room.poll(new.code, student)
    assert room.stats().classes == 1
    clock.advance(11)
    assert reason(room.poll, new.code, student) == "no_class"
    assert reason(room.join, new.code) == "no_class"
    assert reason(room.teacher_view, new.code, new.secret) == "no_class"
    assert room.stats() == StoreStats(0, 0, 0, 0, room.stats().bytes)  # deleted, not only hidden
    room.create_class()  # its place is free again


def test_closing_a_class_deletes_it(room):
    new = room.create_class()
    student = room.join(new.code, "Ana")
    room.open_round(new.code, new.secret, kind="next_token", prompt="x")
    room.close_class(new.code, new.secret)
    assert reason(room.poll, new.code, student) == "no_class"
    stats = room.stats()
    assert (stats.classes, stats.students, stats.rounds, stats.guesses) == (0, 0, 0, 0)


# caps


def test_at_most_max_classes(make):
    room = make(max_classes=2)
    room.create_class()
    room.create_class()
    with pytest.raises(ClassError) as caught:
        room.create_class()
    assert caught.value.reason == "server_full" and "2 classes" in str(caught.value)


def test_at_most_max_students_and_a_silent_seat_is_given_away(make, clock):
    room = make(max_students=2)
    new = room.create_class()
    ana, ben = room.join(new.code), room.join(new.code)
    with pytest.raises(ClassError) as caught:
        room.join(new.code)
    assert caught.value.reason == "class_full" and "2 students" in str(caught.value)
    clock.advance(room.limits.connected_seconds + 5)
    room.poll(new.code, ana)
    cy = room.join(new.code)  # ben was silent longer than the connected window: cy gets his seat
    assert reason(room.poll, new.code, ben) == "not_member"
    assert reason(room.join, new.code, student_id=ben) == "class_full"
    assert room.teacher_view(new.code, new.secret).students == 2
    room.poll(new.code, cy)


def test_a_round_takes_at_most_max_students_answers(make, clock):
    room = make(max_students=2)
    new = room.create_class()
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="x")
    ana, ben = room.join(new.code), room.join(new.code)
    room.submit_guess(new.code, ana, number, "a")
    room.submit_guess(new.code, ben, number, "b")
    clock.advance(room.limits.connected_seconds + 5)
    room.poll(new.code, ana)
    cy = room.join(new.code)  # takes ben's seat, but the round is full
    assert reason(room.submit_guess, new.code, cy, number, "c") == "round_full"


def test_at_most_max_rounds(make):
    room = make(max_rounds=2)
    new = room.create_class()
    for _ in range(2):
        room.open_round(new.code, new.secret, kind="next_token", prompt="x")
    with pytest.raises(ClassError) as caught:
        room.open_round(new.code, new.secret, kind="next_token", prompt="x")
    assert caught.value.reason == "too_many_rounds" and "2 questions" in str(caught.value)


def test_texts_are_capped(make):
    room = make(max_nickname_chars=5, max_guess_chars=4, max_prompt_chars=10, max_controls=2,
                max_state_bytes=200)
    new = room.create_class()
    assert reason(room.join, new.code, "x" * 6) == "bad_input"
    student = room.join(new.code, " \u202eAna\u0007  B ")  # bidi override and bell dropped
    assert room.teacher_view(new.code, new.secret).nicknames == ("Ana B",)
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="0123456789")
    for guess in ("12345", "", 5, "a\x00"):
        assert reason(room.submit_guess, new.code, student, number, guess) == "bad_input"
    room.submit_guess(new.code, student, number, "😀😀😀😀")

    def publish(**view):
        return room.publish(new.code, new.secret, **({"page": "p", "prompt": "x"} | view))

    for view in ({"prompt": "x" * 11}, {"page": "p" * 65}, {"position": -1}, {"position": 1.5},
                 {"controls": {"a": 1, "b": 2, "c": 3}}, {"controls": {"a": {"nested": 1}}},
                 {"controls": {"a": float("nan")}}, {"controls": {"bad name": 1}},
                 {"controls": {"a": "y" * 201}}, {"controls": {"a": "é" * 100}}):
        assert reason(publish, **view) == "bad_input", view
    assert reason(room.open_round, new.code, new.secret, kind="essay", prompt="x") == "bad_input"
    assert room.poll(new.code, student).state is None  # nothing refused was kept


# who may do what


def test_a_student_cannot_act_as_the_teacher(room):
    new, other = room.create_class(), room.create_class()
    student = room.join(new.code)
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="x")
    room.submit_guess(new.code, student, number, "y")
    # the secret with its last character changed (1 time in 64 it already ends in "A")
    one_off = new.secret[:-1] + ("B" if new.secret.endswith("A") else "A")
    for wrong in (student, other.secret, one_off, "", None, 12345,
                  hashlib.sha256(new.secret.encode()).hexdigest()):
        assert reason(room.publish, new.code, wrong, page="p", prompt="x") == "wrong_secret"
        assert reason(room.open_round, new.code, wrong, kind="next_token",
                      prompt="x") == "wrong_secret"
        assert reason(room.reveal, new.code, wrong, number) == "wrong_secret"
        assert reason(room.teacher_view, new.code, wrong) == "wrong_secret"
        as_teacher = "not_member" if wrong is None else "wrong_secret"  # no secret: a student
        assert reason(room.round_result, new.code, number, secret=wrong) == as_teacher
        assert reason(room.close_class, new.code, wrong) == "wrong_secret"
    view = room.poll(new.code, student)
    assert view.state is None and view.round.number == 1 and not view.round.revealed


def test_a_student_cannot_read_or_write_another_class(room):
    mine, theirs = room.create_class(), room.create_class()
    student = room.join(mine.code)
    number = room.open_round(theirs.code, theirs.secret, kind="next_token", prompt="x")
    room.reveal(theirs.code, theirs.secret, number)
    assert reason(room.poll, theirs.code, student) == "not_member"
    assert reason(room.submit_guess, theirs.code, student, number, "y") == "not_member"
    assert reason(room.round_result, theirs.code, number, student_id=student) == "not_member"
    for forged in ("", "x", "a" * 65, "../../etc/passwd", None, "A" * 22):
        assert reason(room.poll, mine.code, forged) == "not_member"
    for code in ("", "ABC", "ABCDEFG", "IIIIII", "<b>xx</b>", None, 7):
        assert reason(room.join, code) == "bad_code"
    assert reason(room.join, "ZZZZZZ") == "no_class"


def test_only_a_hash_of_the_secret_and_no_personal_data_are_kept(room, spec):
    new = room.create_class()
    student = room.join(new.code, "Ana <b>")
    room.publish(new.code, new.secret, page="p", prompt="<script>alert(1)</script>")
    kept = stored_text(spec)
    assert new.secret not in kept
    assert hashlib.sha256(new.secret.encode()).hexdigest() in kept
    assert "Ana <b>" in kept and student in kept  # kept as typed: the app renders plain text
    assert room.poll(new.code, student).state.prompt == "<script>alert(1)</script>"


def test_an_unreachable_store_is_a_plain_refusal(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    for place in (blocker / "classes.sqlite3", tmp_path):  # a file in the way; a directory
        room = Classroom(SqliteClassStore(place))
        with pytest.raises(ClassError) as caught:
            room.create_class()
        assert caught.value.reason == "unavailable" and str(tmp_path) not in str(caught.value)
    from tinygpt_hosting.classroom.store_redis import RedisClassStore

    room = Classroom(RedisClassStore(f"redis://127.0.0.1:{free_port()}/0", timeout_s=1))
    assert reason(room.create_class) == "unavailable"


def test_stats_report_the_store_and_stay_under_the_bound(make):
    room = make(max_classes=2, max_students=3, max_rounds=3, max_guess_chars=8)
    empty = room.stats()
    for _ in range(2):
        new = room.create_class()
        students = [room.join(new.code, "n" * 24) for _ in range(3)]
        for _ in range(3):
            number = room.open_round(new.code, new.secret, kind="next_token", prompt="x" * 1000)
            for student in students:
                room.submit_guess(new.code, student, number, "é" * 8)
    stats = room.stats()
    assert (stats.classes, stats.students, stats.rounds, stats.guesses) == (2, 6, 6, 18)
    payload = 6 * 1000 + 18 * 16 + 6 * 24
    assert stats.bytes - empty.bytes >= payload
    assert stats.bytes <= 64 * 1024 + 2 * payload_bytes(room.limits)
    assert payload_bytes(Limits()) < 100 * 2**20  # the defaults' worst case


# several processes at once


def _guessing_process(spec, code, number, students, index, barrier, results):
    """Every process answers for every student, each in its own order: all at once, each
    student's answer arrives 4 times from 4 processes, and must count once."""
    room = Classroom(open_store(spec))
    order = students[index:] + students[:index]
    barrier.wait(timeout=60)
    outcome = Counter()
    for student in order:
        try:
            room.submit_guess(code, student, number, f"from {index}")
            outcome["counted"] += 1
        except ClassError as error:
            outcome[error.reason] += 1
    results.put(dict(outcome))


def _joining_process(spec, code, joins, index, barrier, results):
    room = Classroom(open_store(spec), Limits(max_students=25))
    barrier.wait(timeout=60)
    outcome = Counter()
    for _ in range(joins):
        try:
            room.join(code)
            outcome["seated"] += 1
        except ClassError as error:
            outcome[error.reason] += 1
    results.put(dict(outcome))


def run_processes(target, args, processes: int) -> Counter:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=target, args=(*args, index, barrier, results))
               for index in range(processes)]
    for worker in workers:
        worker.start()
    total = Counter()
    try:
        for _ in workers:
            total.update(results.get(timeout=120))
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    assert all(worker.exitcode == 0 for worker in workers)
    return total


def test_concurrent_guesses_from_several_processes_count_once(spec):
    room = Classroom(open_store(spec))
    new = room.create_class()
    number = room.open_round(new.code, new.secret, kind="next_token", prompt="x")
    students = [room.join(new.code) for _ in range(20)]
    outcome = run_processes(_guessing_process, (spec, new.code, number, students), processes=4)
    assert outcome == {"counted": 20, "answered": 60}
    assert room.teacher_view(new.code, new.secret).rounds[0].answers == 20
    result = room.reveal(new.code, new.secret, number)
    assert sum(count for _, count in result.guesses) == 20
    assert {guess for guess, _ in result.guesses} <= {f"from {i}" for i in range(4)}


def test_concurrent_joins_from_several_processes_respect_the_seat_cap(spec):
    room = Classroom(open_store(spec), Limits(max_students=25))
    new = room.create_class()
    outcome = run_processes(_joining_process, (spec, new.code, 10), processes=4)
    assert outcome == {"seated": 25, "class_full": 15}
    assert room.teacher_view(new.code, new.secret).students == 25
