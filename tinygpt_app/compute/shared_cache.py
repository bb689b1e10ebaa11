"""The app's one cache idiom: a cachetools cache bounded in bytes, shared by every session
(`SharedCache`, and `@shared(max_bytes)` over a function); only the models themselves are kept
by st.cache_resource (compute.models).

Every hand-made cache of the server (traces, prompts read, generations, readouts, figures, the
models that failed to load, the models folder's listing) is a `SharedCache`: a
`cachetools.LRUCache(maxsize=<bytes>, getsizeof=...)`, or a `cachetools.TTLCache` when its
answers also go stale after a while, behind a lock (cachetools' caches are not thread-safe, and
every student's page runs in a thread of the same process). The least recently used entry goes
first; an entry bigger than the whole budget is not kept (its caller still has it).

A byte bound alone keeps memory in check but never gives it back: a burst of one-off prompts
(a prankster's, bench/hostile.py) fills every cache to its cap, and the memory stays taken long
after. So each cache also notes when each entry was last used (the only extra work on the hot
path), and a janitor thread per process (`start_janitor`, every JANITOR_SECONDS) drops the
entries nobody used for TINYGPT_CACHE_IDLE_SECONDS (settings.cache_idle_seconds, default 60),
then asks the C allocator to give the freed memory back. A class on one prompt uses its entries
every few seconds and keeps them; a prompt left for a minute costs one model pass to bring back.

`nbytes_of` weighs what the caches hold: NumPy arrays by their bytes, containers and dataclasses
by what they hold. The core (`tinygpt/`) keeps its own small caches and does not use this.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import gc
import inspect
import sys
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import cachetools
import numpy as np

from tinygpt_app.host import host

MAX_DEPTH = 8  # nbytes_of goes this deep into nested values: results are a few levels deep
_SCALARS = frozenset({int, float, bool, type(None)})
SCALAR_BYTES = 32  # a Python int or float, with its slot in the list
JANITOR_SECONDS = 10.0  # how often the janitor sweeps: memory is back within idle + 10 s
GIVE_BACK_BYTES = 16 * 2**20  # a sweep that freed this much asks the allocator to return it
COLLECT_SECONDS = 30.0  # and Python's full collection runs at least this often (see sweep)


def nbytes_of(value: Any, depth: int = 0) -> int:
    """Roughly the memory `value` holds: an array's bytes, a string's length, a container's or
    a dataclass's items (each array counted once per container), else Python's own size."""
    if type(value) in _SCALARS:  # the most common leaf: a token id, a score
        return SCALAR_BYTES
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if depth >= MAX_DEPTH:
        return sys.getsizeof(value)
    if isinstance(value, (str, bytes)):
        return len(value) + 50
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        if all(type(item) in _SCALARS for item in value):  # token ids, scores: one pass
            return sys.getsizeof(value) + SCALAR_BYTES * len(value)
        items = list(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif hasattr(value, "nbytes") and not isinstance(value, np.generic):
        return int(value.nbytes)  # a tinygpt object that weighs itself (a lean Trace)
    else:
        return sys.getsizeof(value)
    unique = {id(item): item for item in items}  # an array shared by two fields counts once
    return sys.getsizeof(value) + sum(nbytes_of(item, depth + 1) for item in unique.values())


class SharedCache:
    """Values by key, at most `max_bytes` of them as `sizeof` weighs them, least recently
    used out first; with `ttl`, also gone `ttl` seconds after they were put; and gone when
    unused for a while, once `drop_idle` (the janitor) runs. Thread-safe."""

    def __init__(self, max_bytes: int, sizeof: Callable[[Any], int] = nbytes_of,
                 ttl: float | None = None, timer: Callable[[], float] = time.monotonic) -> None:
        if ttl is None:
            self._cache = cachetools.LRUCache(maxsize=max_bytes, getsizeof=sizeof)
        else:
            self._cache = cachetools.TTLCache(maxsize=max_bytes, ttl=ttl, timer=timer,
                                              getsizeof=sizeof)
        self._lock = threading.Lock()
        self._timer = timer
        # key -> when last used, in order of last use (the least recently used first); keys the
        # cache dropped by itself leave at the next sweep or when this outgrows the cache
        self._used: dict[Hashable, float] = {}
        _EVERY_CACHE.add(self)

    @property
    def max_bytes(self) -> int:
        return int(self._cache.maxsize)

    @property
    def nbytes(self) -> int:
        """The bytes the entries weighed when they were put (or weighed again)."""
        with self._lock:
            return int(self._cache.currsize)

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value under `key` (now the most recently used), or `default`."""
        with self._lock:
            value = self._cache.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._note_use(key)
            return value

    def put(self, key: Hashable, value: Any) -> bool:
        """Keep `value` under `key`, forgetting the least recently used entries to make room.
        False when it weighs more than the whole budget: it is not kept."""
        with self._lock:
            return self._keep(key, value)

    def setdefault(self, key: Hashable, value: Any) -> Any:
        """The value already under `key` (kept), else `value`, now kept if it fits: two
        sessions that made the same entry at once end up sharing the first one."""
        with self._lock:
            kept = self._cache.get(key)
            if kept is not None:
                self._note_use(key)
                return kept
            self._keep(key, value)
            return value

    def pop(self, key: Hashable) -> Any:
        with self._lock:
            self._used.pop(key, None)
            return self._cache.pop(key, None)

    def drop_idle(self, idle_seconds: float) -> int:
        """Forget the entries not used for `idle_seconds` (the janitor's sweep); the bytes they
        weighed. The least recently used come first in `_used`: the sweep stops at the first
        entry used since."""
        with self._lock:
            cutoff, dropped = self._timer() - idle_seconds, 0
            for key, used in list(self._used.items()):
                if used > cutoff:
                    break
                del self._used[key]
                if key in self._cache:
                    dropped += self._cache.getsizeof(cachetools.Cache.__getitem__(self._cache,
                                                                                  key))
                    self._cache.pop(key, None)
            return dropped

    def weigh_again(self) -> None:
        """Weigh every entry again (values that grow after they were put: a lean trace keeps
        the block it computed last), forgetting the least recently used if they grew. Entries
        are taken out oldest first and put back in that order, so the order stays (an LRU
        cache's: a TTL cache would restart their clocks, so it is refused)."""
        if isinstance(self._cache, cachetools.TTLCache):
            raise TypeError("a TTL cache cannot be weighed again")
        with self._lock:
            entries = [self._cache.popitem() for _ in range(len(self._cache))]  # oldest first
            for key, value in entries:
                self._store(key, value)

    def entries(self) -> list[tuple[Hashable, Any]]:
        """(key, value) of every entry, in the order they were put (or last weighed again);
        a copy, and reading them this way does not make them recently used."""
        with self._lock:
            return [(key, cachetools.Cache.__getitem__(self._cache, key)) for key in self._cache]

    def _keep(self, key: Hashable, value: Any) -> bool:
        """Put and note the use (under the lock)."""
        kept = self._store(key, value)
        if kept:
            self._note_use(key)
        return kept

    def _store(self, key: Hashable, value: Any) -> bool:
        """Put without noting a use: weigh_again puts back entries nobody just used."""
        try:
            self._cache[key] = value
        except ValueError:  # cachetools: "value too large", more than the whole budget
            self._cache.pop(key, None)
            self._used.pop(key, None)
            return False
        return True

    def _note_use(self, key: Hashable) -> None:
        """`key` used now: to the end of the use order (under the lock)."""
        self._used.pop(key, None)
        self._used[key] = self._timer()
        if len(self._used) > 2 * len(self._cache) + 64:  # keys the cache dropped by itself
            self._used = {k: t for k, t in self._used.items() if k in self._cache}

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._cache

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)


