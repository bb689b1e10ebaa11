"""The app's one cache idiom: a cachetools cache bounded in bytes, shared by every session.

Every hand-made cache of the server (traces, prompts read, generations, readouts, figures, the
models that failed to load, the models folder's listing) is a `SharedCache`: a
`cachetools.LRUCache(maxsize=<bytes>, getsizeof=...)`, or a `cachetools.TTLCache` when its
answers also go stale after a while, behind a lock (cachetools' caches are not thread-safe, and
every student's page runs in a thread of the same process). The least recently used entry goes
first; an entry bigger than the whole budget is not kept (its caller still has it).

`nbytes_of` weighs what the caches hold: NumPy arrays by their bytes, containers and dataclasses
by what they hold. The core (`tinygpt/`) keeps its own small caches and does not use this.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import cachetools
import numpy as np

MAX_DEPTH = 8  # nbytes_of goes this deep into nested values: results are a few levels deep
_SCALARS = frozenset({int, float, bool, type(None)})
SCALAR_BYTES = 32  # a Python int or float, with its slot in the list


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
    used out first; with `ttl`, also gone `ttl` seconds after they were put. Thread-safe."""

    def __init__(self, max_bytes: int, sizeof: Callable[[Any], int] = nbytes_of,
                 ttl: float | None = None, timer: Callable[[], float] = time.monotonic) -> None:
        if ttl is None:
            self._cache = cachetools.LRUCache(maxsize=max_bytes, getsizeof=sizeof)
        else:
            self._cache = cachetools.TTLCache(maxsize=max_bytes, ttl=ttl, timer=timer,
                                              getsizeof=sizeof)
        self._lock = threading.Lock()

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
            return self._cache.get(key, default)

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
                return kept
            self._keep(key, value)
            return value

    def pop(self, key: Hashable) -> Any:
        with self._lock:
            return self._cache.pop(key, None)

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
                self._keep(key, value)

    def entries(self) -> list[tuple[Hashable, Any]]:
        """(key, value) of every entry, in the order they were put (or last weighed again);
        a copy, and reading them this way does not make them recently used."""
        with self._lock:
            return [(key, cachetools.Cache.__getitem__(self._cache, key)) for key in self._cache]

    def _keep(self, key: Hashable, value: Any) -> bool:
        try:
            self._cache[key] = value
        except ValueError:  # cachetools: "value too large", more than the whole budget
            self._cache.pop(key, None)
            return False
        return True

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._cache

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)
