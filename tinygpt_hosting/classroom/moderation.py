"""The teacher's moderation of a live class, for the panel in sections/class_moderation.py.

The panel knows nothing of the classroom (the sections sit below it): it gets a Moderator, this
module's SessionModerator, bound to this session's class and teacher secret. Refusals reach the
panel as class_moderation.Refused with the store's plain sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tinygpt_app.sections.class_moderation import Refused
from tinygpt_hosting.classroom import rules as cr
from tinygpt_hosting.classroom import session as live_class

T = TypeVar("T")


def _refused_plainly(call: Callable[[], T]) -> T:
    try:
        return call()
    except cr.ClassError as err:
        raise Refused(str(err)) from err


class SessionModerator:
    """The class this session teaches, with the teacher's secret (never shown)."""

    def __init__(self, room: cr.Classroom, code: str, secret: str) -> None:
        self._room, self._code, self._secret = room, code, secret

    def view(self) -> cr.TeacherView:
        return _refused_plainly(lambda: self._room.teacher_view(self._code, self._secret))

    def seats(self) -> tuple[cr.Seat, ...]:
        return _refused_plainly(lambda: self._room.seats(self._code, self._secret))

    def lock(self, locked: bool) -> None:
        _refused_plainly(lambda: self._room.lock(self._code, self._secret, locked))

    def hide_names(self, hidden: bool) -> None:
        _refused_plainly(lambda: self._room.hide_names(self._code, self._secret, hidden))

    def remove(self, student: str) -> None:
        _refused_plainly(lambda: self._room.remove_student(self._code, self._secret, student))


def for_this_session() -> SessionModerator | None:
    """The moderator of the class this session teaches; None when it teaches none."""
    if live_class.role() != "teacher":
        return None
    return SessionModerator(live_class.open_classroom(), live_class.code(),
                            live_class.SECRET.get())
