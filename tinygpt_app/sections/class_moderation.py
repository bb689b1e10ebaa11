"""The teacher's moderation panel of a live class, as in the live-quiz tools teachers know:
lock the room, remove a player, hide the names from the projected screen.

It draws on the Class page for the teacher (pages/16_Class.py calls `panel`). What
it changes is kept by the class store, for every process of the app: a locked class takes
nobody new (the seated students stay, and a seated phone that reloads is no newcomer); a
removed student's browser cannot join this class again and its guesses are gone; hidden names
leave the roll call on the teacher's (projected) screen. Ending the class, the page's own
button, frees its slot now.

The panel knows nothing of the classroom: it gets a Moderator (classroom.moderation makes one).
Nicknames are text typed by students: shown as plain text only (option labels, st.text) or
escaped (kit.plain_text.plain) in a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import streamlit as st

from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot

KEY_LOCK, KEY_HIDE = "class.moderation.lock", "class.moderation.hide"
KEY_CHOICE = "class.moderation.choice"
DONE: Slot[str | None] = Slot("class.moderation.done", None)  # what the last removal did
KEY_SHOW_HERE = "class.moderation.show_here"


class Refused(Exception):
    """The class store refused (the class ended, ...): `str(error)` is a plain sentence."""


class SeatLike(Protocol):
    student: str
    nickname: str
    connected: bool


class ViewLike(Protocol):
    locked: bool
    names_hidden: bool


class Moderator(Protocol):
    def view(self) -> ViewLike: ...
    def seats(self) -> Sequence[SeatLike]: ...
    def lock(self, locked: bool) -> None: ...
    def hide_names(self, hidden: bool) -> None: ...
    def remove(self, student: str) -> None: ...


def panel(moderator: Moderator | None) -> None:
    """Lock, hide names and remove a student, in a closed expander (nothing is projected until
    the teacher opens it). Does nothing for a session that teaches no class."""
    if moderator is None:
        return
    try:
        view = moderator.view()
    except Refused as err:
        st.warning(plain(err))
        return
    with st.expander("Moderate the class: lock, hide names, remove a student"):
        _switches(moderator, view)
        _remove(moderator, view.names_hidden)
    if DONE.is_set():
        st.success(plain(DONE.pop()))


def teacher_key_input(needed: bool) -> str | None:
    """The teacher key field, when the server asks for one (TINYGPT_TEACHER_KEY)."""
    if not needed:
        return None
    return st.text_input("Teacher key", type="password", max_chars=200, key="class.teacher_key",
                         help="This server asks for a key to start a class: whoever runs it "
                              "has it.")


def _switches(moderator: Moderator, view: ViewLike) -> None:
    left, right = st.columns(2)
    locked = left.toggle("Lock the class (nobody new can join)", value=view.locked,
                         key=KEY_LOCK)
    hidden = right.toggle("Hide the nicknames on this screen", value=view.names_hidden,
                          key=KEY_HIDE)
    try:
        if locked != view.locked:
            moderator.lock(locked)
        if hidden != view.names_hidden:
            moderator.hide_names(hidden)
    except Refused as err:
        st.warning(plain(err))


def seat_label(number: int, seat: SeatLike, names_shown: bool) -> str:
    """How a seat is listed: its number, its nickname when names are shown, connected or not
    (plain text: a selectbox option is never read as markdown)."""
    name = f" · {seat.nickname}" if names_shown and seat.nickname else ""
    return f"Seat {number}{name}" + ("" if seat.connected else " (away)")


def _remove(moderator: Moderator, names_hidden: bool) -> None:
    try:
        seats = list(moderator.seats())
    except Refused as err:
        st.warning(plain(err))
        return
    if not seats:
        st.text("Nobody has joined yet.")
        return
    shown = not names_hidden or st.checkbox("Show the names in this list", key=KEY_SHOW_HERE)
    labels = {seat.student: seat_label(n, seat, shown) for n, seat in enumerate(seats, 1)}
    chosen = st.selectbox("Student", list(labels), format_func=labels.__getitem__,
                          key=KEY_CHOICE)
    if st.button("Remove this student", key="class.moderation.remove",
                 help="Their seat and answers go; this browser cannot join the class again."):
        try:
            moderator.remove(chosen)
        except Refused as err:
            st.warning(plain(err))
            return
        DONE.set(f"Removed {labels[chosen]}: that browser cannot join again.")
        st.rerun()
