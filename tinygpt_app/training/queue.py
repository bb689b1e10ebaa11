"""Trainings take turns: the server's training slots go to the students first come, first
served, one training per student (a browser tab) at a time.

A student who presses Start while every slot is taken joins the queue and sees their place and
the expected wait; their page asks again every second (which also says they are still there)
and starts when their turn comes. Whoever finishes and presses Start again joins at the back:
nobody keeps a slot by restarting. A place not asked about for STALE seconds (the tab was
closed) is given up. The queue is bounded (settings.max_training_queue()), and so are the
places one client address may hold (settings.training_places_per_address()): a student with
many tabs cannot fill it. With no slots at all, training is off and every Start is refused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tinygpt_app.host import host

STALE = 10.0  # seconds without a poll after which a waiting place is given up


@dataclass
class Turn:
    """Where a student stands: running, or waiting at `place` (1 = next) for about `wait` s."""

    started: bool
    place: int = 0
    wait: float = 0.0  # at most this long, if everyone ahead uses their whole time limit
    full: bool = False  # refused: not even a place (`why` says which)
    why: str = ""  # when refused: OFF, RUNNING, FULL or ADDRESS


OFF = "off"  # the server has no training slots (TINYGPT_MAX_TRAININGS=0)
RUNNING = "running"  # this student's training runs already: one each
FULL = "full"  # the line is full
ADDRESS = "address"  # this client address holds all the places it may


@dataclass
class _Running:
    client: str
    started: float
    limit: float  # seconds: the training's time limit (it ends by then, or is stopped)


class TrainingQueue:
    """`slots` trainings at once, at most `max_waiting` students waiting in line, at most
    `per_address` of them from one client address."""

    def __init__(self, slots: int, max_waiting: int,
                 clock: Callable[[], float] = time.monotonic, per_address: int = 4) -> None:
        self.slots, self.max_waiting, self.clock = slots, max_waiting, clock
        self.per_address = per_address
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}  # ticket -> the training holding a slot
        # client -> (limit, last poll, address), first come first
        self._waiting: dict[str, tuple[float, float, str]] = {}
        self._tickets = 0

    def ask(self, client: str, limit: float, address: str = "") -> tuple[Turn, int | None]:
        """Start now if it is `client`'s turn (the Turn and a ticket to give back with
        `finish`), else keep or take a place in line (ticket None). `address`: the client's
        machine, whose places in line are capped per address_key (an IPv6 address's /64, as
        the session door and the class count it)."""
        address = host().address_key(address) if address else ""
        with self._lock:
            now = self.clock()
            self._forget_stale(now)
            why = self._refusal(client, address)
            if why:
                return Turn(False, full=True, why=why), None
            self._waiting[client] = (limit, now, address)  # a new client goes to the back
            ahead = list(self._waiting).index(client)
            if ahead < self.slots - len(self._running):
                del self._waiting[client]
                self._tickets += 1
                self._running[self._tickets] = _Running(client, now, limit)
                return Turn(True), self._tickets
            return Turn(False, ahead + 1, self._wait(ahead, now)), None

    def _refusal(self, client: str, address: str) -> str:
        """Why `client` gets no place ("" if it may wait or start). Under the lock."""
        if self.slots <= 0:
            return OFF
        if any(r.client == client for r in self._running.values()):
            return RUNNING  # one training per student
        if client in self._waiting:
            return ""  # a place kept
        if len(self._waiting) >= self.max_waiting:
            return FULL
        held = sum(place[2] == address for place in self._waiting.values())
        return ADDRESS if held >= self.per_address else ""

    def finish(self, ticket: int) -> None:
        """A training ended: its slot goes to the first in line when they next ask."""
        with self._lock:
            self._running.pop(ticket, None)

    def leave(self, client: str) -> None:
        """Give up a place in line."""
        with self._lock:
            self._waiting.pop(client, None)

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def waiting(self) -> int:
        with self._lock:
            self._forget_stale(self.clock())
            return len(self._waiting)

    def _wait(self, ahead: int, now: float) -> float:
        """Seconds until a slot frees for the one with `ahead` students before them, if every
        training uses its whole time limit: the slots' free times, each given in turn to the
        next in line."""
        free = sorted(max(0.0, r.started + r.limit - now) for r in self._running.values())
        free += [0.0] * (self.slots - len(free))
        limits = [place[0] for place in self._waiting.values()][:ahead]
        for limit in limits:  # the next in line takes the slot that frees first
            free[0] += limit
            free.sort()
        return free[0] if free else float("inf")

    def _forget_stale(self, now: float) -> None:
        for client, (_, seen, _) in list(self._waiting.items()):
            if now - seen > STALE:
                del self._waiting[client]
