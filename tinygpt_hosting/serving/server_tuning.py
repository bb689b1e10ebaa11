"""Streamlit's own per-rerun costs that a classroom server does not need to pay every time.

Streamlit opens every rerun (a click, a heartbeat, a pushed follow) with a `new_session`
message, and builds its theme part from scratch: six config sections, each one a scan of all
~200 config options under the config lock. Profiled with py-spy (GIL samples) on a server with
30 students following the teacher, that scan was 17% of the process's CPU.

The config does not change while the server runs (file watching is off in
.streamlit/config.toml), so `keep_config_sections` remembers each section's options, and the
theme and config parts of that message once built, and forgets them whenever Streamlit parses
its config again. Callers get a copy, as before.

Those are Streamlit internals: `streamlit_internals.patch_config_reads` applies the patch, all
or nothing; if a name is missing after an upgrade, Streamlit keeps scanning (slower, correct).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tinygpt_hosting import streamlit_internals

_kept: dict[str, dict[str, Any]] = {}
_built: dict[str, Any] = {}  # section -> the protobuf message Streamlit built from it
_lock = threading.Lock()
_undo: Callable[[], None] | None = None  # set while the patch is installed


def keep_config_sections() -> bool:
    """Make Streamlit's config reads remember their answers (once per process); False when
    Streamlit lacks what this needs (then nothing changes)."""
    global _undo
    with _lock:
        if _undo is None:
            _undo = streamlit_internals.patch_config_reads(_kept_sections, _built_once, _forget)
        return _undo is not None


def _kept_sections(scan: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    """get_options_for_section(section) that scans each section once, then hands out copies."""
    def get_options_for_section(section: str) -> dict[str, Any]:
        options = _kept.get(section)
        if options is None:
            options = _kept[section] = scan(section)
        return dict(options)

    return get_options_for_section


def _built_once(populate: Callable[..., None]) -> Callable[..., None]:
    """populate(msg, *section) fills `msg` from the config: fill a fresh message once per
    section, then copy it in."""
    def populate_from_kept(msg: Any, *section: str) -> None:
        key = f"{populate.__name__}:{section}"
        built = _built.get(key)
        if built is None:
            built = type(msg)()
            populate(built, *section)
            _built[key] = built
        msg.MergeFrom(built)

    return populate_from_kept


def _forget() -> None:
    _kept.clear()
    _built.clear()
