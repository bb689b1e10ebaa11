"""Widget values as they arrive from the browser, checked before any code reads them.

A browser sends each widget's value as one field of a WidgetState message: a selectbox as
text, a slider as a list of numbers, a checkbox as a boolean. Anyone can write those messages
over the websocket instead of clicking, with another field than the widget's own (a number for
a selectbox, text for a slider). Streamlit then hands the stray value to the widget's
deserializer, or fails to write it back, on every later run: that session stayed broken
("TypeError: must be real number, not str") until it was closed.

`install` has Streamlit's one place that turns a received value into a Python value checked
(streamlit_internals.install_widget_check, the private part). A value sent in another field
than the widget's (`fits`), or one its deserializer refuses, is dropped: the widget is as if
nothing had been sent (it keeps its previous value, or the value the page gives it), and the
page says so in plain text (`take_refused`). The values that pass have the widget's own type;
their range is checked by the page's parser (tinygpt_app.kit.state.control).
"""

from __future__ import annotations

import threading

from tinygpt_app.compute.shared_cache import SharedCache
from tinygpt_app.host import host

REFUSED_BYTES = 2 * 2**20  # refusals waiting to be said, ~1,000 sessions' (oldest forgotten)
MAX_PER_SESSION = 20  # refused widgets remembered per session until the page says them
MAX_KEY_CHARS = 80  # a widget key as said on the page (the id comes from the browser)

_refused = SharedCache(REFUSED_BYTES)  # session id -> frozenset of widget keys
_lock = threading.Lock()


def install() -> bool:
    """Check every received widget value from now on (once per process; cheap to repeat).
    False when Streamlit's internals changed: the check is off and pages work without it."""
    return host().streamlit.install_widget_check(fits, remember_refused)


# Fields a widget's deserializer takes besides its own: Streamlit registers a number input as
# "double_value", but the browser sends an integer input's value as "int_value" (every student
# who opened the Softmax page after another saw its top-k and seed refused and reset).
ALSO_FITS = {("int_value", "double_value")}


def fits(sent: str | None, expected: str | None) -> bool:
    """Whether a value sent in field `sent` may go to a widget whose values use `expected`
    (None on either side: nothing to compare, the deserializer decides): the same field, or an
    integer for a number."""
    return sent is None or expected is None or sent == expected or (sent, expected) in ALSO_FITS


def widget_key(widget_id: str) -> str:
    """The page's key of a widget ("$$ID-<hash>-lesson.step" -> "lesson.step"), cut short."""
    key = widget_id.split("-", 2)[-1] if widget_id.startswith("$$ID-") else "a control"
    return key[:MAX_KEY_CHARS]


def remember_refused(widget_id: str) -> None:
    """Remember, for this session, that the value sent for `widget_id` was dropped."""
    session = host().streamlit.session_id()
    with _lock:  # read, add, put back: one session's keys as one entry, weighed when put
        keys = _refused.get(session, frozenset())
        if len(keys) < MAX_PER_SESSION:
            keys = keys | {widget_key(widget_id)}
        _refused.put(session, keys)


def take_refused() -> list[str]:
    """The keys of this session's widgets whose sent value was dropped since the last call."""
    with _lock:
        return sorted(_refused.pop(host().streamlit.session_id()) or ())
