"""The teacher key's guard: wrong keys from one client address wait longer and longer.

A server with TINYGPT_TEACHER_KEY starts a class only for whoever types the key. Without a
limit a script guessed 17.8 keys a second from one session (issue 45). So, per address key
(serving.client_address.address_key: an IPv6 address's /64, as every other cap):

- the first FREE wrong keys cost nothing (a teacher mistypes);
- after that each wrong key makes the address wait FIRST_WAIT seconds, doubled with every
  further wrong key, up to MAX_WAIT (exponential back-off); a try during the wait is refused
  without being checked, and counts as nothing;
- the right key clears the address's count; an address with no wrong key for FORGET seconds
  is forgotten; at most MAX_ADDRESSES are remembered (the least recently used go first).

Every wrong key is logged with its address and count, never with the guess (a typo of the real
key in a log is half a leak). The comparison itself is constant-time (classroom.rules hashes
both keys and compares the hashes with hmac.compare_digest). One guard per process: behind
several app processes each keeps its own counts (docs/class_limits.md).
"""

from __future__ import annotations

import logging
import threading

import cachetools

log = logging.getLogger("tinygpt.app")

FREE = 3  # wrong keys an address may type before it waits
FIRST_WAIT = 1.0  # seconds after the first wrong key past FREE; doubled with each next one
MAX_WAIT = 900.0  # the longest wait (15 minutes)
FORGET = 3600.0  # seconds without a wrong key after which an address starts again
MAX_ADDRESSES = 10_000  # addresses remembered (about 100 bytes each)


class KeyGuard:
    """Wrong teacher keys per address key, and how long each must wait; thread-safe. Times
    are passed in (the classroom's clock), so the tests move them."""

    def __init__(self, max_addresses: int = MAX_ADDRESSES) -> None:
        # address key -> (wrong keys counted, when the last one came)
        self._wrong: cachetools.LRUCache = cachetools.LRUCache(maxsize=max(1, max_addresses))
        self._lock = threading.Lock()

    def _count(self, key: str, now: float) -> tuple[int, float]:
        wrong, last = self._wrong.get(key, (0, now))
        return (0, now) if now - last > FORGET else (wrong, last)

    def wait(self, key: str, now: float) -> float:
        """Seconds `key` must still wait before its next try is checked (0: it may try)."""
        with self._lock:
            wrong, last = self._count(key, now)
        return max(0.0, last + backoff(wrong) - now)

    def failed(self, key: str, now: float) -> float:
        """Count a wrong key from `key` (logged without the guess); the wait it now has."""
        with self._lock:
            wrong = self._count(key, now)[0] + 1
            self._wrong[key] = (wrong, now)
        wait = backoff(wrong)
        log.warning("wrong teacher key from %s (%d in a row; next try checked in %.0f s)",
                    key, wrong, wait)
        return wait

    def succeeded(self, key: str) -> None:
        """The right key: `key` starts again from nothing."""
        with self._lock:
            self._wrong.pop(key, None)


def backoff(wrong: int) -> float:
    """The wait after `wrong` wrong keys in a row: none for the first FREE, then FIRST_WAIT
    doubled with each further one, at most MAX_WAIT."""
    if wrong <= FREE:
        return 0.0
    return min(MAX_WAIT, FIRST_WAIT * 2.0 ** min(wrong - FREE - 1, 30))


GUARD = KeyGuard()  # this process's
