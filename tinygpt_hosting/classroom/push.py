"""Push instead of poll: one watcher per server process wakes its students when their class
changes, so a following student takes the teacher's new view within a fraction of a second.

Without it, every student's app asks the class store for news on its own timer (the heartbeat
in live_class): sixty students polling every second are sixty page reruns a second, and a change
still waits up to a whole interval to be seen. Here each process reads one `Pulse` per class a
ten times a second (a read-only query) and asks Streamlit to rerun exactly the sessions whose
class moved on. The heartbeat remains, slower, as the safety net and the "still here" signal.

Waking a session is Streamlit's own "run on save" step (`streamlit_internals.wake_session`,
injected here as `wake`): if a future Streamlit lacks what it uses, nothing is woken and the
heartbeat carries on.

    watch(session, code, pulse, following=...)   a student's run says what it has drawn
    forget(session)                               the student left the class
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tinygpt_hosting.classroom.store import ClassError, Pulse

_LOGGER = logging.getLogger(__name__)
MAX_WATCHED = 5_000  # sessions one process watches (a few hundred bytes each)


@dataclass
class _Watched:
    code: str
    drawn: Pulse  # what the session's last run took from its class
    following: bool
    seen_at: float  # when the session last said so (monotonic)
    # The news it was last woken for. A session is woken once per change: woken again while its
    # run still waits in the admission line, the run would start over at the back of the line.
    # A wake that got lost is made up for by the session's own heartbeat.
    woken_for: Pulse | None = None


def needs_waking(drawn: Pulse, now: Pulse, following: bool) -> bool:
    """A following student needs every new teacher view; every student needs a new or revealed
    round (its class bar shows it)."""
    if following and now.version != drawn.version:
        return True
    return (now.rounds, now.revealed) != (drawn.rounds, drawn.revealed)


class Watcher:
    """The sessions of this process that are in a class, and the thread that wakes them.

    `read_pulse(code)` reads the store; `wake(session_id, code, pulse, following) -> bool` asks
    for a rerun (False: the session is gone). Both are injected, so tests drive `tick()` by hand.
    """

    def __init__(self, read_pulse: Callable[[str], Pulse],
                 wake: Callable[[str, str, Pulse, bool], bool], *,
                 interval: float, forget_after: float) -> None:
        self._read_pulse, self._wake = read_pulse, wake
        self.interval, self.forget_after = interval, forget_after
        self._watched: dict[str, _Watched] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, session_id: str, code: str, drawn: Pulse, *, following: bool) -> None:
        with self._lock:
            if session_id not in self._watched and len(self._watched) >= MAX_WATCHED:
                return  # full: this session keeps its heartbeat only
            watched = _Watched(code, drawn, following, time.monotonic())
            old = self._watched.get(session_id)
            if old is not None and old.drawn == drawn:  # nothing taken since it was woken
                watched.woken_for = old.woken_for
            self._watched[session_id] = watched
            self._start_locked()

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._watched.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._watched)

    def tick(self) -> int:
        """One look at every watched class; returns how many sessions were woken."""
        now = time.monotonic()
        with self._lock:
            for session_id in [sid for sid, w in self._watched.items()
                               if now - w.seen_at > self.forget_after]:
                del self._watched[session_id]  # no run for a long time: the tab is gone
            by_code: dict[str, list[tuple[str, _Watched]]] = defaultdict(list)
            for session_id, watched in self._watched.items():
                by_code[watched.code].append((session_id, watched))
        woken = 0
        for code, sessions in by_code.items():
            try:
                pulse = self._read_pulse(code)
            except ClassError:
                continue  # the class ended or the store is away: the heartbeat will say so
            for session_id, watched in sessions:
                if needs_waking(watched.drawn, pulse, watched.following) \
                        and watched.woken_for != pulse:
                    watched.woken_for = pulse
                    if self._wake(session_id, code, pulse, watched.following):
                        woken += 1
                    else:
                        self.forget(session_id)
        return woken

    def _start_locked(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="tinygpt-class-push",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the watcher must outlive any one bad tick
                _LOGGER.exception("class push: a tick failed")

