"""User text inside the app's markdown, shown as typed and never rendered as markdown.

Streamlit renders markdown in st.markdown, st.warning, st.error, st.caption, subheaders and
widget labels. Text a user controls (a prompt's tokens, a link's value, a model's nickname, a
file name, an error message) goes through ``plain`` first: every ASCII punctuation character
is backslash-escaped (CommonMark allows that for all of them), so ``[x](https://...)`` stays
text, ``![t](...)`` fetches nothing, ``$`` starts no formula, ``:red[...]`` colours nothing and
``https://...`` becomes no link.
"""

from __future__ import annotations

import re

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def plain(text: object) -> str:
    """`text` escaped for markdown: it renders exactly as typed (newlines become spaces)."""
    flat = " ".join(str(text).splitlines())
    return _PUNCTUATION.sub(r"\\\1", flat)


_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s'\"/:]+/)+([^\s'\"/:]*)")


def without_paths(text: object) -> str:
    """`text` with every absolute path cut to its last part ("/srv/app/models/x.npz" -> "x.npz"),
    so that no message on a page tells a student where the server keeps its files."""
    return _ABSOLUTE_PATH.sub(lambda m: m.group(1) or "…", str(text))


ECHO_CHARS = 80  # user text repeated in a message (a model's name, a value) is cut to this


def cut(text: object, limit: int = ECHO_CHARS) -> str:
    """`text` cut to `limit` characters (with "…" when cut): a message repeats what a user
    sent, but a 10 MB model name must not become a 10 MB error box."""
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "…"
