"""Whose CPU bucket a page run draws from: limits keyed on something that costs the attacker.

A session is free to make: a script opens a new websocket for every request. If every new
session brought a full bucket (fair_share.Bucket), a fresh session per request would never wait,
and every one of them would shrink the class's share (issue 26: students' p95 0.36 s -> 42 s).
So a bucket belongs to what a session cannot reset:

- a browser (its token, kit.browser_token, kept in the browser's storage): a reload, a new tab
  or a new session of the same browser finds the same bucket, its debt included. A browser seen
  for the first time starts with nothing and earns its burst by being there: the burst over
  PROBATION seconds of presence (fair_share.Bucket: pauses count up to PRESENT_GAP each);
- for its first PROBATION seconds, a new browser's runs draw from its address's newcomer pool
  (NEWCOMER_BURST, refilled at NEWCOMER_SHARES shares): a script minting a new token per request
  is one pool per address, however many tokens it makes. An honest class that starts together
  behind one school router draws from that pool for half a minute, then each phone from its own
  (its burst earned by then);
- the sessions without a token of one address (scripts; a browser's very first run, which its
  token's report cuts short) share one tab's bucket, and so do the new browsers beyond
  BROWSERS_PER_ADDRESS at one address (a class behind one router is 60 phones; a script minting
  tokens by the thousand is one tab).

This machine (127.0.0.1: the teacher's laptop, the tests, the server's own tools) keeps today's
rule: a bucket per session that starts full. Behind a proxy whose address is not trusted
(docs/class_limits.md) every student looks like the proxy; if that is this machine, the old
rule applies to all, no worse than before.

Entries are dropped when unused for `idle_seconds` (Streamlit's server.disconnectedSessionTTL:
the app forgets a browser when Streamlit forgets its sessions), and at most `max_entries` are
kept (about 300 bytes each), the least recently used going first: a dropped browser comes back
with an empty bucket, which gains an attacker nothing. Both registries are `cachetools.TTLCache`s
(the app's one cache idiom, tinygpt_app/compute/shared_cache.py; used directly, as serving sits
below compute in .importlinter's layers). Pure Python, no Streamlit.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import cachetools

from tinygpt_hosting.serving.client_address import LOOPBACK, address_group
from tinygpt_hosting.serving.fair_share import Bucket

PROBATION = 30.0  # seconds a browser token is new: its runs draw from its address's pool
NEWCOMER_BURST = 60.0  # CPU seconds an address's newcomers may use at once (a class arriving:
#                        60 students' first half minute, some 4 views each)
NEWCOMER_SHARES = 4.0  # the pool refills at this many tabs' shares
BROWSERS_PER_ADDRESS = 120  # browsers with a bucket of their own per address group
MAX_ENTRIES = 20_000  # browsers and addresses remembered (a few MB at most)
THIS_MACHINE = LOOPBACK


@dataclass
class _Entry:
    bucket: Bucket
    first_seen: float
    group: str = ""  # a browser's address group ("" for a pool)


class _Registry(cachetools.TTLCache):
    """A TTLCache on the callers' clock (`now`, set before each use: the registries are told the
    time, so that tests can play hours in a moment) that counts its entries per address group
    (`group_of(value)`; "" is not counted), so that a group's count is O(1) on every page run.

    Setting a key again on each use renews it (its idle time starts again and it becomes the
    most recently used). Entries leave either by `expire` (idle too long) or through
    `__delitem__` (`popitem`, when full, takes the least recently used): both uncount them.
    """

    def __init__(self, maxsize: int, ttl: float, group_of: Callable[[Any], str]) -> None:
        self.now = 0.0
        super().__init__(maxsize=maxsize, ttl=ttl, timer=lambda: self.now)
        self.group_of = group_of
        self.per_group: Counter[str] = Counter()

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.expire()  # an idle entry under `key` leaves (uncounted) before it is replaced
        if key in self:  # set again: uncount the old value (its group may differ)
            self._uncount(cachetools.Cache.__getitem__(self, key))
        super().__setitem__(key, value)
        self._count(value)

    def __delitem__(self, key: Hashable) -> None:
        value = cachetools.Cache.__getitem__(self, key)
        try:
            super().__delitem__(key)  # (raises KeyError after removing an expired entry)
        finally:
            self._uncount(value)

    def expire(self, time: float | None = None) -> list[tuple[Hashable, Any]]:
        # TTLCache.expire deletes without __delitem__; it returns what it dropped (>= 5.5).
        expired = list(super().expire(time))
        for _, value in expired:
            self._uncount(value)
        return expired

    def live(self, now: float) -> int:
        """Entries left once the idle ones are dropped, as of `now`."""
        self.now = now
        self.expire()
        return len(self)

    def clear(self) -> None:
        super().clear()
        self.per_group.clear()

    def _count(self, value: Any) -> None:
        group = self.group_of(value)
        if group:
            self.per_group[group] += 1

    def _uncount(self, value: Any) -> None:
        group = self.group_of(value)
        if group:
            self.per_group[group] -= 1
            if not self.per_group[group]:
                del self.per_group[group]  # groups come and go: keep only the live ones


class Browsers:
    """The buckets of one process, by browser token and by address group; thread-safe."""

    def __init__(self, *, idle_seconds: float = 120.0, max_entries: int = MAX_ENTRIES) -> None:
        self.idle_seconds = idle_seconds
        self.max_entries = max(2, max_entries)
        # by key ("browser:<token>", "pool:<group>", "anonymous:<group>"), counting the
        # browsers remembered per address group
        self._entries = _Registry(self.max_entries, idle_seconds, lambda entry: entry.group)
        self._lock = threading.Lock()

    def bucket(self, kept: Bucket | None, browser: str | None, address: str, share: float,
               burst: float, now: float | None = None) -> Bucket:
        """The bucket this session's run uses. `kept`: the one this session used before (this
        machine's sessions keep theirs); `browser`: its token, None when unknown."""
        now = time.monotonic() if now is None else now
        if address == THIS_MACHINE:
            return kept if kept is not None else Bucket(share, burst)
        group = address_group(address)
        with self._lock:
            self._entries.now = now
            self._entries.expire()  # the idle ones leave first, so the counts below are live
            pool = self._entry("pool:" + group, now,
                               lambda: Bucket(share * NEWCOMER_SHARES, NEWCOMER_BURST,
                                              NEWCOMER_BURST, now)).bucket
            pool.share = share * NEWCOMER_SHARES
            key = f"browser:{browser}"
            if not browser or (key not in self._entries
                               and self._entries.per_group[group] >= BROWSERS_PER_ADDRESS):
                return self._entry("anonymous:" + group, now,  # one tab's bucket for them all
                                   lambda: Bucket(share, burst, burst, now)).bucket
            entry = self._entry(key, now, lambda: Bucket(share, burst, 0.0, now, ceiling=0.0,
                                                         earn_rate=burst / PROBATION), group)
            mine = entry.bucket
            mine.pool = pool if now - entry.first_seen < PROBATION else None
        return mine

    @staticmethod
    def shares(bucket: Bucket | None, browser: str | None, address: str) -> bool:
        """Does a run with this bucket count among the sessions the capacity is divided by?
        This machine's sessions and browsers past their first seconds do; a newcomer and a
        session without a token do not."""
        if address == THIS_MACHINE:
            return True
        return bool(browser) and bucket is not None and bucket.pool is None

    def _entry(self, key: str, now: float, make, group: str = "") -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = _Entry(make(), now, group)
        # Set on every use, found or new: that renews its idle time and makes it the most
        # recently used (when full, the cache drops the least recently used to make room).
        self._entries[key] = entry
        return entry

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def live(self, now: float | None = None) -> int:
        """Buckets remembered once the idle ones are dropped (as of `now`)."""
        with self._lock:
            return self._entries.live(time.monotonic() if now is None else now)


