"""What a page says about its link: a value it could not use ("the link's value for top_p must
be at most 1, so top_p starts at 0.9"), a model that is not in the models folder.

A link is read once, on the first run of a page visit, but in a browser that first run is often
cut short (kit.browser_token's first report asks for a rerun), and what it drew goes with it.
So a note is kept for the rest of the visit and said again at the top of each later run of it:
the reader sees it whichever run finishes. At most MAX_NOTES notes, each cut to NOTE_CHARS.
"""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit.plain_text import cut, plain
from tinygpt_app.kit.slots import Slot

MAX_NOTES, NOTE_CHARS = 8, 300
# ((the page visit it belongs to, its text), ...): this visit's notes only
NOTES: Slot[tuple] = Slot("link.notes", (), max_bytes=(NOTE_CHARS + 100) * MAX_NOTES * 2)


def say(text: str, visit: object) -> None:
    """Say `text` (plain: it may hold what a link sent) now, and again on this visit's later
    runs; a note already kept for this visit was said at the top of this run (`repeat`)."""
    text = cut(text, NOTE_CHARS)
    kept = [(v, t) for v, t in NOTES.get() if v == visit]
    if (visit, text) in kept:
        return
    st.warning(plain(text))
    NOTES.set(tuple([*kept, (visit, text)][-MAX_NOTES:]))


def repeat(visit: object) -> None:
    """Say again the notes this page visit kept (its first run may not have been seen)."""
    for v, text in NOTES.get():
        if v == visit:
            st.warning(plain(text))
