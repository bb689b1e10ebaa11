"""Where a live class is kept: the store interface, its errors, and the SQLite backend.

The sessions of one class may sit in several processes (deploy/run_cluster.sh) or on several
machines (deploy/k8s/), so a class lives outside any one process:

- SQLite, the default: one file in the data directory (`TINYGPT_DATA_DIR`, default `<repo>/runs`),
  WAL mode, shared by every process of one machine, created on first use; nothing to install
  (store_sqlite.py).
- Redis, for several machines: `TINYGPT_CLASS_STORE=redis://host:port/db` (store_redis.py).

Both backends have the same methods, the same refusals and the same semantics; one test suite runs
on both (tests/tinygpt_hosting/classroom/test_rules*.py). A store knows no secrets, limits or
clocks: `tinygpt_hosting.classroom.rules` validates every input, checks the teacher's secret, and
passes the
time
and the limits into each call. What a store guarantees is that each method is one atomic step
(SQLite: one BEGIN IMMEDIATE transaction; Redis: one Lua script), so the caps hold and every
guess counts once, however many processes write at the same moment.

What is kept, per class: the hash of the teacher secret, an expiry time, the published view state
(JSON), per student a random id, an optional nickname, when it was last seen and whether it
follows, and the browser token and client address it joined from (a seat is a browser: the same
browser gets the same seat back; seats per address are capped); the browsers the teacher removed;
whether the class is locked and its names hidden; per round the question (JSON), whether it is
revealed, and one guess per student. Per client address, when it started classes lately (the
rate limit). All of it is text typed by people: the app renders it as plain text, never as
markdown or HTML.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from tinygpt_app import settings

# reason -> the sentence a person sees; {numbers} are filled in by whoever refuses
MESSAGES = {
    "bad_code": "A class code is 6 letters or digits, as shown on the teacher's screen.",
    "no_class": "There is no class with this code (it may have ended). Check the code.",
    "wrong_secret": "This teacher link does not control this class.",
    "not_member": "You are not in this class any more (it ended, or your seat went to a newcomer "
                  "while you were away). Join again with the class code.",
    "server_full": "This server already runs {max_classes} classes, its limit. Try again later.",
    "class_full": "This class is full ({max_students} students).",
    "too_many_rounds": "This class has asked {max_rounds} questions, all it can keep. "
                       "Start a new class to ask more.",
    "no_round": "There is no such round in this class.",
    "round_closed": "This round no longer takes answers.",
    "round_full": "This round has all the answers it can take ({max_students}).",
    "answered": "You have already answered this round.",
    "not_revealed": "The answers of this round are not revealed yet.",
    "unavailable": "The class store cannot be reached right now. Try again in a moment.",
    "teacher_key": "Starting a class on this server needs the teacher key (ask whoever runs it).",
    "teacher_key_wait": "Too many wrong teacher keys from your network address: the next one "
                        "is checked in {seconds} s.",
    "too_many_classes": "Too many classes were started from your network address lately "
                        "({max_per_address}). Try again later.",
    "locked": "The teacher has locked this class: nobody new can join.",
    "removed": "The teacher removed this browser from the class.",
    "removed_full": "This class already keeps {max_removed} browsers out, the most it can. "
                    "Lock the class so that nobody new can join.",
    "address_full": "This class already has {max_per_address} seats from your network address, "
                    "its limit. Ask the teacher.",
    "address_removed": "The teacher removed students who joined from your network address: it "
                       "has fewer seats in this class, and they are taken. Ask the teacher.",
}


class ClassError(Exception):
    """A refusal to show to the person who asked.

    `str(error)` is a plain sentence (no paths, no internals); `reason` is a fixed key such as
    "no_class" or "answered" for code that reacts to it (the keys of MESSAGES, and "bad_input"
    for invalid input).
    """

    def __init__(self, reason: str, message: str | None = None, **numbers: int) -> None:
        super().__init__(message or MESSAGES[reason].format(**numbers))
        self.reason = reason


@dataclass(frozen=True)
class StoredRound:
    """One round as kept: its question (JSON written by the classroom) and how it stands."""

    number: int  # 1, 2, ... in the order the teacher asked
    question: str
    revealed: bool
    answers: int  # how many students answered
    answered: bool = False  # whether the student who asked has answered (in polls only)


@dataclass(frozen=True)
class StudentPoll:
    """What a following student needs each second: the teacher's view and the latest round."""

    version: int  # 0 until the teacher publishes; +1 at each publish
    state: str | None  # the published view state (JSON), None before the first publish
    round: StoredRound | None  # the latest round, None before the first