class Sessions:
    """How many sessions each address keeps busy: a session that ran a page within
    `idle_seconds` (Streamlit's disconnected-session TTL) counts for its address group. Past
    `per_address`, a new session of that address is refused before its page does any work (a
    script opening sessions by the hundred gets a short note, not a page and its memory). This
    machine is not counted."""

    def __init__(self, per_address: int, *, idle_seconds: float = 120.0,
                 max_entries: int = 50_000) -> None:
        self.per_address, self.idle_seconds = per_address, idle_seconds
        self.max_entries = max_entries
        # session -> (its address group, its first run); a session past max_entries is refused,
        # not made room for (the cache never evicts: a script must not push the class's out)
        self._last = _Registry(max(1, max_entries), idle_seconds, lambda entry: entry[0])
        self._lock = threading.Lock()

    def admit(self, session: str, address: str, now: float | None = None) -> bool:
        """Record a page run of `session`; False when it is a new session of an address that
        already keeps `per_address` sessions busy."""
        if address == THIS_MACHINE or not session:
            return True
        now = time.monotonic() if now is None else now
        group = address_group(address)
        with self._lock:
            self._last.now = now
            self._last.expire()  # the idle ones leave first, so the counts below are live
            if session not in self._last and (self._last.per_group[group] >= self.per_address
                                              or len(self._last) >= self.max_entries):
                return False
            first = self._last[session][1] if session in self._last else now
            self._last[session] = (group, first)  # set again on every run: renews its idle time
            return True

    def stayed(self, session: str, seconds: float, now: float | None = None) -> bool:
        """Did `session` (admitted before) have its first run at least `seconds` ago? A
        student who stays; a script's sessions come and go (session_door.established)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            entry = self._last.get(session)
        return entry is not None and now - entry[1] >= seconds

    def of(self, address: str) -> int:
        with self._lock:
            return self._last.per_group[address_group(address)]

    def live(self, now: float | None = None) -> int:
        """Sessions of other machines busy within the TTL (as of `now`)."""
        with self._lock:
            return self._last.live(time.monotonic() if now is None else now)
