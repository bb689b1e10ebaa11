"""The class store in one SQLite file: every process of one machine shares it (the default).

Same methods, refusals and semantics as the Redis store (store_redis.py): the interface and its
documents are in store.py. Each method is one BEGIN IMMEDIATE transaction, so the caps hold and
every guess counts once however many processes write at the same moment.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tinygpt_hosting.classroom.store import (
    ClassError,
    ClassStore,
    ClassSummary,
    Creator,
    Pulse,
    Seat,
    Seating,
    StoredRound,
    StoreStats,
    StudentPoll,
    page_of,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (
    code TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    expires REAL NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    state TEXT,
    rounds INTEGER NOT NULL DEFAULT 0,
    locked INTEGER NOT NULL DEFAULT 0,
    names_hidden INTEGER NOT NULL DEFAULT 0,
    teacher_browser TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS students (
    code TEXT NOT NULL REFERENCES classes (code) ON DELETE CASCADE,
    student TEXT NOT NULL,
    nickname TEXT NOT NULL DEFAULT '',
    last_seen REAL NOT NULL,
    following INTEGER NOT NULL DEFAULT 0,
    browser TEXT NOT NULL DEFAULT '',
    address TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (code, student)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS removed (
    code TEXT NOT NULL REFERENCES classes (code) ON DELETE CASCADE,
    browser TEXT NOT NULL,
    PRIMARY KEY (code, browser)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS removed_addresses (
    code TEXT NOT NULL REFERENCES classes (code) ON DELETE CASCADE,
    address TEXT NOT NULL,
    removals INTEGER NOT NULL,
    PRIMARY KEY (code, address)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS creations (
    address TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS creations_by_address ON creations (address, at);
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

# columns added after the first release: a store file made before gets them on opening
ADDED_COLUMNS = {"classes": ("locked INTEGER NOT NULL DEFAULT 0",
                             "names_hidden INTEGER NOT NULL DEFAULT 0",
                             "teacher_browser TEXT NOT NULL DEFAULT ''"),
                 "students": ("browser TEXT NOT NULL DEFAULT ''",
                              "address TEXT NOT NULL DEFAULT ''")}


def add_missing_columns(conn: sqlite3.Connection) -> None:
    """Bring a store file made by an earlier version to this schema (only adds columns)."""
    for table, columns in ADDED_COLUMNS.items():
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for column in columns:
            if column.split()[0] not in have:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


_ROUND_ROW = """SELECT number, question, revealed,
    (SELECT COUNT(*) FROM guesses g WHERE g.code = r.code AND g.number = r.number)
    FROM rounds r WHERE code = ?"""


KEPT = float("inf")  # `made` of a way back that no join pushes out (keep_resume, evictable=False)

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
            add_missing_columns(conn)
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
        row = db.execute("SELECT version, state, rounds, secret_hash, locked, names_hidden "
                         "FROM classes WHERE code = ? AND expires > ?", (code, now)).fetchone()
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
                     max_classes: int, creator: Creator | None = None) -> bool:
        creator = creator or Creator()
        with self._transaction() as db:
            self._purge(db, now, creator)
            if creator.address and creator.max_per_address:
                db.execute("DELETE FROM creations WHERE at <= ?", (creator.since,))
                made = db.execute("SELECT COUNT(*) FROM creations WHERE address = ?",
                                  (creator.address,)).fetchone()[0]
                if made >= creator.max_per_address:
                    raise ClassError("too_many_classes", max_per_address=creator.max_per_address)
            if creator.browser:  # one class per teacher browser: starting another ends it
                db.execute("DELETE FROM classes WHERE teacher_browser = ?", (creator.browser,))
            if db.execute("SELECT COUNT(*) FROM classes").fetchone()[0] >= max_classes:
                raise ClassError("server_full", max_classes=max_classes)
            if db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone():
                return False
            db.execute("INSERT INTO classes (code, secret_hash, expires, teacher_browser) "
                       "VALUES (?, ?, ?, ?)", (code, secret_hash, expires, creator.browser))
            if creator.address:
                db.execute("INSERT INTO creations (address, at) VALUES (?, ?)",
                           (creator.address, now))
            return True

    @staticmethod
    def _purge(db: sqlite3.Connection, now: float, creator: Creator) -> None:
        """Delete the expired classes, and the left ones: teacher gone and nobody here."""
        db.execute("DELETE FROM classes WHERE expires <= ?", (now,))
        db.execute("DELETE FROM classes WHERE expires <= ? AND NOT EXISTS (SELECT 1 FROM "
                   "students s WHERE s.code = classes.code AND s.last_seen > ?)",
                   (creator.orphan_expires_before, creator.orphan_seen_before))

    def secret_hash(self, code: str, now: float) -> str:
        with self._transaction() as db:
            return self._live(db, code, now)[3]

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
             max_students: int, seating: Seating | None = None) -> str:
        seating = seating or Seating()
        with self._transaction() as db:
            locked = self._live(db, code, now)[4]
            if seating.browser:
                if db.execute("SELECT 1 FROM removed WHERE code = ? AND browser = ?",
                              (code, seating.browser)).fetchone():
                    raise ClassError("removed")
                held = db.execute("SELECT student FROM students WHERE code = ? AND browser = ?",
                                  (code, seating.browser)).fetchone()
                student = held[0] if held else student
            if db.execute("UPDATE students SET nickname = ?, last_seen = ? "
                          "WHERE code = ? AND student = ?",
                          (nickname, now, code, student)).rowcount:
                return student
            if locked:
                raise ClassError("locked")
            self._make_room(db, code, stale_before, max_students, seating)
            db.execute("INSERT INTO students (code, student, nickname, last_seen, browser, "
                       "address) VALUES (?, ?, ?, ?, ?, ?)",
                       (code, student, nickname, now, seating.browser, seating.address))
            return student

    @staticmethod
    def _make_room(db: sqlite3.Connection, code: str, stale_before: float, max_students: int,
                   seating: Seating) -> None:
        """Free a seat for a newcomer if the address's cap or the class's is reached: the
        stale seat seen least recently (of this address, then of anyone) goes; else refuse."""
        caps = [("class_full", "", max_students)]
        if seating.address and seating.max_per_address:
            row = db.execute("SELECT removals FROM removed_addresses WHERE code = ? AND "
                             "address = ?", (code, seating.address)).fetchone()
            removals = row[0] if row else 0  # each removal from the address: one seat less
            caps.insert(0, ("address_removed" if removals else "address_full",
                            seating.address, seating.max_per_address - removals))
        for reason, address, cap in caps:
            where = "code = ?" + (" AND address = ?" if address else "")
            args = (code, address) if address else (code,)
            if db.execute(f"SELECT COUNT(*) FROM students WHERE {where}", args).fetchone()[0] \
                    < cap:
                continue
            stale = db.execute(f"SELECT student FROM students WHERE {where} AND last_seen <= ?"
                               " ORDER BY last_seen, student LIMIT 1",
                               (*args, stale_before)).fetchone()
            if stale is None:
                raise ClassError(reason, max_students=cap, max_per_address=cap)
            db.execute("DELETE FROM students WHERE code = ? AND student = ?", (code, stale[0]))

    def student_for_browser(self, code: str, browser: str, now: float) -> str | None:
        with self._reading() as db:
            self._live(db, code, now)
            row = db.execute("SELECT student FROM students WHERE code = ? AND browser = ?",
                             (code, browser)).fetchone() if browser else None
            return row[0] if row else None

    def moderate(self, code: str, now: float, expires: float, *, locked: bool | None = None,
                 names_hidden: bool | None = None) -> None:
        with self._transaction() as db:
            self._live(db, code, now)
            for column, value in (("locked", locked), ("names_hidden", names_hidden)):
                if value is not None:
                    db.execute(f"UPDATE classes SET {column} = ? WHERE code = ?",
                               (int(value), code))
            db.execute("UPDATE classes SET expires = ? WHERE code = ?", (expires, code))

    def remove_student(self, code: str, student: str, now: float, expires: float,
                       max_removed: int) -> None:
        with self._transaction() as db:
            self._live(db, code, now)
            row = db.execute("SELECT browser, address FROM students WHERE code = ? AND "
                             "student = ?", (code, student)).fetchone()
            if row is None:
                raise ClassError("not_member")
            if row[1]:  # the address keeps one seat less for the rest of the class
                db.execute("INSERT INTO removed_addresses (code, address, removals) "
                           "VALUES (?, ?, 1) ON CONFLICT (code, address) DO UPDATE SET "
                           "removals = removals + 1", (code, row[1]))
            if row[0]:
                (kept,) = db.execute("SELECT COUNT(*) FROM removed WHERE code = ?",
                                     (code,)).fetchone()
                if kept >= max_removed:
                    raise ClassError("removed_full", max_removed=max_removed)
                db.execute("INSERT OR IGNORE INTO removed (code, browser) VALUES (?, ?)",
                           (code, row[0]))
            db.execute("DELETE FROM guesses WHERE code = ? AND student = ?", (code, student))
            db.execute("DELETE FROM students WHERE code = ? AND student = ?", (code, student))
            db.execute("UPDATE classes SET expires = ? WHERE code = ?", (expires, code))

    def seats(self, code: str, now: float, connected_after: float) -> tuple[Seat, ...]:
        with self._reading() as db:
            self._live(db, code, now)
            rows = db.execute("SELECT student, nickname, last_seen > ? FROM students "
                              "WHERE code = ?", (connected_after, code)).fetchall()
        seats = [Seat(student, nickname, bool(connected)) for student, nickname, connected in rows]
        return tuple(sorted(seats, key=lambda seat: (not seat.connected, seat.nickname,
                                                     seat.student)))

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
            version, state, rounds = self._live(db, code, now)[:3]
            if not db.execute("UPDATE students SET last_seen = ?, following = ? "
                              "WHERE code = ? AND student = ?",
                              (now, int(following), code, student)).rowcount:
                raise ClassError("not_member")
            return StudentPoll(version, state, self._latest(db, code, rounds, student))

    def peek(self, code: str, student: str, now: float) -> StudentPoll:
        with self._reading() as db:
            version, state, rounds = self._live(db, code, now)[:3]
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
            version, state, _, _, locked, names_hidden = self._live(db, code, now)
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
                                tuple(self._rounds(db, code)), bool(locked), bool(names_hidden))

    def stats(self, now: float) -> StoreStats:
        with self._transaction() as db:
            self._purge(db, now, Creator())
            counts = [db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                      for table in ("classes", "students", "rounds", "guesses")]
            page_size = db.execute("PRAGMA page_size").fetchone()[0]
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
            return StoreStats(*counts, bytes=(pages - free) * page_size)

    def keep_resume(self, key: str, code: str, value: str, now: float, max_per_class: int, *,
                    evictable: bool = True) -> None:
        made = now if evictable else KEPT  # a teacher's way back: never the oldest
        with self._transaction() as db:
            self._live(db, code, now)
            db.execute("INSERT OR REPLACE INTO resumes (key, code, value, made) "
                       "VALUES (?, ?, ?, ?)", (key, code, value, made))
            db.execute("DELETE FROM resumes WHERE code = ? AND made < ? AND key NOT IN (SELECT "
                       "key FROM resumes WHERE code = ? AND made < ? ORDER BY made DESC, key "
                       "LIMIT ?)", (code, KEPT, code, KEPT, max_per_class))

    def resume_of(self, key: str, now: float) -> tuple[str, str] | None:
        with self._reading() as db:
            row = db.execute("SELECT r.code, r.value FROM resumes r JOIN classes c "
                             "ON c.code = r.code WHERE r.key = ? AND c.expires > ?",
                             (key, now)).fetchone()
        return (row[0], row[1]) if row else None

    def drop_resume(self, key: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM resumes WHERE key = ?", (key,))
