"""A live class: the teacher leads, students follow, everyone guesses, then the class compares.

Pure Python, no Streamlit: the Class page and the follow fragment call a Classroom, whose state
lives in a ClassStore (class_store.py) shared by every process and machine of the app.

Who may do what:
- Whoever holds the teacher secret (in the private teacher link) changes the class: publishes the
  view state, opens and reveals rounds, closes the class. Only a SHA-256 hash of the secret is
  stored, and the comparison takes constant time.
- A student joins with the class code and gets a random id, kept in the student's session. With
  it they follow the teacher's view state (with its version), answer each round once, and read a
  round's guesses once the teacher has revealed it, as counts per guess text (no student ids).
  An id is valid only in the class it joined.
- A seat is a browser, not an id: joining again from the same browser (its token) gives back the
  same seat, so the same single answer per round; seats per client address are capped; the
  teacher can lock the class, remove a student (that browser cannot join again) and hide the
  names on the projected screen.
- Starting a class is earned: with a teacher key set (TINYGPT_TEACHER_KEY) it needs the key;
  always, an address may start only so many classes an hour, a browser leads one class at a
  time, and a class whose teacher left and whom nobody follows frees its slot within minutes.
- Before the reveal nobody reads the guesses, the teacher neither: only how many answered.

One guess per student per round: a second submission is refused ("answered"), so what a student
sent first is what counts, and a retried request can never count twice.

All class text (prompt, page, controls, question, nicknames, guesses) is data typed by people:
render it as plain text (st.text, st.code, Plotly text), never as markdown or HTML. Nothing
personal is kept: ids are random, nicknames optional and short, everything ends with the class.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tinygpt_app import settings
from tinygpt_hosting.classroom import teacher_key as teacher_key_guard
from tinygpt_hosting.classroom.store import (
    ClassError,
    ClassStore,
    Creator,
    Pulse,
    Seat,
    Seating,
    StoredRound,
    StoreStats,
    StudentPoll,
)
from tinygpt_hosting.classroom.stores import open_class_store
from tinygpt_hosting.classroom.teacher_key import KeyGuard
from tinygpt_hosting.serving.client_address import LOOPBACK, address_key

__all__ = ["ClassError", "Classroom", "Limits", "NewClass", "Pulse", "Question", "RoundInfo",
           "RoundResult", "Seat", "StoreStats", "StudentView", "TeacherView", "ViewState",
           "open_classroom"]

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no I, L, O, 0, 1: read aloud and typed
CODE_LENGTH = 6  # 31**6 ≈ 890 million codes
KINDS = ("next_token", "attention")  # "what comes next?" / "which token does this head attend to?"
_STUDENT_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
_BROWSER = re.compile(r"[A-Za-z0-9_-]{16,64}")  # a browser token (kit.browser_token: 43 chars)
_SECRET = re.compile(r"[A-Za-z0-9_-]{20,100}")
_CONTROL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")
MAX_STUDENT_ID = 64
MAX_BROWSER_KEY = 43  # a browser token as the store keeps it (_BROWSER)
MAX_PAGE_CHARS = 64
MAX_CONTROL_TEXT = 200
MAX_POSITION = 1_000_000


@dataclass(frozen=True)
class Limits:
    """Every bound of the class store; `from_env` reads the operator's settings."""

    ttl_seconds: float = 3 * 3600.0  # a class ends 3 h after its teacher was last active
    max_classes: int = 50  # classes at once on this server (or this Redis)
    max_students: int = 150  # seats per class; when full, a silent student's seat is given away
    max_rounds: int = 40  # questions per class, all kept until the class ends
    connected_seconds: float = 30.0  # a student is connected if seen this recently (3 heartbeats)
    max_nickname_chars: int = 24
    max_guess_chars: int = 32
    max_prompt_chars: int = 1000
    max_controls: int = 32
    max_state_bytes: int = 8192  # a view state or a question, as UTF-8 JSON
    seats_per_address: int = 4  # seats one client address may hold in a class (a teacher's
    #                             laptop and a test tab or two; each phone has its own address)
    classes_per_address: int = 6  # classes one client address may start per creation window
    creation_window_seconds: float = 3600.0
    left_seconds: float = 300.0  # a class whose teacher and students were all away this long
    #                             is left: its slot is freed when the next class is started
    max_removed: int = 300  # browsers one class keeps out (the teacher's removals); past it a
    #                         removal is refused and the teacher is told to lock the class

    def __post_init__(self) -> None:
        for name in ("max_classes", "max_students", "max_rounds", "max_nickname_chars",
                     "max_guess_chars", "max_prompt_chars", "max_controls", "max_state_bytes",
                     "seats_per_address", "classes_per_address", "max_removed"):
            if not 1 <= getattr(self, name) <= 100_000:
                raise ValueError(f"{name} must be between 1 and 100,000")
        if not min(self.ttl_seconds, self.connected_seconds, self.creation_window_seconds,
                   self.left_seconds) > 0:
            raise ValueError("the class store's durations must be positive")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """TINYGPT_CLASS_TTL_HOURS, TINYGPT_MAX_CLASSES, TINYGPT_MAX_STUDENTS,
        TINYGPT_SEATS_PER_ADDRESS, TINYGPT_CLASSES_PER_ADDRESS override defaults (read by
        tinygpt_app.settings: a bad value is logged and the default kept)."""
        return cls(**settings.class_limits(environ))


