"""The server's settings from the environment, and the process-wide settings they drive.

Every ``TINYGPT_*`` variable the app reads is read here, and only here, with one policy: a value
that is not of the right kind inside its range is ignored with a warning in the server log (once
per value) and the default is used, so a typo in a deployment never breaks a page. README.md's
caps table lists every one (tests/tinygpt_app/test_settings.py checks it).

Importing this module changes nothing. The app's entry point (``app.py``) calls
``configure_process()`` once; charts, notebooks and tests that import the package keep their
own thread and switch-interval settings.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from threadpoolctl import threadpool_limits

log = logging.getLogger("tinygpt.app")

# The defaults of a class server's limits (the hosting wing, tinygpt_hosting, applies them)
FAIR_SHARE = 0.10  # CPU seconds per second one session may use at most (a tenth of a core)
BURST_SECONDS = 10.0  # CPU seconds a session may use at once: some thirty views, a slider dragged
NEW_SESSIONS_BURST = 40  # new sessions an address may open at once
NEW_SESSIONS_PER_MINUTE = 30.0  # and then per minute

PACKAGE = Path(__file__).resolve().parent


def _app_folder() -> Path:
    """Where app.py, pages/, models/ and .streamlit/ are: their copy inside the installed
    package (tinygpt_app/_app, written by setup.py's build), else the repository's."""
    shipped = PACKAGE / "_app"
    return shipped if (shipped / "app.py").is_file() else PACKAGE.parent


ROOT = _app_folder()  # app.py, pages/, models/, .streamlit/config.toml (and runs/ by default)

_warned: set[tuple[str, str]] = set()  # (name, value): each bad value is logged once
_warned_lock = threading.Lock()


def _warn_once(name: str, shown: str, why: str, default: object) -> None:
    """Log that `name` is ignored, the first time this value is seen (a setting is read on
    every page run: one line per bad value, not one per click). `shown`: the value as it may
    be printed (a store address may hold a password, so its caller hides it)."""
    with _warned_lock:
        if (name, shown) in _warned or len(_warned) >= 256:  # bounded: a few names and values
            return
        _warned.add((name, shown))
    log.warning("%s=%s %s; using %s", name, shown, why, default)


def env_number(name: str, default: int | float | None, lo: float, hi: float,
               kind: type = int, environ: Mapping[str, str] | None = None) -> int | float | None:
    """The environment variable `name` as `kind` (int or float) within [lo, hi], or `default`.

    Unset or blank gives the default quietly; anything else that does not parse, is not
    finite, or is out of range gives the default with a warning in the server log.
    `environ`: where to read (default os.environ). A None default: the caller's own.
    """
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)  # int("1.5") and int("1e3") are refused: whole numbers only
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not lo <= value <= hi:
        _warn_once(name, repr(raw), f"is not a {kind.__name__} from {lo:g} to {hi:g}",
                   "the default" if default is None else default)
        return default
    return value


def blas_threads() -> int:
    """TINYGPT_BLAS_THREADS: BLAS threads per matrix product (default 1)."""
    return env_number("TINYGPT_BLAS_THREADS", 1, 1, 1024)


def switch_interval_ms() -> float:
    """TINYGPT_SWITCH_INTERVAL_MS: how often a thread holding the GIL must let go (default 0.5)."""
    return env_number("TINYGPT_SWITCH_INTERVAL_MS", 0.5, 0.01, 1000.0, float)


def trace_cache_bytes() -> int:
    """TINYGPT_TRACE_CACHE_MB: the byte budget of the shared trace cache (default 768 MB:
    7 GPT-2-small traces of 256 tokens at their largest, 108 MB each as lean Traces; with 1024
    a SmolLM2-135M-shaped folder's page walk peaked at 2.55 GB, with 768 at 2.29 GB)."""
    return env_number("TINYGPT_TRACE_CACHE_MB", 768, 1, 1_000_000) * 2**20


def figure_cache_bytes() -> int:
    """TINYGPT_FIGURE_CACHE_MB: the byte budget of the figures the sessions share (default 64
    MB; a page's figures are 0.05-1 MB)."""
    return env_number("TINYGPT_FIGURE_CACHE_MB", 64, 1, 100_000) * 2**20


def model_load_seconds() -> float:
    """TINYGPT_MODEL_LOAD_SECONDS: the time budget of one model load (default 60 s; a load
    that takes longer is refused and not tried again until its file changes:
    compute.models)."""
    return env_number("TINYGPT_MODEL_LOAD_SECONDS", 60.0, 0.1, 3600.0, float)


def max_trainings() -> int:
    """TINYGPT_MAX_TRAININGS: trainings running at once on the server (default 1; 0 = none)."""
    return env_number("TINYGPT_MAX_TRAININGS", 1, 0, 64)


def max_training_queue() -> int:
    """TINYGPT_MAX_TRAINING_QUEUE: students waiting in line for a training slot (default 60:
    a class or two; beyond it Start is refused with a note)."""
    return env_number("TINYGPT_MAX_TRAINING_QUEUE", 60, 0, 10_000)


def training_places_per_address() -> int:
    """TINYGPT_TRAINING_PLACES_PER_ADDRESS: places in the training line one client address may
    hold (default 4: a few students behind one school router; one student's many tabs cannot
    fill the line). The address is the TCP peer: behind a proxy (deploy/nginx.conf) every tab
    is 127.0.0.1, one address, so raise it there."""
    return env_number("TINYGPT_TRAINING_PLACES_PER_ADDRESS", 4, 1, 10_000)


def fair_share() -> float:
    """TINYGPT_FAIR_SHARE: the most CPU seconds per second one session may use on average
    before its runs wait their turn (default 0.1, a tenth of a core; 0 turns the waiting off).
    With many sessions each gets less: the process divided among them (fair_share)."""
    return env_number("TINYGPT_FAIR_SHARE", FAIR_SHARE, 0.0, 64.0, float)


def burst_seconds() -> float:
    """TINYGPT_BURST_SECONDS: CPU seconds a session may use at once after a quiet while
    (default 10)."""
    return env_number("TINYGPT_BURST_SECONDS", BURST_SECONDS, 0.1, 3600.0, float)


def sessions_per_address() -> int:
    """TINYGPT_SESSIONS_PER_ADDRESS: sessions (tabs, reloads within Streamlit's
    disconnectedSessionTTL) one client address may keep busy; beyond, a new tab gets a short
    note instead of a page (default 200: a class of 60 behind one router, a few tabs each; the
    server's own machine is not counted)."""
    return env_number("TINYGPT_SESSIONS_PER_ADDRESS", 200, 1, 1_000_000)


def new_sessions() -> tuple[int, float]:
    """(TINYGPT_NEW_SESSIONS_BURST, TINYGPT_NEW_SESSIONS_PER_MINUTE): new sessions one client
    address may open at once (default 40) and then per minute (default 30); beyond, the
    websocket is closed before Streamlit makes a session (serving.session_door). 40 + 30 a
    minute: a class of 60 phones behind one school address has its tabs open within a minute.
    Reconnects and the server's own machine are not counted."""
    return (env_number("TINYGPT_NEW_SESSIONS_BURST", NEW_SESSIONS_BURST, 1, 1_000_000),
            env_number("TINYGPT_NEW_SESSIONS_PER_MINUTE", NEW_SESSIONS_PER_MINUTE, 0.1,
                       1_000_000.0, float))


def cache_idle_seconds() -> float:
    """TINYGPT_CACHE_IDLE_SECONDS: an entry of the shared caches (traces, prompts read,
    readouts, figures...) not used for this long is dropped, so memory comes back after a
    burst of one-off prompts (default 60: a class on one prompt uses its entries every few
    seconds; a prompt left for a minute costs one model pass to bring back)."""
    return env_number("TINYGPT_CACHE_IDLE_SECONDS", 60.0, 1.0, 1_000_000.0, float)


def page_runs() -> int:
    """TINYGPT_PAGE_RUNS: page runs at once in one server process; the others wait in line
    (default 2: one long run, a generation on GPT-2, does not hold up the rest)."""
    return env_number("TINYGPT_PAGE_RUNS", 2, 1, 256)


def class_poll_seconds() -> float:
    """TINYGPT_CLASS_POLL_SECONDS: a student's heartbeat, how often its app asks the class store
    for news on its own (default 10). News is pushed (see class_push_seconds); the heartbeat is
    the safety net and says the student is still connected, so it must stay well under the
    store's connected window (30 s). Each heartbeat is a small rerun on the server."""
    return env_number("TINYGPT_CLASS_POLL_SECONDS", 10.0, 0.2, 60.0, float)


def class_push_seconds() -> float:
    """TINYGPT_CLASS_PUSH_SECONDS: how often each server process reads its classes' news (one
    read-only query per class) to wake the students whose class changed (default 0.1)."""
    return env_number("TINYGPT_CLASS_PUSH_SECONDS", 0.1, 0.05, 10.0, float)


def models_dir() -> Path:
    """TINYGPT_MODELS_DIR: the folder whose direct entries are the models (default models/),
    (as named: compute.models.models_dir resolves it)."""
    return Path(os.environ.get("TINYGPT_MODELS_DIR", "").strip() or str(ROOT / "models"))


def default_model_name() -> str | None:
    """TINYGPT_DEFAULT_MODEL: the model a new session starts with, when it is listed."""
    return os.environ.get("TINYGPT_DEFAULT_MODEL", "").strip() or None


def data_dir() -> Path:
    """TINYGPT_DATA_DIR: where the app keeps what it writes, the SQLite class store among it
    (default runs/ beside app.py in the repository, git-ignored; installed from a wheel,
    runs/ in the current folder, since site-packages may belong to root)."""
    chosen = os.environ.get("TINYGPT_DATA_DIR", "").strip()
    if chosen:
        return Path(chosen)
    return (Path.cwd() if installed() else ROOT) / "runs"


def installed() -> bool:
    """Whether the app runs from its copy inside the installed package, not the repository."""
    return ROOT == PACKAGE / "_app"


def public_url() -> str | None:
    """TINYGPT_PUBLIC_URL: the address students open to reach this app (for example
    https://tinygpt.school.example or http://192.168.1.20:8501), used for the class's join
    link and QR code. None when unset; an address that is not http(s)://host... is ignored."""
    raw = os.environ.get("TINYGPT_PUBLIC_URL", "").strip()
    if not raw:
        return None
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme in ("http", "https") and parts.hostname and not any(c.isspace() for c in raw):
        return raw
    _warn_once("TINYGPT_PUBLIC_URL", repr(raw[:200]), "is not an http(s):// address", "none")
    return None


CLASS_STORE_SCHEMES = ("redis://", "rediss://", "unix://")


def class_store_url() -> str:
    """TINYGPT_CLASS_STORE: "" for the SQLite file in data_dir() (default; "sqlite" says the
    same), or a redis://, rediss:// or unix:// address for Redis shared by several machines."""
    raw = os.environ.get("TINYGPT_CLASS_STORE", "").strip()
    if raw in ("", "sqlite") or raw.startswith(CLASS_STORE_SCHEMES):
        return "" if raw == "sqlite" else raw
    # the value itself is not logged: a mistyped address may still hold a password
    _warn_once("TINYGPT_CLASS_STORE", "<hidden>", "is not empty, sqlite or a redis:// address",
               "SQLite")
    return ""


def class_limits(environ: Mapping[str, str] | None = None) -> dict[str, float | int]:
    """The class store's bounds the operator set (tinygpt_hosting.classroom.rules.Limits fields),
    only those set: TINYGPT_CLASS_TTL_HOURS (a class ends this long after its teacher was last
    active, default 3), TINYGPT_MAX_CLASSES (classes at once, default 50), TINYGPT_MAX_STUDENTS
    (seats per class, default 150), TINYGPT_SEATS_PER_ADDRESS (seats one client address may
    hold in a class, default 4: raise it for a class reaching the server through one shared
    address), TINYGPT_CLASSES_PER_ADDRESS (classes one address may start per hour, default 6).
    """
    hours = env_number("TINYGPT_CLASS_TTL_HOURS", None, 0.01, 24 * 365, float, environ)
    read = {"ttl_seconds": None if hours is None else hours * 3600,
            "max_classes": env_number("TINYGPT_MAX_CLASSES", None, 1, 100_000, int, environ),
            "max_students": env_number("TINYGPT_MAX_STUDENTS", None, 1, 100_000, int, environ),
            "seats_per_address": env_number("TINYGPT_SEATS_PER_ADDRESS", None, 1, 100_000, int,
                                            environ),
            "classes_per_address": env_number("TINYGPT_CLASSES_PER_ADDRESS", None, 1, 100_000,
                                              int, environ)}
    return {name: value for name, value in read.items() if value is not None}


def disconnected_session_ttl() -> float:
    """Streamlit's server.disconnectedSessionTTL (seconds, default 120): how long Streamlit
    keeps a session whose browser went away. The app's own per-session registries (CPU buckets,
    serving.browsers) forget theirs after as long. Not a TINYGPT_ setting: Streamlit's own."""
    try:
        import streamlit  # here: settings is read by tools that do not run Streamlit

        value = float(streamlit.get_option("server.disconnectedSessionTTL"))
    except Exception:  # noqa: BLE001 - an older Streamlit without it: its old default
        return 120.0
    return value if math.isfinite(value) and value > 0 else 120.0


def registry_report(environ: Mapping[str, str] | None = None) -> str | None:
    """TINYGPT_REGISTRY_REPORT: a file the process appends its registries' sizes to every few
    seconds (serving.registry_report; bench/hostile.py reads it). Unset: no report."""
    return (os.environ if environ is None else environ).get("TINYGPT_REGISTRY_REPORT") or None


def teacher_key(environ: Mapping[str, str] | None = None) -> str:
    """TINYGPT_TEACHER_KEY: when set, starting a live class needs it (default unset: anyone
    may start one, a few per address and hour). Set it on any server reachable beyond the
    room. Kept only in this process; the class store keeps no copy."""
    return (os.environ if environ is None else environ).get("TINYGPT_TEACHER_KEY", "").strip()


_configured = threading.Lock()
_done = False


def configure_process() -> None:
    """Apply the process-wide settings, once per process (later calls do nothing).

    One BLAS thread per request: a classroom server answers many students at once, and letting
    each matrix product spread over every core makes the threads fight (measured here: a
    forward pass 10-15x slower under load than with one thread).

    A short GIL switch interval: every session's script runs in a thread of one process. NumPy
    lets go of the GIL inside most calls; getting it back means waiting until the holder is made
    to let go, by default every 5 ms. A generation makes thousands of small NumPy calls, so next
    to one busy thread it waited 8.3 s instead of 44 ms (bench/load.py: the Decoding tail).

    A class server's own settings (Streamlit's theme kept between reruns, the door on new
    sessions per client address) are the hosting wing's: tinygpt_app.host's
    configure_process. (The shared caches' janitor, compute.shared_cache, is started by
    kit.frame: compute sits above settings.)
    """
    global _done
    with _configured:
        if _done:
            return
        threadpool_limits(limits=blas_threads(), user_api="blas")
        sys.setswitchinterval(switch_interval_ms() / 1000)
        _done = True
