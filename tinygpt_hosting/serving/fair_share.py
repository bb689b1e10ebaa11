"""Fair shares of one server: a tab that keeps the processor busy waits its turn (issue 12).

One Streamlit process serves the whole class, and Python runs one thread at a time. A tab that
asks for expensive views back to back (a script pasting long prompts in a loop) would take the
processor from thirty students who click every few seconds, and every generation, which hands
the GIL back and forth thousands of times, would crawl behind it.

So every session has a bucket of CPU seconds. Each page run takes out the CPU time it used
(its own thread's and its helpers': RunCost); the bucket fills again at the tab's share, up
to `burst`. The share is the process's capacity divided among the sessions using it lately
(share_per_tab): thirty students on one process get a thirtieth each, a teacher alone gets it
all. A run that finds the bucket below zero first sleeps until it is back at zero, saying why;
sleeping lets go of the GIL, so the other students' runs go on. A student who clicks every few
seconds never waits: views cost 0.05-0.5 s here, and the burst holds some thirty of them. And
nobody waits for nothing: the sleep ends as soon as no other session's page is running.

Pure Python, no Streamlit: frame.page() keeps one Bucket per session and does the waiting.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tinygpt_app.settings import BURST_SECONDS as BURST  # CPU seconds a session may use at once
from tinygpt_app.settings import FAIR_SHARE as SHARE  # CPU seconds per second, at most

CAPACITY = 0.8  # CPU seconds per second a process shares out (one GIL; a fifth left to the
#                 server's own work: sending the pages)
ACTIVE = 60.0  # seconds: a session that started a run this recently shares the capacity
MAX_WAIT = 15.0  # a run never waits longer than this (older debt is forgiven)
HEAVY_DEBT = 3.0  # CPU seconds past its share: the tab's page runs then run alone (Admission)
HEAVY_BURST = 2.0  # CPU seconds all heavy tabs together may use at once (HeavyTabs)
EARNED = 1.0  # CPU seconds in hand: a tab with less is a newcomer in the Admission line (a new
#              browser earns this in its first 3 s of presence: browsers.PROBATION)
PRESENT_GAP = 15.0  # seconds: a longer pause between two runs of a tab counts as this long
#                    (a following student's heartbeat comes every 10 s)


def share_per_tab(most: float, active_sessions: int) -> float:
    """A tab's share: the capacity divided among the sessions using the process, at most
    `most` (TINYGPT_FAIR_SHARE). A class of 30 plus three scripted tabs: 0.024 each, while a
    student's clicks average about 0.01 (bench/hostile.py); a teacher alone: `most`."""
    return min(most, CAPACITY / max(1, active_sessions))