@dataclass(frozen=True)
class NewClass:
    """A class just created: the code to project, the secret for the teacher link only."""

    code: str
    secret: str


@dataclass(frozen=True)
class _PromptAt:
    """A prompt the class looks at and the token inspected in it (None: its last token)."""

    prompt: str
    position: int | None


@dataclass(frozen=True)
class ViewState(_PromptAt):
    """What the teacher shows, for the students who follow: page, prompt, position, controls."""

    version: int
    page: str
    controls: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Question(_PromptAt):
    """What a round asks: `kind` is one of KINDS; `details` e.g. {"layer": 0, "head": 2}."""

    kind: str
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundInfo:
    number: int
    question: Question
    revealed: bool
    answers: int  # how many answered (all anyone sees before the reveal)


@dataclass(frozen=True)
class RoundResult:
    """A revealed round: each distinct guess with how many gave it, most given first."""

    number: int
    question: Question
    answers: int
    guesses: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class StudentView:
    """One poll's answer: the teacher's view (None before the first publish) and the latest round
    (None before the first), with whether this student has answered it."""

    state: ViewState | None
    round: RoundInfo | None
    answered: bool


@dataclass(frozen=True)
class TeacherView:
    code: str
    students: int  # seats taken
    connected: int  # seen within Limits.connected_seconds
    following: int  # connected and following the teacher
    nicknames: tuple[str, ...]  # of connected students who gave one, sorted (none when hidden)
    state: ViewState | None
    rounds: tuple[RoundInfo, ...]  # every round so far, first first
    locked: bool = False  # nobody new can join
    names_hidden: bool = False  # the teacher hid the nicknames from the projected screen


def _bad(message: str) -> ClassError:
    return ClassError("bad_input", message)


def normalize_code(code: object) -> str:
    """A typed class code as stored: upper case, spaces and dashes dropped; else bad_code."""
    text = re.sub(r"[\s-]", "", code).upper() if isinstance(code, str) else ""
    if len(text) != CODE_LENGTH or any(ch not in CODE_ALPHABET for ch in text):
        raise ClassError("bad_code")
    return text


def _plain_text(value: object, cap: int, what: str) -> str:
    """`value` if it is text of at most `cap` characters that can be stored (UTF-8, no NUL)."""
    if not isinstance(value, str):
        raise _bad(f"The {what} must be text.")
    if len(value) > cap:
        raise _bad(f"The {what} is at most {cap:,} characters.")
    if "\x00" in value or _has_surrogates(value):
        raise _bad(f"The {what} contains characters that cannot be kept.")
    return value


def _has_surrogates(text: str) -> bool:
    """True if it holds a lone surrogate (U+D800..U+DFFF): that has no UTF-8 form."""
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def clean_nickname(nickname: object, cap: int) -> str:
    """One line of at most `cap` characters: control and format characters (bidi overrides
    included) dropped, runs of spaces made one."""
    text = _plain_text(nickname if nickname is not None else "", 4 * cap, "nickname")
    text = "".join(ch for ch in text if ch.isprintable() or ch == " ")
    text = " ".join(text.split())
    if len(text) > cap:
        raise _bad(f"The nickname is at most {cap} characters.")
    return text


def _position(position: object) -> int | None:
    if position is None:
        return None
    if isinstance(position, bool) or not isinstance(position, int):
        raise _bad("The position must be a whole number.")
    if not 0 <= position < MAX_POSITION:
        raise _bad(f"The position must be between 0 and {MAX_POSITION - 1:,}.")
    return position


def _scalar(name: str, value: object) -> object:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > 2**53:
            raise _bad(f"The control {name!r} is out of range.")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _bad(f"The control {name!r} must be a finite number.")
        return value
    return _plain_text(value, MAX_CONTROL_TEXT, f"control {name!r}")


