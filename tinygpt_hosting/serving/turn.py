"""A page run's fair turn of the server: the hosting wing's `turn` (tinygpt_app.host).

Every page run of a class server takes its turn (kit.frame calls `host().turn()` around a page's
body, app.py around a whole run): it waits if its tab used more than its share lately, holds
one of the process's page slots, and is charged the CPU it used, helper threads included
(serving.fair_share). Newcomers line up after the others, the tabs of one address are capped,
and a live class's teacher keeps a full share (issues 12, 26).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from tinygpt_app import settings
from tinygpt_app.compute import shared_cache
from tinygpt_app.kit import browser_token, hooks
from tinygpt_app.kit.slots import Slot
from tinygpt_hosting import streamlit_internals
from tinygpt_hosting.serving import browsers, fair_share, registry_report, session_door, turn_stats
from tinygpt_hosting.serving.client_address import address_group, client_address

BUCKET: Slot[fair_share.Bucket | None] = Slot("fair_share.bucket", None)  # this tab's browser's
HURRIED: Slot[bool] = Slot("fair_share.hurried", False)  # this run answers a click: see hurry()
ADMISSION = fair_share.Admission(settings.page_runs())  # page runs at once in this process
HEAVY_TABS = fair_share.HeavyTabs()  # all heavy tabs of this process, as one tab
BROWSERS = browsers.Browsers(idle_seconds=settings.disconnected_session_ttl())  # their buckets
SESSIONS = browsers.Sessions(settings.sessions_per_address(),
                             idle_seconds=settings.disconnected_session_ttl())
if report_file := settings.registry_report():  # a bench reads the registries' sizes (off)
    turn_stats.STATS.on = True  # and where the runs spend their time, per address group
    registry_report.start(report_file, {
        "turns": turn_stats.STATS.snapshot,
        "buckets": BROWSERS.live, "busy_sessions": SESSIONS.live,
        "streamlit_sessions": streamlit_internals.session_counts,
        "refused_new_sessions": session_door.refused,
        "shared_cache_mb": lambda: round(shared_cache.total_bytes() / 2**20, 1)})
TOO_MANY_TABS = ("Too many tabs are open from your network address on this server. Close some "
                 "and reload this one.")


def session_id() -> str:
    """This browser tab's session (empty outside a Streamlit run)."""
    return streamlit_internals.session_id()


@contextmanager
def fair_turn() -> Iterator[None]:
    """Run the body in this tab's turn: wait if it used more than its share lately, hold a page
    slot (ADMISSION), and charge the CPU it used, helper threads included, to its bucket.
    Every run takes one from its first line (app.py: the navigation, sidebar and hooks cost too),
    a page run on its own takes one in page(), and a fragment that computes (a slider's own
    rerun) takes one too, so no control of the app can be clicked in a loop for free. Inside a
    turn, a no-op."""
    if fair_share.current_cost() is not None:
        yield
        return
    browser, address = _who()
    if not SESSIONS.admit(session_id(), address):  # before any work, and its memory
        st.warning(TOO_MANY_TABS)
        st.stop()
    if SESSIONS.stayed(session_id(), session_door.STAYED):  # a student who stays: its address
        session_door.established(address)                  # keeps a door of its own
    start, group = time.monotonic(), address_group(address)
    fair_share.line_seconds(reset=True)
    hurried = took_hurry()
    bucket = wait_for_turn(group)
    credit, heavy = ((bucket.level, counts_as_heavy(bucket)) if bucket is not None
                     else (0.0, False))
    newcomer, known = place_in_line(bucket, browser, address)
    shares = BROWSERS.shares(bucket, browser, address)
    with fair_share.counting_cost() as cost:
        try:
            with (ADMISSION.slot(credit, alone=heavy, newcomer=newcomer, group=group,
                                 known=known, hurried=hurried),
                  fair_share.RUNS.running(session_id(), shares=shares)):
                yield
        finally:  # also after st.stop() and st.rerun()
            cpu = 0.0
            if bucket is not None:  # and what its helpers add later, when they add it
                late = functools.partial(_charge_late, bucket, heavy, group)
                HEAVY_TABS.charge(bucket, cpu := cost.close(late), heavy)
            turn_stats.STATS.add(group, runs=1, newcomer_runs=newcomer, cpu_charged_s=cpu,
                                 waited_line_s=fair_share.line_seconds(),
                                 turn_s=time.monotonic() - start)


