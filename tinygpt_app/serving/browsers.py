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
with an empty bucket, which gains an attacker nothing. Pure Python, no Streamlit.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass

from tinygpt_app.serving.client_address import LOOPBACK, address_group
from tinygpt_app.serving.fair_share import Bucket

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
    last_used: float
    group: str = ""  # a browser's address group ("" for a pool)


class Browsers:
    """The buckets of one process, by browser token and by address group; thread-safe."""

    def __init__(self, *, idle_seconds: float = 120.0, max_entries: int = MAX_ENTRIES) -> None:
        self.idle_seconds = idle_seconds
        self.max_entries = max(2, max_entries)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._browsers: Counter[str] = Counter()  # address group -> browsers remembered there
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
            self._forget_idle(now)
            pool = self._entry("pool:" + group, now,
                               lambda: Bucket(share * NEWCOMER_SHARES, NEWCOMER_BURST,
                                              NEWCOMER_BURST, now)).bucket
            pool.share = share * NEWCOMER_SHARES
            key = f"browser:{browser}"
            if not browser or (key not in self._entries
                               and self._browsers[group] >= BROWSERS_PER_ADDRESS):
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
            entry = self._entries[key] = _Entry(make(), now, now, group)
            if group:
                self._browsers[group] += 1
            while len(self._entries) > self.max_entries:
                self._drop_oldest()
        entry.last_used = now
        self._entries.move_to_end(key)
        return entry

    def _drop_oldest(self) -> None:
        _, entry = self._entries.popitem(last=False)  # the least recently used
        if entry.group:
            self._browsers[entry.group] -= 1
            if not self._browsers[entry.group]:
                del self._browsers[entry.group]

    def _forget_idle(self, now: float) -> None:
        """Drop the entries unused for idle_seconds (the oldest are first in the order)."""
        while self._entries:
            entry = next(iter(self._entries.values()))
            if now - entry.last_used <= self.idle_seconds:
                return
            self._drop_oldest()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


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
        self._last: OrderedDict[str, tuple[str, float]] = OrderedDict()  # session -> group, t
        self._count: Counter[str] = Counter()  # address group -> sessions
        self._lock = threading.Lock()

    def admit(self, session: str, address: str, now: float | None = None) -> bool:
        """Record a page run of `session`; False when it is a new session of an address that
        already keeps `per_address` sessions busy."""
        if address == THIS_MACHINE or not session:
            return True
        now = time.monotonic() if now is None else now
        group = address_group(address)
        with self._lock:
            self._forget_idle(now)
            if session not in self._last:
                if self._count[group] >= self.per_address or len(self._last) >= self.max_entries:
                    return False
                self._count[group] += 1
            self._last[session] = (group, now)
            self._last.move_to_end(session)
            return True

    def _forget_idle(self, now: float) -> None:
        while self._last:
            session, (group, seen) = next(iter(self._last.items()))
            if now - seen <= self.idle_seconds:
                return
            del self._last[session]
            self._count[group] -= 1
            if not self._count[group]:
                del self._count[group]

    def of(self, address: str) -> int:
        with self._lock:
            return self._count[address_group(address)]