def _controls(controls: object, cap: int) -> dict[str, object]:
    """A small dict of scalars: names of letters, digits and _.- ; values None, bool, number,
    or short text."""
    if controls is None:
        return {}
    if not isinstance(controls, Mapping):
        raise _bad("The controls must be a mapping of names to values.")
    if len(controls) > cap:
        raise _bad(f"At most {cap} controls can be shared.")
    checked = {}
    for name, value in controls.items():
        if not isinstance(name, str) or not _CONTROL_NAME.fullmatch(name):
            raise _bad("A control name is 1-40 letters, digits, '_', '.' or '-'.")
        checked[name] = _scalar(name, value)
    return checked


def _capped_json(data: dict, cap: int, what: str) -> str:
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=False)
    size = len(text.encode("utf-8"))
    if size > cap:
        raise _bad(f"The {what} is too large to share ({size:,} bytes; at most {cap:,}).")
    return text


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _question(text: str) -> Question:
    data = json.loads(text)
    return Question(kind=data["kind"], prompt=data["prompt"], position=data["position"],
                    details=data["details"])


def _view_state(version: int, text: str | None) -> ViewState | None:
    if text is None:
        return None
    data = json.loads(text)
    return ViewState(version=version, page=data["page"], prompt=data["prompt"],
                     position=data["position"], controls=data["controls"])


def _round_info(stored: StoredRound) -> RoundInfo:
    return RoundInfo(stored.number, _question(stored.question), stored.revealed, stored.answers)


def _student_view(polled: StudentPoll) -> StudentView:
    latest = polled.round
    return StudentView(_view_state(polled.version, polled.state),
                       _round_info(latest) if latest else None, bool(latest and latest.answered))


def _browser(token: object) -> str:
    """A browser token as the store keys it; "" for none or one of the wrong shape (never
    trust the browser's string)."""
    return token if isinstance(token, str) and _BROWSER.fullmatch(token) else ""


def _address(address: object) -> str:
    """A client address as the store keys it: its address_key (the session door's: an IPv6
    address's /64), bounded; "" for none."""
    return address_key(address) if isinstance(address, str) and address.strip() else ""


def _number(number: object) -> int:
    if isinstance(number, bool) or not isinstance(number, int):
        raise ClassError("no_round")
    return number