def shared(max_bytes: int, sizeof: Callable[[Any], int] = nbytes_of,
           spinner: str | None = None) -> Callable[[Callable], Callable]:
    """`@shared(max_bytes)`: a function whose results every session shares, kept in a
    SharedCache of its own. The key is its arguments whose names do not start with "_": the
    model goes in as `_model` beside its id and version, as the guide asks. One session makes
    a missing entry while the others asking for the same key wait for it (`spinner`: what
    they are told meanwhile); a result is read-only for whoever gets it."""

    def wrap(function: Callable) -> Callable:
        cache = SharedCache(max_bytes, sizeof)
        signature = inspect.signature(function)
        making: dict[Hashable, threading.Lock] = {}
        making_lock = threading.Lock()

        @functools.wraps(function)
        def cached(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs).arguments
            key = tuple(value for name, value in bound.items() if not name.startswith("_"))
            found = cache.get(key, _MISSING)
            if found is not _MISSING:
                return found
            with making_lock:
                lock = making.setdefault(key, threading.Lock())
            try:
                with lock:  # a second asker waits for the first one's result
                    found = cache.get(key, _MISSING)
                    if found is _MISSING:
                        found = _make(function, args, kwargs, spinner)
                        cache.put(key, found)
            finally:
                with making_lock:
                    making.pop(key, None)
            return found

        cached.cache = cache  # type: ignore[attr-defined] - for the tests and the report
        return cached

    return wrap