@dataclass
class Bucket:
    """One tab's CPU seconds in hand; negative after a run that cost more than it had.

    `ceiling` is what the bucket can hold now: the burst for a tab of this machine, but a
    browser seen for the first time starts at 0 and earns its burst (browsers.py): at its share,
    or at `earn_rate` per second of presence (the time between two of its runs, counted up to
    PRESENT_GAP each), so a fresh session or browser brings no credit with it, and one that
    comes back after an hour away has earned no more than one that kept coming. While `pool` is
    set (a newcomer's first seconds), its runs wait for and are charged to its address's
    newcomer pool instead.
    """

    share: float = SHARE
    burst: float = BURST
    level: float = BURST
    updated: float = field(default_factory=time.monotonic)
    ceiling: float | None = None  # None: the burst (a bucket that starts full, or has earned it)
    pool: Bucket | None = None
    earn_rate: float = 0.0  # CPU seconds per second of presence, while earning its burst

    def refill(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        elapsed = max(0.0, now - self.updated)
        earned = self.share * elapsed
        if self.ceiling is not None:  # still earning its burst
            earned = max(earned, self.earn_rate * min(elapsed, PRESENT_GAP))
            self.ceiling = min(self.burst, self.ceiling + earned)
            if self.ceiling >= self.burst - 1e-9:
                self.ceiling = None
        self.level = min(self.cap, self.level + earned)
        self.updated = now

    @property
    def cap(self) -> float:
        return self.burst if self.ceiling is None else self.ceiling

    def wait_seconds(self, now: float | None = None) -> float:
        """How long the next run must wait before it starts (0 when the bucket is not empty)."""
        self.refill(now)
        own = self.debt_seconds()
        return own if self.pool is None else max(own, self.pool.wait_seconds(now))

    def debt_seconds(self) -> float:
        """The refill time of this bucket's own debt as it stands (no refill, no pool)."""
        return min(MAX_WAIT, max(0.0, -self.level / self.share))

    @property
    def heavy(self) -> bool:
        """Has this tab used HEAVY_DEBT CPU seconds more than its share lately?"""
        return self.level < self.cap - HEAVY_DEBT

    def charge(self, cpu_seconds: float, now: float | None = None) -> None:
        """Take out what a run used (from the pool while there is one); the debt is capped at
        MAX_WAIT of refill."""
        if self.pool is not None:
            self.refill(now)  # a newcomer's own bucket goes on earning meanwhile
            self.pool.charge(cpu_seconds, now)
            return
        self.refill(now)
        self.level = max(-self.share * MAX_WAIT, self.level - max(0.0, cpu_seconds))


def newcomer(bucket: Bucket | None) -> bool:
    """Does a run with this bucket come after the others in the Admission line (and leave
    them a slot)? A tab with less than EARNED CPU seconds in hand: a browser in its first
    seconds (browsers.py), or a tab that spent its burst. Not by itself the runs without a
    browser token, whose address's shared bucket starts full: a class behind one router opens
    30 tabs at once, more than a flood keeps in line, and Admission serves newcomers address by
    address (measured: the class's first clicks then waited 10 s); kit.frame makes them
    newcomers only from a stranger's address (session_door). None: fair shares off."""
    return bucket is not None and bucket.level < EARNED


class HeavyTabs:
    """One bucket for all the heavy tabs of a process together (Bucket.heavy), with one tab's
    share and burst: each tab's own bucket bounds what it takes, and this bounds what all of
    them take at once, so ten scripted tabs get no more of the server than one. A single
    heavy tab (a teacher showing GPT-2) meets this bound about when it meets its own."""

    def __init__(self, share: float = SHARE, burst: float = HEAVY_BURST) -> None:
        self.bucket = Bucket(share, burst)
        self._lock = threading.Lock()

    def wait_seconds(self, tab: Bucket, now: float | None = None, *,
                     heavy: bool | None = None) -> float:
        """How long `tab`'s next run waits: its own debt and, when it is heavy (by default
        Bucket.heavy), the heavy tabs' shared debt."""
        own = tab.wait_seconds(now)
        if not (tab.heavy if heavy is None else heavy):
            return own
        return max(own, self.shared_wait_seconds(now))

    def shared_wait_seconds(self, now: float | None = None) -> float:
        """How long the heavy tabs' shared debt holds a heavy run (under this bound's lock)."""
        with self._lock:
            return self.bucket.wait_seconds(now)

    def charge(self, tab: Bucket, cpu_seconds: float, heavy: bool,
               now: float | None = None) -> None:
        """Take a run's CPU time out of the tab's bucket and, if it ran heavy, the shared one."""
        if heavy:
            with self._lock:
                self.bucket.charge(cpu_seconds, now)
        tab.charge(cpu_seconds, now)


def thread_cpu_seconds() -> float:
    """CPU time of the calling thread: a session's script runs in a thread of its own, and
    NumPy runs inline in it (one BLAS thread per request, settings.configure_process)."""
    return time.thread_time()


class RunCost:
    """The CPU seconds of one page run: its own thread's, plus what threads working for it add
    (a generation's runs play in threads of their own: tinygpt_hosting.steps.lockstep). Without
    these a tab
    that opens the Decoding page in a loop would be charged a fifth of what it costs."""

    def __init__(self) -> None:
        self.started = thread_cpu_seconds()
        self.helpers = 0.0
        self._settle: Callable[[float], None] | None = None  # once the run has been charged
        self._lock = threading.Lock()

    def add(self, cpu_seconds: float) -> None:
        """CPU seconds a helper thread used for this run (called from that thread). After the
        run was charged (`close`), they are charged at once: a generation goes on when its
        page run stops early (the student clicked on), and it still costs its tab."""
        cpu = max(0.0, cpu_seconds)
        with self._lock:
            settle = self._settle
            if settle is None:
                self.helpers += cpu
                return
        settle(cpu)

    def close(self, settle: Callable[[float], None]) -> float:
        """The run is over: its seconds so far (call it from the run's own thread); whatever
        helpers add from now on goes to `settle`."""
        with self._lock:
            self._settle = settle
            return self._so_far()

    def seconds(self) -> float:
        """So far; call it from the run's own thread."""
        with self._lock:
            return self._so_far()

    def _so_far(self) -> float:
        return thread_cpu_seconds() - self.started + self.helpers


_run = threading.local()  # cost: the RunCost of this thread's page run, if any


@contextmanager
def counting_cost() -> Iterator[RunCost]:
    """Count this thread's page run: its cost is what `current_cost()` returns inside."""
    cost = _run.cost = RunCost()
    try:
        yield cost
    finally:
        _run.cost = None


def current_cost() -> RunCost | None:
    """The cost of the page run on this thread (None outside one)."""
    return getattr(_run, "cost", None)


RECENT = 5.0  # seconds: a session whose page started this recently is still in class


class Activity:
    """Which sessions are using the server: pages running now, and each session's last start.

    A class clicks in bursts: at the instant one tab starts a run, the others are often between
    two clicks. So "someone else is here" means: a run in progress, or another session started
    one within the last RECENT seconds.
    """

    def __init__(self) -> None:
        self._count = 0
        self._last: dict[str, float] = {}  # session -> when its last page run started
        self._sharing: dict[str, float] = {}  # the same, for the sessions that share (below)
        self._lock = threading.Lock()

    @contextmanager
    def running(self, session: str = "", *, shares: bool = True):
        """A page run of `session`; `shares`: whether the session counts among those the
        capacity is divided by (one that has really interacted: a fresh session or browser
        does not, or every script's new session would shrink the class's share)."""
        now = time.monotonic()
        with self._lock:
            self._count += 1
            since = now - max(RECENT, ACTIVE)
            self._last = {k: t for k, t in self._last.items() if t > since}
            self._sharing = {k: t for k, t in self._sharing.items() if t > since}
            self._last[session] = now
            if shares:
                self._sharing[session] = now
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1

    def busy(self, me: str | None = None) -> bool:
        """Is a page running, or did a session other than `me` start one within RECENT
        seconds? (The caller's own run is not counted while it waits.)"""
        since = time.monotonic() - RECENT
        with self._lock:
            return self._count > 0 or any(t > since for k, t in self._last.items() if k != me)

    def sessions(self, me: str = "") -> int:
        """How many sharing sessions started a run within ACTIVE seconds, `me` included (the
        ones the process is divided among: share_per_tab)."""
        since = time.monotonic() - ACTIVE
        with self._lock:
            return len({k for k, t in self._sharing.items() if t > since} | {me})


RUNS = Activity()


def wait_while_busy(seconds: float, me: str | None = None, step: float = 0.2) -> float:
    """Sleep up to `seconds`, but only while other sessions are using the server; returns the
    seconds slept."""
    start = time.monotonic()
    deadline = start + seconds
    while RUNS.busy(me) and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(step, left))
    return time.monotonic() - start


