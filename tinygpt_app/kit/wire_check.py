"""Widget values as they arrive from the browser, checked before any code reads them.

A browser sends each widget's value as one field of a WidgetState message: a selectbox as
text, a slider as a list of numbers, a checkbox as a boolean. Anyone can write those messages
over the websocket instead of clicking, with another field than the widget's own (a number for
a selectbox, text for a slider). Streamlit then hands the stray value to the widget's
deserializer, or fails to write it back, on every later run: that session stayed broken
("TypeError: must be real number, not str") until it was closed.

`install` wraps the one place Streamlit turns a received value into a Python value
(WStates.__getitem__). A value sent in another field than the widget's, or one its
deserializer refuses, is dropped: the widget is as if nothing had been sent (it keeps its
previous value, or the value the page gives it), and the page says so in plain text
(`take_refused`). The values
that pass have the widget's own type; their range is checked by the page's parser
(tinygpt_app.kit.state.control).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.state.session_state import Serialized, WStates

MAX_SESSIONS = 1_000  # sessions whose refusals wait to be said (oldest forgotten first)
MAX_PER_SESSION = 20  # refused widgets remembered per session until the page says them

_refused: OrderedDict[str, set[str]] = OrderedDict()  # session id -> widget keys
_lock = threading.Lock()
_original = WStates.__getitem__


def install() -> None:
    """Check every received widget value from now on (once per process; cheap to repeat)."""
    if WStates.__getitem__ is not _checked_getitem:
        WStates.__getitem__ = _checked_getitem


def take_refused() -> list[str]:
    """The keys of this session's widgets whose sent value was dropped since the last call."""
    with _lock:
        return sorted(_refused.pop(_session(), set()))


class _Dropped(Serialized):
    """A sent value that was refused: read as "nothing sent" (KeyError), so Streamlit goes on
    with the widget's previous value (its default on a first run), as it does for a value
    sent to a disabled widget."""


def _checked_getitem(self: WStates, k: str):
    wstate = self.states.get(k)
    if isinstance(wstate, _Dropped):
        raise KeyError(k)
    if not isinstance(wstate, Serialized):
        return _original(self, k)  # absent (KeyError) or already a Python value
    metadata = self.widget_metadata.get(k)
    sent = wstate.value.WhichOneof("value")
    expected = metadata.value_type if metadata is not None else None
    if sent is not None and expected is not None and sent != expected:
        _drop(self, k)  # e.g. text for a slider: no deserializer expects it
    try:
        return _original(self, k)
    except KeyError:
        raise
    except Exception:  # noqa: BLE001 - the deserializer refused what was sent
        _drop(self, k)


def _drop(states: WStates, widget_id: str) -> None:
    """Mark the sent value refused (replaced, not removed: Streamlit may be looping over the
    states), remember to say so, and raise KeyError: no value was sent."""
    states.states[widget_id] = _Dropped(WidgetState(id=widget_id))
    key = widget_id.split("-", 2)[-1] if widget_id.startswith("$$ID-") else "a control"
    with _lock:
        keys = _refused.setdefault(_session(), set())
        _refused.move_to_end(_session())
        if len(keys) < MAX_PER_SESSION:
            keys.add(key[:80])
        while len(_refused) > MAX_SESSIONS:
            _refused.popitem(last=False)
    raise KeyError(widget_id)


def _session() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx else ""