def _make(function: Callable, args: tuple, kwargs: dict, spinner: str | None) -> Any:
    if spinner is None:
        return function(*args, **kwargs)
    import streamlit as st

    with st.spinner(spinner):
        return function(*args, **kwargs)


_MISSING = object()
_EVERY_CACHE: weakref.WeakSet[SharedCache] = weakref.WeakSet()  # what the janitor sweeps
_janitor: threading.Thread | None = None
_collected = 0.0  # when sweep last ran a full collection (time.monotonic)
_frozen = False  # whether start-up's objects were left out of collections (_freeze_once)
_janitor_lock = threading.Lock()


def sweep(idle_seconds: float) -> int:
    """Drop every cache's entries unused for `idle_seconds`; the bytes freed. Past
    GIVE_BACK_BYTES, or COLLECT_SECONDS after the last time, Python's full collection runs and
    the C allocator is asked to return freed memory to the system (glibc's malloc_trim: freed
    small blocks otherwise stay in the process)."""
    global _collected
    freed = sum(cache.drop_idle(idle_seconds) for cache in list(_EVERY_CACHE))
    gone = host().streamlit.drop_expired_sessions()  # abandoned tabs past their TTL
    now = time.monotonic()
    if freed >= GIVE_BACK_BYTES or gone or now - _collected >= COLLECT_SECONDS:
        # Each page run leaves its script's globals (a page's `trace = ...`: the arrays the
        # caches also held) in a reference cycle, freed only by Python's full collection,
        # which Streamlit no longer runs after each run (.streamlit/config.toml) and which an
        # idle server never triggers. Measured after an attack: 61 traces, 930 MB, held by
        # run globals with every cache empty. One full collection: tens of ms. A session
        # Streamlit dropped is such a cycle too (its script runner, widgets and state).
        gc.collect()
        _freeze_once()
        malloc_trim()
        _collected = now
    return freed


def _freeze_once() -> None:
    """Leave what the server holds from start-up (modules, Plotly's and Streamlit's own objects:
    never garbage) out of every later collection, once, with gc.freeze, at a sweep of a server
    that keeps at most one session (its objects would never be collected once frozen). Python
    otherwise walks all of them in each full collection, this janitor's and its own: measured
    about 90 ms per collection on a fresh server, holding every student's page run."""
    global _frozen
    if _frozen:
        return
    counts = host().streamlit.session_counts()
    if counts is None or counts[0] > 1:  # not a server (a test), or sessions would be frozen
        return
    gc.freeze()
    _frozen = True


def malloc_trim() -> None:
    """Ask the C allocator to return the memory freed to the system (glibc's malloc_trim(0);
    elsewhere nothing): what the janitor calls after a sweep's full collection."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def total_bytes() -> int:
    """What every SharedCache of this process holds now, as weighed (the registry report)."""
    return sum(cache.nbytes for cache in list(_EVERY_CACHE))


def start_janitor(idle_seconds: float, every: float = JANITOR_SECONDS) -> threading.Thread:
    """Sweep every SharedCache of this process every `every` seconds, from a daemon thread
    (once per process: later calls return the same thread)."""
    global _janitor
    with _janitor_lock:
        if _janitor is None:
            def run() -> None:
                while True:
                    time.sleep(every)
                    sweep(idle_seconds)

            _janitor = threading.Thread(target=run, name="tinygpt-cache-janitor", daemon=True)
            _janitor.start()
        return _janitor