class Classroom:
    """The live-class loop over a store; `clock` (seconds) can be injected for tests.

    Every method raises ClassError with a plain message when it refuses; nothing else escapes
    for bad input or an unreachable store.
    """

    def __init__(self, store: ClassStore, limits: Limits | None = None,
                 clock: Callable[[], float] = time.time, teacher_key: str = "",
                 key_guard: KeyGuard | None = None) -> None:
        self.store = store
        self.limits = limits or Limits()
        self.clock = clock
        self._key_hash = _hash_secret(teacher_key) if teacher_key else ""
        self.key_guard = key_guard or teacher_key_guard.GUARD  # wrong keys per address

    @property
    def needs_teacher_key(self) -> bool:
        """Does starting a class need the server's teacher key (TINYGPT_TEACHER_KEY)?"""
        return bool(self._key_hash)

    def _check_teacher_key(self, given: object, address: str) -> None:
        """The server's key, compared in constant time; an address that typed too many wrong
        keys waits first (classroom.teacher_key: exponential back-off, logged)."""
        if not self._key_hash:
            return
        who, now = address or LOOPBACK, self.clock()
        wait = self.key_guard.wait(who, now)
        if wait > 0:
            raise ClassError("teacher_key_wait", seconds=math.ceil(wait))
        hashed = _hash_secret(given) if isinstance(given, str) and 0 < len(given) <= 200 else ""
        if not hmac.compare_digest(self._key_hash.encode(), hashed.encode()):
            self.key_guard.failed(who, now)
            raise ClassError("teacher_key")
        self.key_guard.succeeded(who)

    def _creator(self, browser: str, address: str, now: float) -> Creator:
        """The limits of one creation: the rate per address, the browser's earlier class, and
        which classes count as left (teacher and students away for Limits.left_seconds)."""
        limits = self.limits
        return Creator(browser=browser, address=address,
                       since=now - limits.creation_window_seconds,
                       max_per_address=limits.classes_per_address,
                       orphan_expires_before=now - limits.left_seconds + limits.ttl_seconds,
                       orphan_seen_before=now - limits.left_seconds)

    def _times(self) -> tuple[float, float]:
        now = float(self.clock())
        return now, now + self.limits.ttl_seconds

    def _teacher(self, code: object, secret: object) -> tuple[str, float, float]:
        """The normalized code and (now, expires) once `secret` is this class's teacher's."""
        code = normalize_code(code)
        now, expires = self._times()
        stored = self.store.secret_hash(code, now)
        given = _hash_secret(secret) if isinstance(secret, str) and _SECRET.fullmatch(secret) \
            else ""
        if not hmac.compare_digest(stored.encode(), given.encode()):
            raise ClassError("wrong_secret")
        return code, now, expires

    @staticmethod
    def _student(student_id: object) -> str:
        if not isinstance(student_id, str) or not _STUDENT_ID.fullmatch(student_id):
            raise ClassError("not_member")
        return student_id

    # the teacher

    def create_class(self, teacher_key: str | None = None, *, browser: str | None = None,
                     address: str | None = None) -> NewClass:
        """A new class with a fresh code and secret. `browser` (its token) leads one class at
        a time: its earlier class ends. Refused without the teacher key when the server has
        one, past the rate per `address`, and when the server is full."""
        self._check_teacher_key(teacher_key, _address(address))
        secret = secrets.token_urlsafe(32)
        now, expires = self._times()
        creator = self._creator(_browser(browser), _address(address), now)
        for _ in range(8):  # a clash is ~1 in 18 million per try with 50 classes
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            if self.store.create_class(code, _hash_secret(secret), now, expires,
                                       self.limits.max_classes, creator):
                return NewClass(code, secret)
        raise ClassError("unavailable")

    def publish(self, code: str, secret: str, *, page: str, prompt: str,
                position: int | None = None, controls: Mapping[str, object] | None = None) -> int:
        """Share the teacher's view; returns its version (students follow the highest)."""
        code, now, expires = self._teacher(code, secret)
        limits = self.limits
        state = {"page": " ".join(_plain_text(page, MAX_PAGE_CHARS, "page name").split()),
                 "prompt": _plain_text(prompt, limits.max_prompt_chars, "prompt"),
                 "position": _position(position),
                 "controls": _controls(controls, limits.max_controls)}
        return self.store.publish(code, _capped_json(state, limits.max_state_bytes, "view"),
                                  now, expires)

    def open_round(self, code: str, secret: str, *, kind: str, prompt: str,
                   position: int | None = None,
                   details: Mapping[str, object] | None = None) -> int:
        """Ask the class a question; returns the round's number. Guesses go to the newest
        round only: opening one closes the previous (still hidden until revealed)."""
        code, now, expires = self._teacher(code, secret)
        if kind not in KINDS:
            raise _bad(f"A question is one of: {', '.join(KINDS)}.")
        limits = self.limits
        question = {"kind": kind, "prompt": _plain_text(prompt, limits.max_prompt_chars, "prompt"),
                    "position": _position(position),
                    "details": _controls(details, limits.max_controls)}
        return self.store.open_round(code, _capped_json(question, limits.max_state_bytes,
                                                        "question"),
                                     now, expires, limits.max_rounds)

    def reveal(self, code: str, secret: str, number: int) -> RoundResult:
        """Show everyone the guesses of round `number` (any round, not only the latest);
        no more guesses are taken for it."""
        code, now, expires = self._teacher(code, secret)
        self.store.reveal(code, _number(number), now, expires)
        return self._result(code, number, None, now)

    def teacher_view(self, code: str, secret: str) -> TeacherView:
        """Counts, nicknames and rounds for the teacher's screen; keeps the class alive."""
        code, now, expires = self._teacher(code, secret)
        summary = self.store.summary(code, now, expires, now - self.limits.connected_seconds)
        return TeacherView(code, summary.students, summary.connected, summary.following,
                           () if summary.names_hidden else summary.nicknames,
                           _view_state(summary.version, summary.state),
                           tuple(_round_info(r) for r in summary.rounds), summary.locked,
                           summary.names_hidden)

    def close_class(self, code: str, secret: str) -> None:
        """End the class now: everything in it is deleted, its slot is free."""
        code, _, _ = self._teacher(code, secret)
        self.store.close_class(code)

    # the teacher moderates

    def lock(self, code: str, secret: str, locked: bool = True) -> None:
        """Let nobody new join (seated students stay, and a seated browser may come back)."""
        code, now, expires = self._teacher(code, secret)
        self.store.moderate(code, now, expires, locked=bool(locked))

    def hide_names(self, code: str, secret: str, hidden: bool = True) -> None:
        """Hide the nicknames from the teacher's (projected) view, or show them again."""
        code, now, expires = self._teacher(code, secret)
        self.store.moderate(code, now, expires, names_hidden=bool(hidden))

    def seats(self, code: str, secret: str) -> tuple[Seat, ...]:
        """Every seat (id, nickname, connected), for the teacher's remove button."""
        code, now, _ = self._teacher(code, secret)
        return self.store.seats(code, now, now - self.limits.connected_seconds)

    def remove_student(self, code: str, secret: str, student_id: str) -> None:
        """Take the seat and its guesses away; its browser cannot join this class again."""
        code, now, expires = self._teacher(code, secret)
        self.store.remove_student(code, self._student(student_id), now, expires,
                                  self.limits.max_removed)

    # a student

    def join(self, code: str, nickname: str = "", student_id: str | None = None, *,
             browser: str | None = None, address: str | None = None) -> str:
        """Take a seat; returns the student id to keep in the session. Passing the id back
        (after "not_member") takes a seat again under the same id; a `browser` (its token)
        that holds a seat here gets that seat back, whatever id is passed. Refused in a locked
        class, to a removed browser, and past the seats per `address`."""
        code = normalize_code(code)
        student = secrets.token_urlsafe(16) if student_id is None else self._student(student_id)
        nickname = clean_nickname(nickname, self.limits.max_nickname_chars)
        now, _ = self._times()
        seating = Seating(_browser(browser), _address(address), self.limits.seats_per_address)
        return self.store.join(code, student, nickname, now,
                               now - self.limits.connected_seconds, self.limits.max_students,
                               seating)

    def student_for_browser(self, code: str, browser: str | None) -> str | None:
        """The seat this browser holds in the class (a reload finds its place), or None."""
        token = _browser(browser)
        if not token:
            return None
        return self.store.student_for_browser(normalize_code(code), token, self._times()[0])

    def pulse(self, code: str) -> Pulse:
        """The class's view version and latest round, read only (no student is marked seen)."""
        return self.store.pulse(normalize_code(code), self._times()[0])

    def poll(self, code: str, student_id: str, *, following: bool = True) -> StudentView:
        """The heartbeat a student's app sends every second or two: marks the student connected
        (and following or not) and returns the teacher's view and the latest round."""
        code, student = normalize_code(code), self._student(student_id)
        return _student_view(self.store.poll(code, student, bool(following), self._times()[0]))

    def peek(self, code: str, student_id: str) -> StudentView:
        """What `poll` returns, read only: the student is not marked seen (a page run between
        heartbeats reads this without taking the store's write lock)."""
        code, student = normalize_code(code), self._student(student_id)
        return _student_view(self.store.peek(code, student, self._times()[0]))

    def submit_guess(self, code: str, student_id: str, number: int, guess: str) -> None:
        """The student's one guess for round `number`, kept exactly as typed (" the" and "the"
        are different tokens). Refused if already answered, if the round is not the latest or
        is revealed, or if the text is empty or too long."""
        code, student = normalize_code(code), self._student(student_id)
        guess = _plain_text(guess, self.limits.max_guess_chars, "guess")
        if not guess:  # " " or "\n" can be a next token: only empty is no guess
            raise _bad("Type a guess first.")
        self.store.submit_guess(code, student, _number(number), guess, self._times()[0],
                                self.limits.max_students)

    # both

    def round_result(self, code: str, number: int, *, student_id: str | None = None,
                     secret: str | None = None) -> RoundResult:
        """The guesses of a revealed round, for a student of the class or for its teacher."""
        if secret is not None:
            code, now, _ = self._teacher(code, secret)
            return self._result(code, number, None, now)
        return self._result(normalize_code(code), number, self._student(student_id),
                            self._times()[0])

    def _result(self, code: str, number: int, member: str | None, now: float) -> RoundResult:
        stored, guesses = self.store.round_guesses(code, _number(number), member, now)
        counted = sorted(Counter(guesses).items(), key=lambda item: (-item[1], item[0]))
        return RoundResult(stored.number, _question(stored.question), stored.answers,
                           tuple(counted))

    def stats(self) -> StoreStats:
        """The whole store's size (after removing expired classes), for the operator."""
        return self.store.stats(self._times()[0])


def open_classroom(url: str | None = None) -> Classroom:
    """The classroom the app uses: the store from TINYGPT_CLASS_STORE (default SQLite in
    TINYGPT_DATA_DIR), the limits from the environment (Limits.from_env), the teacher key
    (TINYGPT_TEACHER_KEY)."""
    return Classroom(open_class_store(url), Limits.from_env(),
                     teacher_key=settings.teacher_key())
