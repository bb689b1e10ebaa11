"""encode()'s chunk cache: chunk text -> token ids, bounded in bytes."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict


class _ByteLRU:
    """chunk text -> token ids, at most `budget` bytes (as sys.getsizeof counts them);
    the least recently used entries go first. Thread-safe: the app shares one tokenizer."""

    ENTRY_OVERHEAD = 100  # the ordered dict's own bytes per entry, roughly

    def __init__(self, budget: int):
        self.budget, self.nbytes = budget, 0
        self._entries: OrderedDict[str, tuple[tuple[int, ...], int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[int, ...] | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return hit[0]

    def put(self, key: str, value: tuple[int, ...]) -> None:
        cost = sys.getsizeof(key) + sys.getsizeof(value) + self.ENTRY_OVERHEAD
        if cost > self.budget:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            self._entries[key] = (value, cost)
            self.nbytes += cost
            while self.nbytes > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.nbytes -= dropped

    def __len__(self) -> int:
        return len(self._entries)
