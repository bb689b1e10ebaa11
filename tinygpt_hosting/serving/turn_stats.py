"""Where page runs spend their time, per address group: what a bench reads to see who waits.

Issue 26's bench measures the class's latency from outside; this says, from inside, where it
went: seconds a group's runs waited for their turn (their own bucket, their address's newcomer
pool, the heavy tabs' shared bucket), seconds waited in the Admission line for a page slot, the
wall time of their turns, and the CPU seconds charged to them, beside the process's own CPU
time, so that what is charged to nobody (Streamlit's sessions, the door, sending the pages)
shows. Off unless TINYGPT_REGISTRY_REPORT names a file (the registry report writes it);
counters only, a few per group, and at most MAX_GROUPS groups (the rest add up as "other").
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

MAX_GROUPS = 64  # address groups counted one by one; a flood of addresses goes to "other"
FIELDS = ("runs", "newcomer_runs", "waited_own_s", "waited_pool_s", "waited_heavy_s",
          "waited_line_s", "turn_s", "cpu_charged_s", "long_waits")
LONG_WAIT = 1.0  # seconds: a run that waited this long for its turn (fair_turn) is a long wait


class TurnStats:
    """Cumulative counters per address group; thread-safe."""

    def __init__(self, max_groups: int = MAX_GROUPS) -> None:
        self.max_groups = max_groups
        self.on = False  # set when a report is written: nothing is counted otherwise
        self._groups: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(FIELDS, 0.0))
        self._lock = threading.Lock()

    def add(self, group: str, **seconds: float) -> None:
        """Add to `group`'s counters (names from FIELDS)."""
        if not self.on:
            return
        with self._lock:
            if group not in self._groups and len(self._groups) >= self.max_groups:
                group = "other"
            counters = self._groups[group]
            for name, value in seconds.items():
                counters[name] += value

    def snapshot(self) -> dict:
        """The counters (rounded), the process's CPU seconds so far, and of them the main
        thread's: the server's event loop (handshakes, pages sent, sessions made and closed)."""
        with self._lock:
            groups = {g: {k: round(v, 3) for k, v in c.items()} for g, c in self._groups.items()}
        charged = sum(c["cpu_charged_s"] for c in groups.values())
        return {"groups": groups, "cpu_charged_s": round(charged, 2),
                "process_cpu_s": round(time.process_time(), 2),
                "loop_cpu_s": round(main_thread_cpu_seconds(), 2)}


def main_thread_cpu_seconds() -> float:
    """CPU seconds of the process's main thread, where `streamlit run` runs its event loop
    (Linux and macOS: a thread's CPU clock; 0.0 where there is none)."""
    try:
        clock = time.pthread_getcpuclockid(threading.main_thread().ident or 0)
        return time.clock_gettime(clock)
    except (AttributeError, OSError):
        return 0.0


STATS = TurnStats()
