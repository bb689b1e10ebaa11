"""Optional features of every page, plugged into the page frame from outside.

The frame (kit.frame) knows no feature by name: it runs whatever is registered here at fixed
points of a page run. The live class is one such feature: the hosting wing registers it when
tinygpt_app.host finds the wing installed, and nothing in the app imports the wing
(tests/test_import_contracts.py checks it). Without it, every page works alone.

    before_page()      first thing in a run, before the page config (may switch page)
    sidebar_note()     a note drawn instead of the page menu, or None to draw the menu
    after_sidebar(s)   once the sidebar is drawn, with the page's state (a bar, a banner)
    after_page()       when the page body has drawn everything (its controls are known)
    leads_others()     does this tab lead other tabs (a teacher: a full CPU share)?
    open_question()    the kind of a question still open ("next_token", "attention"), whose
                       answer the pages hold back until the reveal, or None
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _nothing(*_: Any) -> None:
    return None


def _no() -> bool:
    return False


@dataclass(frozen=True)
class PageHooks:
    """What one feature adds to every page; each part is optional."""

    before_page: Callable[[], None] = _nothing
    sidebar_note: Callable[[], str | None] = _nothing
    after_sidebar: Callable[[Any], None] = _nothing  # gets the page's kit.state.AppState
    after_page: Callable[[], None] = _nothing
    leads_others: Callable[[], bool] = _no
    open_question: Callable[[], str | None] = _nothing


_registered: dict[str, PageHooks] = {}
_lock = threading.Lock()


def register(name: str, hooks: PageHooks) -> None:
    """Plug `hooks` in under `name` (registering the same name again replaces it)."""
    with _lock:
        _registered[name] = hooks


def unregister(name: str) -> None:
    with _lock:
        _registered.pop(name, None)


def registered() -> list[PageHooks]:
    """The hooks to run, in the order they were registered."""
    with _lock:
        return list(_registered.values())


def open_questions() -> set[str]:
    """The kinds of the questions open in this run's features (empty: nothing to hold back)."""
    return {kind for kind in (f.open_question() for f in registered()) if kind}