@dataclass(frozen=True)
class Pulse:
    """A class's news in three numbers, read without touching anything: the watcher of a
    process (tinygpt_hosting.classroom.push) reads it a few times a second for all its students."""

    version: int  # the teacher's view version
    rounds: int  # the latest round's number (0 before the first)
    revealed: bool  # whether the latest round is revealed
    page: str = ""  # the teacher's page (its URL path), "" before the first publish


@dataclass(frozen=True)
class ClassSummary:
    """What the teacher's screen shows: who is here, and every round so far."""

    version: int
    state: str | None
    students: int  # seats taken
    connected: int  # students seen within the connected window
    following: int  # connected students who follow the teacher
    nicknames: tuple[str, ...]  # of the connected students who gave one, sorted
    rounds: tuple[StoredRound, ...]
    locked: bool = False  # no new seats (the teacher's lock)
    names_hidden: bool = False  # the projected screen shows no nicknames


@dataclass(frozen=True)
class Seating:
    """Who asks for a seat, for the rules a store applies atomically with the seat itself."""

    browser: str = ""  # the browser token ("" unknown: a script, or a browser without storage)
    address: str = ""  # the client address ("" unknown: no cap per address)
    max_per_address: int = 0  # seats one address may hold in a class (0: no cap)


@dataclass(frozen=True)
class Creator:
    """Who starts a class, for the limits a store applies atomically with the creation."""

    browser: str = ""  # the teacher's browser token: its earlier class ends ("" unknown)
    address: str = ""  # the client address, for the rate limit ("" unknown: none)
    since: float = 0.0  # creations at or before this time no longer count
    max_per_address: int = 0  # classes one address may start since `since` (0: no limit)
    orphan_expires_before: float = float("-inf")  # a class whose expiry is at or before this
    orphan_seen_before: float = float("-inf")  # ...and whose students were all last seen at or
    #                                            before this has been left: its slot is freed


@dataclass(frozen=True)
class Seat:
    """One seat as the teacher's moderation lists it (no browser token, no address)."""

    student: str
    nickname: str
    connected: bool


@dataclass(frozen=True)
class StoreStats:
    """The size of the whole store, for the operator (expired classes are removed first)."""

    classes: int
    students: int
    rounds: int
    guesses: int
    bytes: int  # SQLite: the database's pages in use; Redis: MEMORY USAGE of the class keys