def hurry() -> None:
    """This run answers the student's own click on words to come (tinygpt_app.host's `hurry`:
    the Decoding page's write buttons, from their callback, before the run's turn): its turn
    goes before the runs of tabs that did not ask (fair_share.Admission). Once per click: the
    turn that follows takes the mark."""
    HURRIED.set(True)


def took_hurry() -> bool:
    """Was this run hurried (hurry())? The mark is taken: the next run waits as any other."""
    return HURRIED.pop()


def place_in_line(bucket: fair_share.Bucket | None, browser: str | None,
                  address: str) -> tuple[bool, bool]:
    """(newcomer, known) of this run in the Admission line. A newcomer comes after the others,
    and newcomers together leave them a slot: a tab that has not earned its place yet (a new
    browser's first seconds, a tab that spent its burst), and a run without a browser token
    from a stranger's address (session_door: none of its sessions stayed), whose tokenless
    runs share a bucket that starts full and would otherwise go first by credit (a script's
    fresh session per request sends no token). Known: a newcomer of an address that was there
    first, which goes before the strangers' newcomers. A live class's teacher is neither."""
    if bucket is None or leads_a_class():
        return False, False
    known = session_door.known(address)
    newcomer = fair_share.newcomer(bucket) or (not browser and not known)
    return newcomer, newcomer and known


def _charge_late(bucket: fair_share.Bucket, heavy: bool, group: str, cpu: float) -> None:
    """What a run's helper threads add after it was charged (a generation going on)."""
    HEAVY_TABS.charge(bucket, cpu, heavy)
    turn_stats.STATS.add(group, cpu_charged_s=cpu)


def wait_for_turn(group: str = "") -> fair_share.Bucket | None:
    """This session's CPU bucket, after waiting (with a note) if it used more than its share
    lately; None when fair shares are off (TINYGPT_FAIR_SHARE=0)."""
    most = settings.fair_share()
    if most <= 0:
        return None
    # today's share: the process divided among the sessions using it (heavy tabs get one share
    # together); the refill since the last run is counted at it. A live class's teacher keeps
    # the most a tab may have, and is never counted among the heavy tabs: the whole class
    # follows that tab's views.
    share = fair_share.share_per_tab(most, fair_share.RUNS.sessions(session_id()))
    bucket = BUCKET.set(BROWSERS.bucket(  # a browser's, not a session's
        BUCKET.get(), *_who(), share, settings.burst_seconds()))
    HEAVY_TABS.bucket.share = share
    bucket.share = most if leads_a_class() else share
    wait = HEAVY_TABS.wait_seconds(bucket, heavy=counts_as_heavy(bucket))
    if wait > 0 and fair_share.RUNS.busy(session_id()):
        note = st.empty()
        note.info(f"This tab asked for a lot of work in a short time, so it waits up to "
                  f"{wait:.1f} s to leave the rest of the class its share of the server.")
        waited = fair_share.wait_while_busy(wait, session_id())  # sleeping lets go of the GIL
        note.empty()
        if turn_stats.STATS.on:  # a bench's report only: nothing to classify otherwise
            turn_stats.STATS.add(group, **{_what_waits(bucket): waited},
                                 long_waits=waited >= turn_stats.LONG_WAIT)
    return bucket


def _what_waits(bucket: fair_share.Bucket) -> str:
    """Which of a waiting run's limits held it longest: its own bucket, its address's
    newcomer pool or the heavy tabs' bucket (a turn_stats field)."""
    own = bucket.debt_seconds(), "waited_own_s"
    pool = bucket.pool.wait_seconds() if bucket.pool is not None else 0.0, "waited_pool_s"
    heavy = (HEAVY_TABS.shared_wait_seconds() if counts_as_heavy(bucket) else 0.0,
             "waited_heavy_s")
    return max(own, pool, heavy)[1]


def _who() -> tuple[str | None, str]:
    """(browser token, client address) of this run: what its CPU bucket is keyed on."""
    return browser_token.browser_token(), client_address(st.context.ip_address)


def leads_a_class() -> bool:
    """Does this tab lead others (the teacher of a live class, through its page hooks)?"""
    return any(feature.leads_others() for feature in hooks.registered())


def counts_as_heavy(bucket: fair_share.Bucket) -> bool:
    """Is this tab one of the heavy tabs (fair_share.HeavyTabs)? Never a live class's
    teacher, whom the whole class follows."""
    return bucket.heavy and not leads_a_class()
