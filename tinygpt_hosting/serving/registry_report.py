"""What the process keeps per session and per browser, written to a file for a bench to read.

Issue 26 asks that, two minutes after an attack, the app's own registries (CPU buckets, busy
sessions per address, Streamlit's sessions) are back to their level and the memory given back.
A bench cannot look inside the server process, so when TINYGPT_REGISTRY_REPORT names a file,
a daemon thread appends one JSON line to it every `every` seconds: each registry's size, and
the resident memory after asking the C allocator to give freed memory back (glibc's
malloc_trim: without it, freed blocks stay counted in RSS and a bound cannot be seen). Off
unless that variable is set (bench/hostile.py sets it); never shown to a browser.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tinygpt_app.compute.shared_cache import malloc_trim  # the janitor's, after a sweep


def rss_mb(pid: int | str = "self") -> float:
    """A process's resident memory now (MB), from Linux's /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def trimmed_rss_mb() -> float:
    """This process's resident memory (MB) after malloc_trim(0) (glibc; elsewhere, as is)."""
    malloc_trim()
    return rss_mb()


def snapshot(registries: dict[str, Callable[[], object]]) -> dict:
    """One line of the report: the time, each registry's size, the trimmed RSS."""
    line: dict[str, object] = {"time": time.time()}
    for name, size in registries.items():
        try:
            line[name] = size()
        except Exception as err:  # noqa: BLE001 - a report must not stop the server
            line[name] = f"unavailable: {type(err).__name__}"
    line["rss_trimmed_mb"] = round(trimmed_rss_mb(), 1)
    return line


def start(path: str, registries: dict[str, Callable[[], object]],
          every: float = 5.0) -> threading.Thread:
    """Append a snapshot to `path` every `every` seconds, from a daemon thread."""

    def report() -> None:
        while True:
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(snapshot(registries)) + "\n")
            time.sleep(every)

    thread = threading.Thread(target=report, name="tinygpt-registry-report", daemon=True)
    thread.start()
    return thread
