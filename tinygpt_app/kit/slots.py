"""What one session keeps beside its view, in typed slots: the only door to st.session_state.

Outside `tinygpt_app/kit/` no module, page or `app.py` names `st.session_state`
(tests/test_layout.py checks it): a page or the live class declares each value it keeps as a
`Slot` (a fixed key, a default, a bound in bytes) and reads and writes it through the slot, and
reads a widget's value by its fixed key through `widget_value`. The view itself (prompt, model,
position, page controls) is kit.state's.

Every slot is bounded in bytes (as `compute.shared_cache.nbytes_of` weighs it): a value heavier
than its slot's bound is refused (ValueError) before it is kept, so a session's memory is
bounded at its sources, slot by slot (kit.state.SESSION_STATE_BYTES, all of them together).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import streamlit as st

from tinygpt_app.compute import models
from tinygpt_app.compute.shared_cache import nbytes_of

T = TypeVar("T")
SLOT_BYTES = 4 * 2**10  # a slot's bound unless it says otherwise: a flag, an id, a short text
_DECLARED: dict[str, Slot] = {}  # every slot by its key, as its module declared it


class Slot(Generic[T]):
    """One value of this session under a fixed key ("class.code"), at most `max_bytes`."""

    def __init__(self, key: str, default: T, *, max_bytes: int = SLOT_BYTES) -> None:
        self.key, self.default, self.max_bytes = key, default, max_bytes
        _DECLARED[key] = self

    def __repr__(self) -> str:
        return f"Slot({self.key!r})"

    def get(self) -> T:
        """This session's value, or the slot's default."""
        return st.session_state.get(self.key, self.default)

    def is_set(self) -> bool:
        return self.key in st.session_state

    def set(self, value: T) -> T:
        """Keep `value` in this session (ValueError when it weighs more than the slot's bound)."""
        weight = nbytes_of(value)
        if weight > self.max_bytes:
            raise ValueError(f"{self.key} holds at most {self.max_bytes:,} bytes, not {weight:,}")
        st.session_state[self.key] = value
        return value

    def pop(self) -> T:
        """This session's value (or the default), now forgotten."""
        return st.session_state.pop(self.key, self.default)

    def setdefault(self, make: Callable[[], T]) -> T:
        """This session's value, first kept as `make()` when there is none (for a dict or a
        list the caller then fills: its bound is checked at the slot's next `set`)."""
        if self.key not in st.session_state:
            self.set(make())
        return st.session_state[self.key]


def declared_bounds() -> dict[str, int]:
    """Every slot declared so far, by its key, with its bound in bytes: together, the most a
    session keeps in its slots (kit.state.SESSION_STATE_BYTES holds them; a test adds them up)."""
    return {key: slot.max_bytes for key, slot in _DECLARED.items()}


def widget_value(key: str, default: object = None) -> object:
    """The value of the widget with fixed key `key` (read in its callback), or `default`."""
    return st.session_state.get(key, default)


def set_widget(key: str, value: object) -> None:
    """Set the widget with fixed key `key` to `value` before it is drawn (or in a callback)."""
    st.session_state[key] = value


def forget_all(prefix: str) -> None:
    """Forget every value this session keeps under keys starting with `prefix` ("class.")."""
    for key in [k for k in st.session_state if str(k).startswith(prefix)]:
        del st.session_state[key]


# The models trained in this session, id -> (model, tokenizer): compute.models keeps them here,
# their weights bounded together by its SESSION_MODEL_BYTES (newest_within; a model's own
# weight is not what nbytes_of sees), so the slot's bound is on the rest.
SESSION_MODELS: Slot[dict] = Slot("_session_models", {})
models.keep_session_models_in(SESSION_MODELS)
