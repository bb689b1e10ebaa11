"""Back into the class after a reload, bound to the browser (kit.browser_token).

A phone reloads a background tab, a teacher presses F5: the Streamlit session is new and knows
no class. The browser still holds its random token, so the class store keeps, under a key made
from that token, the way back:

- a teacher's: the class secret *sealed* with the browser's token (XOR with a keystream drawn
  from it). The store alone cannot act as the teacher, and the secret never goes to the
  browser. It is revoked by "Forget this browser" and deleted when the class ends; students
  joining never push it out (the store keeps it apart from their bounded ways back).
- a student's: the class code. The seat itself is the browser's: the class gives a browser
  that joins again the seat it holds (Classroom.join with its token, found again by
  Classroom.student_for_browser), so the way back needs no secret at all.

The keys are hashes of the token, one per role, so the store never holds a browser's token.
"""

from __future__ import annotations

import hashlib

from tinygpt_hosting.classroom import rules as cr

TEACHER, STUDENT = "teacher", "student"
RESUMES_PER_STUDENT_SEAT = 2  # students' ways back kept per class: this times its seats, plus
#                              one, the oldest going first. A teacher's is never pushed out by
#                              joins (issue 45: 308 joins evicted it); it is one per teacher
#                              browser (keep_resume replaces a browser key's row), and only a
#                              browser that holds the class secret keeps one.


def _digest(*parts: str, size: int = 32) -> bytes:
    """SHAKE-256 of the parts, each ended by a zero byte (no two part lists give one input)."""
    return hashlib.shake_256(b"".join(p.encode() + b"\0" for p in parts)).digest(size)


def browser_key(role: str, token: str) -> str:
    """The store's key for this browser in this role (a hash: the token itself is not kept)."""
    return _digest("tinygpt resume key", role, token).hex()


def seal(secret: str, code: str, token: str) -> str:
    """The teacher secret XOR a keystream drawn from the browser's token (hex); `unseal` with
    the same token gives it back, any other token gives garbage (refused by the class)."""
    data = secret.encode()
    stream = _digest("tinygpt seal", code, token, size=len(data))
    return bytes(a ^ b for a, b in zip(data, stream, strict=True)).hex()


def unseal(sealed: str, code: str, token: str) -> str | None:
    """The secret sealed with `token`, or None when it is not text (another token)."""
    try:
        data = bytes.fromhex(sealed)
    except ValueError:
        return None
    stream = _digest("tinygpt seal", code, token, size=len(data))
    try:
        return bytes(a ^ b for a, b in zip(data, stream, strict=True)).decode("ascii")
    except UnicodeDecodeError:
        return None


def _max_per_class(room: cr.Classroom) -> int:
    return RESUMES_PER_STUDENT_SEAT * room.limits.max_students + 1


def keep_teacher(room: cr.Classroom, code: str, secret: str, token: str) -> None:
    """Let this browser resume teaching `code` after a reload (the session has checked the
    secret). Raises ClassError when the class is gone."""
    room.store.keep_resume(browser_key(TEACHER, token), code, seal(secret, code, token),
                           room.clock(), _max_per_class(room), evictable=False)


def teacher_for_browser(room: cr.Classroom, token: str) -> tuple[str, str] | None:
    """(code, secret) of the live class this browser teaches, or None (never kept, revoked,
    class ended, or another browser's token: the unsealed secret is refused)."""
    kept = room.store.resume_of(browser_key(TEACHER, token), room.clock())
    if kept is None:
        return None
    code, sealed = kept
    secret = unseal(sealed, code, token)
    if secret is None:
        return None
    try:
        room.teacher_view(code, secret)  # the class checks the secret (and is alive)
    except cr.ClassError:
        return None
    return code, secret


def keep_student(room: cr.Classroom, code: str, token: str) -> None:
    """Let this browser come back to its seat in `code` after a reload."""
    room.store.keep_resume(browser_key(STUDENT, token), code, "", room.clock(),
                           _max_per_class(room))


def student_for_browser(room: cr.Classroom, token: str) -> tuple[str, str] | None:
    """(code, student id) of the live class where this browser has a seat, or None."""
    kept = room.store.resume_of(browser_key(STUDENT, token), room.clock())
    if kept is None:
        return None
    code = kept[0]
    try:  # still seated? (a full class may have given the seat away)
        student = room.student_for_browser(code, token)
    except cr.ClassError:
        return None
    return (code, student) if student else None


def forget(room: cr.Classroom, role: str, token: str) -> None:
    """Revoke this browser's way back in `role` (the class goes on)."""
    room.store.drop_resume(browser_key(role, token))
