"""A door on new sessions, per client address: the cheapest place to stop a session flood.

Opening a websocket costs a script nothing; to Streamlit, every new session costs an AppSession,
its first run and its messages, none of it charged to any CPU bucket (fair_share charges page
runs). Measured in bench/hostile.py's floods: about a third of a core. So a new session must
first get a token from its address's bucket, before Streamlit makes anything for it
(streamlit_internals.install_session_door wraps Runtime.connect_session):

- each address key (client_address.address_key: an IPv4 address, an IPv6 /64) holds up to
  `burst` tokens and gains `per_minute` a minute; a new session takes one, none left: refused;
- a reconnect of a session Streamlit still keeps (a phone waking up, a wifi hiccup) is not a new
  session and takes nothing;
- this machine (127.0.0.1, ::1: the teacher's laptop, the tests, the server's own tools) is not
  counted, as for the other caps per address (client_address.other_machine_key);
- a refused socket is held open HOLD_SECONDS before it is closed (1013, "try again later"):
  answered at once, a script looping on refusals made the server's event loop do a handshake
  every 0.7 ms (measured: a whole core from 8 connections, the class's p95 0.29 s -> 2.0 s in
  bench/hostile.py), held it waits. At most MAX_HELD are held at once: floods of more
  connections than that are for a proxy's connection limits (deploy/nginx.conf).

Defaults (settings.new_sessions): a burst of 40 and 30 a minute let a class of 60 phones behind
one school address open their tabs within a minute (40 at once, the other 20 within 40 s), and a
class of 30 reload every tab at once; a script opening a session per request gets one every 2 s.

Strangers share one door (issue 26, fourth pass). Measured per prank kind alone
(a new session's event-loop work, its script thread's work outside any turn, its charged runs):
16-27 ms + 9-19 ms + 21-50 ms of CPU per session, and none of the first two is charged to a
tab. Five flooding addresses, each with its own burst of 40, opened some 170 sessions in the
first seconds of an attack: a whole core for about 15 s, just when a class arrives. So:

- an address is *established* once one of its sessions still runs pages STAYED seconds after
  its first run (a student who stays; a script's sessions come and go), and stays so for
  ESTABLISHED_TTL after the last such run (kit.frame calls `established`);
- an address that is not (a *stranger*) opens its first STRANGER_FREE new sessions on its own
  tokens (a student's tab, a reload; given back only once the address is forgotten, below);
  past those, each new session also takes a token from one bucket shared by every stranger,
  with one address's burst and rate: however many addresses flood, together they open no more
  sessions than one address could, while a class that was there first (its address
  established) keeps its own door. A class arriving from a new address at the very moment
  strangers flood shares their door until its first students have stayed STAYED seconds.

The buckets are a `cachetools.TTLCache` (the app's one cache idiom, compute/shared_cache.py; used
directly, as serving sits below compute): an address is forgotten once its bucket would be full
again (burst / rate: 80 s by default), which changes nothing for it but its free sessions as a
stranger, given back, and at most `max_addresses` are kept (about 200 bytes each), the least
recently used going first (it comes back full: the burst, no more). The door itself is
Streamlit's: only `install` touches it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import cachetools

from tinygpt_app.settings import NEW_SESSIONS_BURST as BURST  # at once, per address
from tinygpt_app.settings import NEW_SESSIONS_PER_MINUTE as PER_MINUTE  # then per minute
from tinygpt_hosting import streamlit_internals
from tinygpt_hosting.serving.client_address import other_machine_key

log = logging.getLogger("tinygpt.app")

MAX_ADDRESSES = 20_000  # address groups remembered (a few MB at most)
SAY_EVERY = 60.0  # seconds: at most one log line per address in that time
HOLD_SECONDS = 5.0  # a refused socket is held open this long before it is closed: a script
#                     looping on refusals waits instead of costing a handshake a millisecond
STAYED = 20.0  # seconds after its first run that a session still running pages makes its
#               address established (a prank session is gone in a few seconds)
ESTABLISHED_TTL = 600.0  # seconds an address stays established after its last such run
STRANGER_FREE = 4  # new sessions a stranger address opens on its own tokens only (lately)
MAX_HELD = 256  # refused sockets held at once in a process (a few kB each); past it, closed
#                 at once: many more connections than that are a flood for a proxy's limits


class SessionDoor:
    """New-session tokens per client address; thread-safe (`admit` runs on the server's event
    loop, the registry report and tests read from other threads)."""

    def __init__(self, burst: int = BURST, per_minute: float = PER_MINUTE, *,
                 max_addresses: int = MAX_ADDRESSES,
                 timer: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.per_second = float(max(1, burst)), max(per_minute, 1e-6) / 60.0
        self.timer = timer
        refill_seconds = self.burst / self.per_second  # idle this long: the bucket is full again
        # address group -> (tokens, free sessions left to it as a stranger, when counted); set
        # again on each use (renews its TTL)
        self._buckets: cachetools.TTLCache = cachetools.TTLCache(
            maxsize=max(1, max_addresses), ttl=refill_seconds, timer=timer)
        self._said: cachetools.TTLCache = cachetools.TTLCache(  # group -> when its refusal was
            maxsize=1_000, ttl=SAY_EVERY, timer=timer)        # logged (not renewed: once a minute)
        # every stranger's new sessions past their first few: one bucket (tokens, when counted)
        self._strangers = (self.burst, timer())
        self._established: cachetools.TTLCache = cachetools.TTLCache(  # group -> True
            maxsize=max(1, max_addresses), ttl=ESTABLISHED_TTL, timer=timer)
        self.refused = 0  # in this process (the registry report)
        self._lock = threading.Lock()

    def admit(self, ip: object) -> bool:
        """Whether a new session from `ip` (the connection's peer as the server sees it) may
        open now; takes one token if so. This machine always may."""
        group = other_machine_key(ip)
        if group is None:
            return True
        with self._lock:
            now = self.timer()
            tokens, free, then = self._buckets.get(group, (self.burst, STRANGER_FREE, now))
            tokens = min(self.burst, tokens + (now - then) * self.per_second)
            admitted, free = (self._strangers_let_in(group, free, now) if tokens >= 1.0
                              else (False, free))
            self._buckets[group] = (tokens - 1.0 if admitted else tokens, free, now)
            if not admitted:
                self.refused += 1
                first = group not in self._said
                if first:
                    self._said[group] = now
        if not admitted and first:
            log.warning("new sessions from %s refused: more than %d at once or %.0f a minute "
                        "(TINYGPT_NEW_SESSIONS_BURST / _PER_MINUTE; said once a minute per "
                        "address)", group, self.burst, self.per_second * 60)
        return admitted

    def _strangers_let_in(self, group: str, free: int, now: float) -> tuple[bool, int]:
        """Whether `group`'s next session may open as far as the strangers' door goes, and the
        free sessions it has left (under the lock): an established address always may; a
        stranger spends one of its `free` first (given back only once its entry is forgotten,
        idle until its bucket is full again), then takes a shared token, if one is left."""
        if group in self._established:
            return True, free
        if free >= 1:
            return True, free - 1
        shared, then = self._strangers
        shared = min(self.burst, shared + (now - then) * self.per_second)
        self._strangers = (shared - 1.0 if shared >= 1.0 else shared, now)
        return shared >= 1.0, free

    def established(self, ip: object) -> None:
        """`ip`'s address has a session that stayed (kit.frame: a run STAYED seconds after the
        session's first): its new sessions go through its own door only, for ESTABLISHED_TTL."""
        group = other_machine_key(ip)
        if group is None:
            return
        with self._lock:
            self._established[group] = True  # set again: renewed

    def knows(self, ip: object) -> bool:
        """Is `ip`'s address established (this machine always is)?"""
        group = other_machine_key(ip)
        if group is None:
            return True
        with self._lock:
            return group in self._established

    def __len__(self) -> int:
        """Addresses remembered (the idle ones dropped first)."""
        with self._lock:
            self._buckets.expire()
            return len(self._buckets)


_door: SessionDoor | None = None  # this process's, once installed
_install_lock = threading.Lock()


def install(burst: int = BURST, per_minute: float = PER_MINUTE) -> bool:
    """Put this process's door in front of Streamlit's new sessions (once; later calls keep
    the first door). False when Streamlit lacks what it needs: new sessions are then not
    limited (streamlit_internals logs it once)."""
    global _door
    with _install_lock:
        if _door is None:
            _door = SessionDoor(burst, per_minute)
        door = _door
    return streamlit_internals.install_session_door(door.admit, hold_seconds=HOLD_SECONDS,
                                                    max_held=MAX_HELD)


def established(ip: object) -> None:
    """Tell this process's door that `ip` has a session that stayed (SessionDoor.established);
    nothing before the door is installed."""
    if _door is not None:
        _door.established(ip)


def known(ip: object) -> bool:
    """Is `ip`'s address established at this process's door (False before it is installed)?
    fair_share.Admission serves its newcomers before the strangers'."""
    return _door.knows(ip) if _door is not None else False


def refused() -> int:
    """New sessions refused in this process so far (the registry report)."""
    return _door.refused if _door is not None else 0
