"""Where a live class is kept: the store interface, its errors, and the SQLite backend.

The sessions of one class may sit in several processes (deploy/run_cluster.sh) or on several
machines (deploy/k8s/), so a class lives outside any one process:

- SQLite, the default: one file in the data directory (`TINYGPT_DATA_DIR`, default `<repo>/runs`),
  WAL mode, shared by every process of one machine, created on first use; nothing to install.
- Redis, for several machines: `TINYGPT_CLASS_STORE=redis://host:port/db` (store_redis.py).

Both backends have the same methods, the same refusals and the same semantics; one test suite runs
on both (tests/app/test_classroom.py). A store knows no secrets, limits or clocks:
`tinygpt_app.classroom.rules` validates every input, checks the teacher's secret, and passes the
time
and the limits into each call. What a store guarantees is that each method is one atomic step
(SQLite: one BEGIN IMMEDIATE transaction; Redis: one Lua script), so the caps hold and every
guess counts once, however many processes write at the same moment.

What is kept, per class: the hash of the teacher secret, an expiry time, the published view state
(JSON), per student a random id, an optional nickname, when it was last seen and whether it
follows; per round the question (JSON), whether it is revealed, and one guess per student. All of
it is text typed by people: the app renders it as plain text, never as markdown or HTML.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tinygpt_app import settings

# reason -> the sentence a person sees; {numbers} are filled in by whoever refuses
MESSAGES = {
    "bad_code": "A class code is 6 letters and digits, like K7MQ2P.",
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
    process (tinygpt_app.classroom.push) reads it a few times a second for all its students."""

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
                     max_classes: int) -> bool:
        """Add a class; False if the code is taken. Raises server_full."""

    @abstractmethod
    def secret_hash(self, code: str, now: float) -> str:
        """The stored hash of the teacher secret. Raises no_class."""

    @abstractmethod
    def touch(self, code: str, now: float, expires: float) -> None:
        """The teacher is active: move the expiry. Raises no_class."""

    @abstractmethod
    def close_class(self, code: str) -> None:
        """Delete the class and everything in it (nothing happens if it is gone)."""

    @abstractmethod
    def publish(self, code: str, state: str, now: float, expires: float) -> int:
        """Replace the view state; returns its new version. Raises no_class."""

    @abstractmethod
    def join(self, code: str, student: str, nickname: str, now: float, stale_before: float,
             max_students: int) -> None:
        """Seat a student, or refresh one already seated (nickname replaced, "" removes it).

        When all seats are taken, the student seen least recently gives up the seat if last
        seen at or before `stale_before`. Raises no_class, class_full.
        """

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
    def keep_resume(self, key: str, code: str, value: str, now: float, max_per_class: int) -> None:
        """Keep `value` under `key` for the live class `code` (replacing what `key` held, in
        any class); beyond `max_per_class` keys the class's oldest goes. Raises no_class."""

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


SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (
    code TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    expires REAL NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    state TEXT,
    rounds INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS students (
    code TEXT NOT NULL REFERENCES classes (code) ON DELETE CASCADE,
    student TEXT NOT NULL,
    nickname TEXT NOT NULL DEFAULT '',
    last_seen REAL NOT NULL,
    following INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, student)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rounds (
    code TEXT NOT NULL REFERENCES classes (code) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    question TEXT NOT NULL,
    revealed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (code, number)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS resumes (
    key TEXT PRIMARY KEY,
    code TEXT NOT NULL REFERENCES classes (code) ON DELETE CASCADE,
    value TEXT NOT NULL,
    made REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS resumes_by_class ON resumes (code, made);
CREATE TABLE IF NOT EXISTS guesses (
    code TEXT NOT NULL,
    number INTEGER NOT NULL,
    student TEXT NOT NULL,
    guess TEXT NOT NULL,
    PRIMARY KEY (code, number, student),
    FOREIGN KEY (code, number) REFERENCES rounds (code, number) ON DELETE CASCADE
) WITHOUT ROWID;
"""

_ROUND_ROW = """SELECT number, question, revealed,
    (SELECT COUNT(*) FROM guesses g WHERE g.code = r.code AND g.number = r.number)
    FROM rounds r WHERE code = ?"""


class SqliteClassStore(ClassStore):
    """The class store in one SQLite file, shared safely by the processes of one machine.

    WAL mode lets readers work while one process writes; every write takes the write lock at
    BEGIN IMMEDIATE and others wait for it up to `busy_timeout_s`. Within a process, one
    connection serves all sessions' threads in turn (each step takes well under a millisecond).
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = 0

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None or self._pid != os.getpid():  # a forked child opens its own
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: durable across app crashes
            conn.execute("PRAGMA journal_size_limit = 4194304")  # the WAL shrinks back to 4 MB
            conn.execute("PRAGMA foreign_keys = ON")
            conn.executescript(SCHEMA)
            self._connection, self._pid = conn, os.getpid()
        return self._connection

    @contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """This process's connection, one step at a time (the lock). SQLite and file errors,
        in the step too, reach the caller as ClassError("unavailable")."""
        with self._lock:
            try:
                yield self._connect()
            except (sqlite3.Error, OSError) as error:  # e.g. a data directory we cannot write
                raise ClassError("unavailable") from error

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic step. A refusal (ClassError) commits what came before it (purges);
        any other error rolls back. SQLite and file errors reach the caller as ClassError."""
        with self._connected() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except ClassError:
                db.execute("COMMIT")
                raise
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @staticmethod
    def _live(db: sqlite3.Connection, code: str, now: float) -> tuple:
        row = db.execute("SELECT version, state, rounds, secret_hash FROM classes "
                         "WHERE code = ? AND expires > ?", (code, now)).fetchone()
        if row is None:
            raise ClassError("no_class")
        return row

    @staticmethod
    def _member(db: sqlite3.Connection, code: str, student: str) -> None:
        if db.execute("SELECT 1 FROM students WHERE code = ? AND student = ?",
                      (code, student)).fetchone() is None:
            raise ClassError("not_member")

    @staticmethod
    def _rounds(db: sqlite3.Connection, code: str, number: int | None = None) -> list[StoredRound]:
        if number is None:
            rows = db.execute(_ROUND_ROW + " ORDER BY number", (code,)).fetchall()
        else:
            rows = db.execute(_ROUND_ROW + " AND number = ?", (code, number)).fetchall()
        return [StoredRound(n, q, bool(revealed), answers) for n, q, revealed, answers in rows]

    def create_class(self, code: str, secret_hash: str, now: float, expires: float,
                     max_classes: int) -> bool:
        with self._transaction() as db:
            db.execute("DELETE FROM classes WHERE expires <= ?", (now,))
            if db.execute("SELECT COUNT(*) FROM classes").fetchone()[0] >= max_classes:
                raise ClassError("server_full", max_classes=max_classes)
            if db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone():
                return False
            db.execute("INSERT INTO classes (code, secret_hash, expires) VALUES (?, ?, ?)",
                       (code, secret_hash, expires))
            return True

    def secret_hash(self, code: str, now: float) -> str:
        with self._transaction() as db:
            return self._live(db, code, now)[3]

    def touch(self, code: str, now: float, expires: float) -> None:
        with self._transaction() as db:
            self._live(db, code, now)
            db.execute("UPDATE classes SET expires = ? WHERE code = ?", (expires, code))

    def close_class(self, code: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM classes WHERE code = ?", (code,))

    def publish(self, code: str, state: str, now: float, expires: float) -> int:
        with self._transaction() as db:
            version = self._live(db, code, now)[0] + 1
            db.execute("UPDATE classes SET version = ?, state = ?, expires = ? WHERE code = ?",
                       (version, state, expires, code))
            return version

    def join(self, code: str, student: str, nickname: str, now: float, stale_before: float,
             max_students: int) -> None:
        with self._transaction() as db:
            self._live(db, code, now)
            if db.execute("UPDATE students SET nickname = ?, last_seen = ? "
                          "WHERE code = ? AND student = ?",
                          (nickname, now, code, student)).rowcount:
                return
            seated = db.execute("SELECT COUNT(*) FROM students WHERE code = ?", (code,))
            if seated.fetchone()[0] >= max_students:
                stale = db.execute("SELECT student FROM students WHERE code = ? AND last_seen <= ?"
                                   " ORDER BY last_seen, student LIMIT 1",
                                   (code, stale_before)).fetchone()
                if stale is None:
                    raise ClassError("class_full", max_students=max_students)
                db.execute("DELETE FROM students WHERE code = ? AND student = ?", (code, stale[0]))
            db.execute("INSERT INTO students (code, student, nickname, last_seen) "
                       "VALUES (?, ?, ?, ?)", (code, student, nickname, now))

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only step: a deferred transaction (one snapshot) that never takes the write
        lock, so in WAL mode it neither waits for another process's write nor delays one."""
        with self._connected() as db:
            db.execute("BEGIN")
            try:
                yield db
            finally:
                db.execute("COMMIT")

    def pulse(self, code: str, now: float) -> Pulse:
        with self._reading() as db:
            row = db.execute(
                "SELECT version, rounds, (SELECT revealed FROM rounds r WHERE r.code = c.code "
                "AND r.number = c.rounds), state FROM classes c WHERE code = ? AND expires > ?",
                (code, now)).fetchone()
        if row is None:
            raise ClassError("no_class")
        return Pulse(int(row[0]), int(row[1]), bool(row[2]), page_of(row[3]))

    def poll(self, code: str, student: str, following: bool, now: float) -> StudentPoll:
        with self._transaction() as db:
            version, state, rounds, _ = self._live(db, code, now)
            if not db.execute("UPDATE students SET last_seen = ?, following = ? "
                              "WHERE code = ? AND student = ?",
                              (now, int(following), code, student)).rowcount:
                raise ClassError("not_member")
            return StudentPoll(version, state, self._latest(db, code, rounds, student))

    def peek(self, code: str, student: str, now: float) -> StudentPoll:
        with self._reading() as db:
            version, state, rounds, _ = self._live(db, code, now)
            self._member(db, code, student)
            return StudentPoll(version, state, self._latest(db, code, rounds, student))

    def _latest(self, db: sqlite3.Connection, code: str, rounds: int,
                student: str) -> StoredRound | None:
        """The latest round as this student sees it (whether they answered it)."""
        if not rounds:
            return None
        (latest,) = self._rounds(db, code, rounds)
        answered = db.execute("SELECT 1 FROM guesses WHERE code = ? AND number = ? "
                              "AND student = ?", (code, rounds, student)).fetchone()
        return StoredRound(latest.number, latest.question, latest.revealed, latest.answers,
                           answered is not None)

    def open_round(self, code: str, question: str, now: float, expires: float,
                   max_rounds: int) -> int:
        with self._transaction() as db:
            rounds = self._live(db, code, now)[2]
            if rounds >= max_rounds:
                raise ClassError("too_many_rounds", max_rounds=max_rounds)
            db.execute("UPDATE classes SET rounds = ?, expires = ? WHERE code = ?",
                       (rounds + 1, expires, code))
            db.execute("INSERT INTO rounds (code, number, question) VALUES (?, ?, ?)",
                       (code, rounds + 1, question))
            return rounds + 1

    def submit_guess(self, code: str, student: str, number: int, guess: str, now: float,
                     max_answers: int) -> None:
        with self._transaction() as db:
            rounds = self._live(db, code, now)[2]
            self._member(db, code, student)
            if not 1 <= number <= rounds:
                raise ClassError("no_round")
            (stored,) = self._rounds(db, code, number)
            if number != rounds or stored.revealed:
                raise ClassError("round_closed")
            if db.execute("SELECT 1 FROM guesses WHERE code = ? AND number = ? AND student = ?",
                          (code, number, student)).fetchone():
                raise ClassError("answered")
            if stored.answers >= max_answers:
                raise ClassError("round_full", max_students=max_answers)
            db.execute("INSERT INTO guesses (code, number, student, guess) VALUES (?, ?, ?, ?)",
                       (code, number, student, guess))

    def reveal(self, code: str, number: int, now: float, expires: float) -> None:
        with self._transaction() as db:
            if not 1 <= number <= self._live(db, code, now)[2]:
                raise ClassError("no_round")
            db.execute("UPDATE rounds SET revealed = 1 WHERE code = ? AND number = ?",
                       (code, number))
            db.execute("UPDATE classes SET expires = ? WHERE code = ?", (expires, code))

    def round_guesses(self, code: str, number: int, member: str | None,
                      now: float) -> tuple[StoredRound, list[str]]:
        with self._transaction() as db:
            rounds = self._live(db, code, now)[2]
            if member is not None:
                self._member(db, code, member)
            if not 1 <= number <= rounds:
                raise ClassError("no_round")
            (stored,) = self._rounds(db, code, number)
            if not stored.revealed:
                raise ClassError("not_revealed")
            rows = db.execute("SELECT guess FROM guesses WHERE code = ? AND number = ?",
                              (code, number)).fetchall()
            return stored, [guess for (guess,) in rows]

    def summary(self, code: str, now: float, expires: float,
                connected_after: float) -> ClassSummary:
        with self._transaction() as db:
            version, state, _, _ = self._live(db, code, now)
            db.execute("UPDATE classes SET expires = ? WHERE code = ?", (expires, code))
            students, connected, following = db.execute(
                "SELECT COUNT(*), COUNT(*) FILTER (WHERE last_seen > ?), "
                "COUNT(*) FILTER (WHERE last_seen > ? AND following) "
                "FROM students WHERE code = ?", (connected_after, connected_after, code)).fetchone()
            nicknames = db.execute("SELECT nickname FROM students WHERE code = ? "
                                   "AND last_seen > ? AND nickname != ''",
                                   (code, connected_after)).fetchall()
            return ClassSummary(version, state, students, connected, following,
                                tuple(sorted(nick for (nick,) in nicknames)),
                                tuple(self._rounds(db, code)))

    def stats(self, now: float) -> StoreStats:
        with self._transaction() as db:
            db.execute("DELETE FROM classes WHERE expires <= ?", (now,))
            counts = [db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                      for table in ("classes", "students", "rounds", "guesses")]
            page_size = db.execute("PRAGMA page_size").fetchone()[0]
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
            return StoreStats(*counts, bytes=(pages - free) * page_size)

    def keep_resume(self, key: str, code: str, value: str, now: float, max_per_class: int) -> None:
        with self._transaction() as db:
            self._live(db, code, now)
            db.execute("INSERT OR REPLACE INTO resumes (key, code, value, made) "
                       "VALUES (?, ?, ?, ?)", (key, code, value, now))
            db.execute("DELETE FROM resumes WHERE code = ? AND key NOT IN (SELECT key FROM "
                       "resumes WHERE code = ? ORDER BY made DESC, key LIMIT ?)",
                       (code, code, max_per_class))

    def resume_of(self, key: str, now: float) -> tuple[str, str] | None:
        with self._reading() as db:
            row = db.execute("SELECT r.code, r.value FROM resumes r JOIN classes c "
                             "ON c.code = r.code WHERE r.key = ? AND c.expires > ?",
                             (key, now)).fetchone()
        return (row[0], row[1]) if row else None

    def drop_resume(self, key: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM resumes WHERE key = ?", (key,))
