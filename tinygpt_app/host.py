"""What the app asks of the server it runs on: one user by default, a whole class when the
hosting wing (the package `tinygpt_hosting`) is installed.

The app never imports the wing. `load_wing()` (app.py and tinygpt_app.launch call it, once per
process) looks for `tinygpt_hosting.plug` and calls its `register()`, which puts a `Host` here
and the live class's page hooks in kit.hooks; without the package the defaults below stay, and
every page works for one user:

    configure_process()   the process's server settings (the wing: the door on new sessions,
                          Streamlit's config kept between reruns); one user: nothing
    before_serving()      what must be in place before the server's first request (the wing:
                          the door on new sessions; tinygpt_app.launch calls it)
    class_page()          draws the Class page (the wing: the live class); None: the page says
                          in one line that class mode is not installed
    turn()                a page run's fair turn of the processor (kit.frame); one user: none
    hurry()               this run answers the student's own click on words to come (a write
                          button's callback, before the turn): the wing lets its turn go first;
                          one user: nothing to go before
    outside_the_line()    waiting for another session's work without holding a page slot
    run_cost()            the CPU account of this page run (helper threads add to it), or None
    steps                 what prompt reads and generations step through together (a
                          tinygpt_hosting.steps.lockstep.SharedSteps), or None: alone
    generate_runs(...)    several generations of one prompt: the wing steps them together in
                          one batch; one user: one tinygpt.decoding.generate after the other
                          (the same tokens, tests/tinygpt_app/test_host.py)
    read_off_longer(...)  a shorter run read off a longer cached one of the same settings, or
                          None (one user: always made)
    address_key(ip)       the key of a client address that caps apply to (one user: "")
    streamlit             Streamlit beyond its public API (tinygpt_hosting.streamlit_internals,
                          the one module that uses it); one user: `PublicOnly`, every such
                          feature off, as when a Streamlit upgrade removes what it needs
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tinygpt.decoding.generation import GenerationResult, PromptRead, Run, generate

WING = "tinygpt_hosting.plug"


def _nothing(*_: Any, **__: Any) -> None:
    return None


def _one_address(_: str | None) -> str:
    return ""


def generate_one_by_one(model: Any, ids: np.ndarray, runs: Sequence[Run],
                        prompt: PromptRead | None = None, *,
                        on_thread_cpu: Callable[[float], None] | None = None,
                        on_step: Callable[[list[np.ndarray]], None] | None = None,
                        ) -> list[GenerationResult]:
    """Each of `runs` on `ids` (T,), one tinygpt.decoding.generate after the other, each from a
    copy of the prompt's keys and values. One user has nobody to step with; the runs' CPU is
    this thread's own and nothing is shown while they run (on_thread_cpu, on_step unused)."""
    return [generate(model, ids, prompt=prompt, **asdict(run)) for run in runs]


class PublicOnly:
    """Streamlit through its public API only: every feature that needs more is off, and says
    what the app does without it (the same answers as tinygpt_hosting.streamlit_internals
    gives when a Streamlit upgrade removed a name it needs)."""

    def check(self) -> dict[str, str]:
        return {}  # nothing to look up: nothing beyond the public API is used

    def session_id(self) -> str:
        return ""  # one user: one session, nothing keyed on it

    def script_path_of_this_run(self) -> str:
        return ""  # a page file run on its own is taken for Home

    def leave_pages_directory_mode(self) -> bool:
        return False  # a fresh server's first deep link runs its page file alone

    def page_hash(self, page: object) -> str | None:
        return None

    def session_counts(self) -> tuple[int, int] | None:
        return None  # not known: the shared caches never freeze the start-up objects

    def drop_expired_sessions(self, wait: float = 1.0) -> int:
        return 0  # Streamlit drops them itself, when new sessions arrive

    def session_alive(self, session_id: str) -> bool | None:
        return None  # nobody can tell: a training goes on to its end

    def install_widget_check(self, fits: Callable[[str | None, str | None], bool],
                             on_refused: Callable[[str], None]) -> bool:
        return False  # Streamlit reads each widget value itself


@dataclass(frozen=True)
class Host:
    """The server the app runs on (see the module's docstring); the defaults serve one user."""

    name: str = "one user"
    configure_process: Callable[[], None] = _nothing
    before_serving: Callable[[], None] = _nothing
    class_page: Callable[[], None] | None = None
    turn: Callable[[], AbstractContextManager[None]] = nullcontext
    hurry: Callable[[], None] = _nothing
    outside_the_line: Callable[[], AbstractContextManager[None]] = nullcontext
    run_cost: Callable[[], Any] = _nothing
    steps: Any = None
    generate_runs: Callable[..., list[GenerationResult]] = generate_one_by_one
    read_off_longer: Callable[[GenerationResult, Run, Run, int],
                              GenerationResult | None] = _nothing
    address_key: Callable[[str | None], str] = _one_address
    streamlit: Any = field(default_factory=PublicOnly)


ONE_USER = Host()
_host = ONE_USER
_lock = threading.Lock()
_wing_loaded: bool | None = None  # None: not looked for yet


def host() -> Host:
    """The server the app runs on now."""
    return _host


def install(new: Host) -> None:
    """Put `new` in place (the wing's register(); a test puts ONE_USER back)."""
    global _host
    _host = new


def load_wing() -> bool:
    """Plug in the hosting wing if it is installed (looked for once per process); False: the
    app serves one user. A wing that is present but fails to import is an error, not absence."""
    global _wing_loaded
    with _lock:
        if _wing_loaded is None:
            try:
                plug = importlib.import_module(WING)
            except ModuleNotFoundError as err:
                if err.name not in ("tinygpt_hosting", WING):
                    raise  # something the wing needs is missing: say so
                _wing_loaded = False
            else:
                plug.register()
                _wing_loaded = True
        return _wing_loaded


def wing_loaded() -> bool:
    """Is the hosting wing plugged in (a live class possible)?"""
    return bool(_wing_loaded)