class ClassStore(ABC):
    """The atomic steps a classroom is made of; `now` and `expires` are clock seconds.

    A class whose `expires` is not after `now` is gone: every call treats it as missing, and
    `create_class` and `stats` delete it. Each call raises ClassError with the reasons named.
    """

    @abstractmethod
    def create_class(self, code: str, secret_hash: str, now: float, expires: float,
                     max_classes: int, creator: Creator | None = None) -> bool:
        """Add a class; False if the code is taken. With a `creator`: left classes (Creator's
        orphan fields) are deleted first, the creator's browser's earlier class ends, and the
        creation counts toward its address's rate limit. Raises server_full, too_many_classes.
        """

    @abstractmethod
    def secret_hash(self, code: str, now: float) -> str:
        """The stored hash of the teacher secret. Raises no_class."""

    @abstractmethod
    def close_class(self, code: str) -> None:
        """Delete the class and everything in it (nothing happens if it is gone)."""

    @abstractmethod
    def publish(self, code: str, state: str, now: float, expires: float) -> int:
        """Replace the view state; returns its new version. Raises no_class."""

    @abstractmethod
    def join(self, code: str, student: str, nickname: str, now: float, stale_before: float,
             max_students: int, seating: Seating | None = None) -> str:
        """Seat a student, or refresh one already seated (nickname replaced, "" removes it);
        returns the id seated: with a `seating` whose browser already has a seat here, that
        seat's id (a browser is one seat, with its answers), not `student`.

        A new seat is refused in a locked class, to a removed browser, and past the address's
        cap (where its least recently seen stale seat is given up first, as below). When all
        seats are taken, the student seen least recently gives up the seat if last seen at or
        before `stale_before`. Raises no_class, locked, removed, address_full, class_full.
        """

    @abstractmethod
    def student_for_browser(self, code: str, browser: str, now: float) -> str | None:
        """The id of the seat `browser` holds in the class, None if none. Raises no_class."""

    @abstractmethod
    def moderate(self, code: str, now: float, expires: float, *, locked: bool | None = None,
                 names_hidden: bool | None = None) -> None:
        """Lock or unlock the class, hide or show its names (None: leave as is). Raises
        no_class."""

    @abstractmethod
    def remove_student(self, code: str, student: str, now: float, expires: float,
                       max_removed: int) -> None:
        """Take the seat and its guesses away; its browser cannot join this class again. The
        class keeps at most `max_removed` browsers out: past that, raises removed_full (and
        the seat stays). Raises no_class, not_member, removed_full."""

    @abstractmethod
    def seats(self, code: str, now: float, connected_after: float) -> tuple[Seat, ...]:
        """Every seat, connected ones first, then by nickname. Raises no_class."""

    @abstractmethod
    def pulse(self, code: str, now: float) -> Pulse:
        """What changed in a class, read only: the view version and the latest round."""

    @abstractmethod
    def poll(self, code: str, student: str, following: bool, now: float) -> StudentPoll:
        """The student's heartbeat (seen now, following or not) and what they see. Raises
        no_class, not_member."""

    @abstractmethod
    def peek(self, code: str, student: str, now: float) -> StudentPoll:
        """What the student sees, read only (nobody is marked seen): a page run between
        heartbeats. Raises no_class, not_member."""

    @abstractmethod
    def open_round(self, code: str, question: str, now: float, expires: float,
                   max_rounds: int) -> int:
        """Start the next round; returns its number. Raises no_class, too_many_rounds."""

    @abstractmethod
    def submit_guess(self, code: str, student: str, number: int, guess: str, now: float,
                     max_answers: int) -> None:
        """Keep the student's one guess for round `number`, the latest and unrevealed one.

        Raises no_class, not_member, no_round, round_closed, answered, round_full.
        """

    @abstractmethod
    def reveal(self, code: str, number: int, now: float, expires: float) -> None:
        """Make the guesses of round `number` readable. Raises no_class, no_round."""

    @abstractmethod
    def round_guesses(self, code: str, number: int, member: str | None,
                      now: float) -> tuple[StoredRound, list[str]]:
        """A revealed round and its guesses (texts only), for `member` (a student id) or, with
        None, for the teacher. Raises no_class, not_member, no_round, not_revealed."""

    @abstractmethod
    def summary(self, code: str, now: float, expires: float,
                connected_after: float) -> ClassSummary:
        """The teacher's view (which also moves the expiry); a student is connected if last
        seen after `connected_after`. Raises no_class."""

    @abstractmethod
    def stats(self, now: float) -> StoreStats:
        """Delete the expired classes, then count what is left."""

    # A browser's way back into a class after a reload (classroom.resume): a value kept under
    # a browser's key, deleted with its class.

    @abstractmethod
    def keep_resume(self, key: str, code: str, value: str, now: float, max_per_class: int, *,
                    evictable: bool = True) -> None:
        """Keep `value` under `key` for the live class `code` (replacing what `key` held, in
        any class: one way back per browser key). Beyond `max_per_class` evictable keys the
        class's oldest evictable one goes; a key kept with evictable=False (the teacher's) is
        never pushed out by others joining: it goes with its class, or when dropped. Raises
        no_class."""

    @abstractmethod
    def resume_of(self, key: str, now: float) -> tuple[str, str] | None:
        """(class code, value) kept under `key`, while that class lives; else None."""

    @abstractmethod
    def drop_resume(self, key: str) -> None:
        """Forget `key` (nothing happens if it is not kept)."""


def page_of(state: str | None) -> str:
    """The page named in a published view state (JSON), "" if none."""
    try:
        page = json.loads(state).get("page", "") if state else ""
    except (ValueError, AttributeError):
        return ""
    return page if isinstance(page, str) else ""


def data_dir() -> Path:
    """Where the app keeps what it writes: TINYGPT_DATA_DIR, default <repo>/runs (git-ignored)."""
    return settings.data_dir()