class Admission:
    """At most `slots` page runs at once in this process; the others wait in line. The line is
    ordered by how much CPU each tab has in hand (its bucket's level), then by arrival: a
    student who clicks now and then goes before a tab that keeps the server busy, which gets
    the slots nobody else is waiting for.

    Streamlit gives every session's run a thread, and Python runs one thread at a time. When a
    whole class reruns at once (a teacher's change, followed by 60 students), thirty runnable
    threads share the GIL with the server's event loop, which sends every page to its browser:
    the loop then waits its turn among thirty and every page arrives seconds late (measured:
    event-loop lag p90 0.28 s, max 4.6 s). With a few runs at a time, the loop is served at once
    and each run finishes in its own time.

    Newcomers (kit.frame: a tab with less than EARNED CPU seconds in hand, such as a browser
    seen for the first time, or a tab that spent its burst) come after every other tab
    and hold at most `slots - 1` slots together, so one slot stays free for a student who has
    been there a while: a run cannot be stopped once it holds a slot, and a flood of fresh
    sessions would otherwise hold them all (issue 26: a class behind one shared address waited
    16.8 s in this line over 269 clicks while five prank addresses flooded it, 0.2 s alone).
    Among newcomers, those of an address that was there first (`known`: session_door's
    established addresses, whose students stayed) go before strangers' (issue 26: a class
    behind one router opening 30 tabs had more runs in line than any flood and went last, "open
    the link" p50 0.92 s against 0.14 s alone); then the address group with fewer runs in line
    or running goes first: a class arriving behind one router is not queued behind one
    address's flood of fresh sessions.

    A run that answers the student's own click on words to come (`hurried`: the Decoding page's
    write buttons, serving.turn.hurry) goes before the others, by credit among such runs: the
    student watches for the first words, while the runs of a class following its teacher
    redraw what is already there. Issue 48: after a lesson round's reveal, the class's 15 reruns
    per process held the line for 2-3 s and the students who clicked "Write" in that second
    waited behind them, up to 2.6 s before their first words.
    """

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._running = 0
        self._newcomers = 0  # newcomers' runs holding a slot
        self._per_group: dict[str, int] = {}  # newcomers' runs in line or running, by group
        self._line: list[tuple] = []  # a heap of (tier, key, key, arrival): see _place
        self._arrivals = itertools.count()
        self._cond = threading.Condition()

    @contextmanager
    def slot(self, credit: float = 0.0, *, alone: bool = False, newcomer: bool = False,
             group: str = "", known: bool = False, hurried: bool = False):
        """Wait for a slot; `credit`: the CPU seconds this tab has in hand (more goes first);
        `newcomer`: a tab that has not earned its place yet (above); `alone`: a tab that used
        much more than its share lately runs only when no other run does (it would halve the
        speed of the run beside it: they share the GIL); `group`: its address group (newcomers
        are served group by group); `known`: a newcomer of an address that was there first
        (it goes before the strangers' newcomers); `hurried`: a run the student's click waits on
        for words to come (above; a newcomer or a heavy tab keeps its place). A run inside a run
        takes no second slot."""
        if getattr(_held, "line", None) is not None:
            yield
            return
        self._acquire(credit, alone, newcomer, group, known, hurried)
        _held.line, _held.credit, _held.alone = self, credit, alone
        _held.newcomer, _held.group, _held.known = newcomer, group, known
        _held.hurried = hurried
        try:
            yield
        finally:
            _held.line = None
            self._release(newcomer, group)

    def _place(self, credit: float, alone: bool, newcomer: bool, group: str,
               known: bool = False, hurried: bool = False) -> tuple:
        """A run's place in line (called under the lock): the hurried runs of tabs that earned
        their place first, then the other tabs that earned theirs, each by credit; then the
        newcomers of known addresses, then the strangers', each by their group's runs in line
        or running, then credit; the heavy tabs last (at the head of the
        line, one waiting to run alone would hold up all the others behind it)."""
        ahead = 0
        if newcomer:
            ahead = self._per_group.get(group, 0)
            self._per_group[group] = ahead + 1
        tier = 4 if alone else (3 - known if newcomer else 1 - hurried)
        return (tier, ahead, -credit, next(self._arrivals))

    def _acquire(self, credit: float, alone: bool = False, newcomer: bool = False,
                 group: str = "", known: bool = False, hurried: bool = False) -> None:
        room = 1 if alone else self.slots
        start = time.monotonic()
        with self._cond:
            me = self._place(credit, alone, newcomer, group, known, hurried)
            heapq.heappush(self._line, me)
            while (self._line[0] != me or self._running >= room
                   or (newcomer and self._newcomers >= max(1, self.slots - 1))):
                self._cond.wait()
            heapq.heappop(self._line)
            self._running += 1
            self._newcomers += newcomer
            self._cond.notify_all()  # the next in line may take a free slot too
        _held.waited = getattr(_held, "waited", 0.0) + time.monotonic() - start

    def _release(self, newcomer: bool = False, group: str = "") -> None:
        with self._cond:
            self._running -= 1
            if newcomer:
                self._newcomers -= 1
                left = self._per_group.get(group, 1) - 1
                if left > 0:
                    self._per_group[group] = left
                else:
                    self._per_group.pop(group, None)  # groups come and go: keep the live ones
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._line)


# line, credit, alone, newcomer, group, known, hurried: the slot this thread's page run holds,
# if any; waited: the seconds this thread waited in a line (turn_stats reads it)
_held = threading.local()


def line_seconds(reset: bool = False) -> float:
    """Seconds this thread's runs waited in an Admission line since the last reset."""
    waited = getattr(_held, "waited", 0.0)
    if reset:
        _held.waited = 0.0
    return waited


@contextmanager
def outside_the_line():
    """Give this thread's slot back while it waits for something other than Python: a
    generation waiting for its room or for the same runs made by another session, and running
    (mostly passes of the model shared by every generation: caches.SHARED_STEPS). The other
    students' runs go on meanwhile; it then queues again."""
    line = getattr(_held, "line", None)
    if line is None:
        yield
        return
    line._release(_held.newcomer, _held.group)
    _held.line = None
    try:
        yield
    finally:
        line._acquire(_held.credit, _held.alone, _held.newcomer, _held.group, _held.known,
                      _held.hurried)
        _held.line = line
