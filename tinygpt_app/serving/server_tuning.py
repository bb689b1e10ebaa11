"""Streamlit's own per-rerun costs that a classroom server does not need to pay every time.

Streamlit opens every rerun (a click, a heartbeat, a pushed follow) with a `new_session`
message, and builds its theme part from scratch: six config sections, each one a scan of all
~200 config options under the config lock. Profiled with py-spy (GIL samples) on a server with
30 students following the teacher, that scan was 17% of the process's CPU.

The config does not change while the server runs (file watching is off in
.streamlit/config.toml), so `keep_config_sections` remembers each section's options, and the
theme and config parts of that message once built, and forgets them whenever Streamlit parses
its config again. Callers get a copy, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_kept: dict[str, dict[str, Any]] = {}
_built: dict[str, Any] = {}  # section -> the protobuf message Streamlit built from it
_lock = threading.Lock()
_installed = False


def keep_config_sections() -> None:
    """Make streamlit.config.get_options_for_section remember its answers (once per process)."""
    global _installed
    from streamlit import config
    from streamlit.runtime import app_session

    with _lock:
        if _installed:
            return
        scan = config.get_options_for_section

        def get_options_for_section(section: str) -> dict[str, Any]:
            options = _kept.get(section)
            if options is None:
                options = _kept[section] = scan(section)
            return dict(options)

        config.get_options_for_section = get_options_for_section
        app_session._populate_theme_msg = _built_once(app_session._populate_theme_msg)
        app_session._populate_config_msg = _built_once(app_session._populate_config_msg)
        config.on_config_parsed(_forget, force_connect=True)
        _installed = True


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
