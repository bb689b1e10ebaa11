"""What the page frame says besides the page itself: one warning when the model's numbers are
meaningless, and the short error box for an unexpected error, whose traceback goes to the log
once per kind and interval (with a count), so that no client can fill the log.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback

import streamlit as st

from tinygpt_app.compute import health
from tinygpt_app.compute.models import model_version
from tinygpt_app.kit.plain_text import cut, plain, without_paths
from tinygpt_app.kit.state import AppState

log = logging.getLogger("tinygpt.app")

ERROR_CHARS = 200  # an error's message on the page and in the log is cut to this
NUMBERS_WARNING = ("This model's numbers are meaningless: its activations overflow float32 "
                   "(they become infinite or not a number), so every chart and value on this "
                   "page is noise. Its weights are probably far too large; pick another model.")


def numbers_warning(state: AppState) -> None:
    """One plain warning when this model's runs overflow (tinygpt_app.compute.health)."""
    verdict = health.model_health(state.model_id, model_version(state.model_id), state.model)
    if not verdict.ok:
        st.warning(NUMBERS_WARNING)


def page_error(err: Exception) -> None:
    """The short error box for a page that failed, and its traceback in the log (throttled)."""
    TRACEBACKS.report(err)
    st.error(f"Sorry, this view could not be drawn ({type(err).__name__}: "
             f"{plain(cut(without_paths(err), ERROR_CHARS))}).")


class ThrottledTracebacks:
    """Logs an error's traceback once per kind (exception type and the line that raised it)
    and interval; repeats are counted and logged as one line when the interval is over.

    Bounded whatever the clients send: at most `max_kinds` tracebacks per interval (more kinds
    are only counted), each message cut to ERROR_CHARS.
    """

    def __init__(self, interval: float = 60.0, max_kinds: int = 50,
                 clock=time.monotonic) -> None:
        self.interval, self.max_kinds, self.clock = interval, max_kinds, clock
        self._lock = threading.Lock()
        self._started = clock()
        self._counts: dict[tuple[str, str], int] = {}  # kind -> repeats this interval
        self._uncounted = 0  # errors of kinds beyond max_kinds this interval

    def report(self, err: BaseException) -> None:
        with self._lock:
            self._roll_over()
            kind = _kind(err)
            if kind in self._counts:
                self._counts[kind] += 1
                return
            if len(self._counts) >= self.max_kinds:
                self._uncounted += 1
                return
            self._counts[kind] = 0
        tb = "".join(traceback.format_tb(err.__traceback__))
        log.error("page error: %s: %s\n%s", type(err).__name__,
                  cut(without_paths(err), ERROR_CHARS), tb)

    def _roll_over(self) -> None:
        """At the end of an interval, one line for the repeats it counted; then start anew."""
        now = self.clock()
        if now - self._started < self.interval:
            return
        for (name, where), repeats in self._counts.items():
            if repeats:
                log.error("page error %s at %s repeated %d more times in %.0f s", name, where,
                          repeats, now - self._started)
        if self._uncounted:
            log.error("%d more page errors of other kinds in %.0f s", self._uncounted,
                      now - self._started)
        self._started, self._counts, self._uncounted = now, {}, 0


def _kind(err: BaseException) -> tuple[str, str]:
    """(exception type, file:line where it was raised): the message may hold user text."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
    return type(err).__name__, where


TRACEBACKS = ThrottledTracebacks()
