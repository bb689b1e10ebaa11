"""serving.browsers: CPU buckets keyed on what a fresh session cannot reset (issue 26)."""

from __future__ import annotations

import pytest

from tinygpt_hosting.serving import browsers, fair_share
from tinygpt_hosting.serving.browsers import NEWCOMER_BURST, PROBATION, THIS_MACHINE, Browsers
from tinygpt_hosting.serving.fair_share import PRESENT_GAP

SHARE, BURST = 0.05, 10.0
SCHOOL = "203.0.113.7"


def token(n: int) -> str:
    return f"{n:043d}"


def test_a_new_browsers_bucket_starts_empty_and_earns_its_burst():
    registry = Browsers()
    bucket = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=0.0)
    assert bucket.level == 0.0 and bucket.cap == 0.0
    for second in range(5, int(PROBATION) + 1, 5):  # there, a run every 5 s
        bucket.refill(now=float(second))
    assert bucket.level == pytest.approx(BURST) and bucket.ceiling is None  # earned


def test_a_browser_away_for_an_hour_has_earned_no_more_than_one_pause():
    registry = Browsers(idle_seconds=7200)
    bucket = registry.bucket(None, token(1), SCHOOL, 0.001, BURST, now=0.0)
    bucket.refill(now=3600.0)  # (3.6 s at its share; one pause of presence is more)
    assert bucket.level == pytest.approx(PRESENT_GAP * BURST / PROBATION)
    assert bucket.level < BURST


def test_this_machines_sessions_keep_todays_full_bucket():
    registry = Browsers()
    fresh = registry.bucket(None, None, THIS_MACHINE, SHARE, BURST, now=0.0)
    assert fresh.level == BURST and fresh.pool is None
    assert registry.bucket(fresh, token(1), THIS_MACHINE, SHARE, BURST, now=1.0) is fresh
    assert len(registry) == 0


def test_a_reload_finds_its_browsers_bucket_and_its_debt():
    registry = Browsers()
    first = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=0.0)
    later = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=PROBATION + 1)
    assert later is first  # a new session (kept=None) of the same browser
    later.charge(9.0, now=PROBATION + 1)
    again = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=PROBATION + 2)
    assert again.wait_seconds(now=PROBATION + 2) > 0  # the debt came along


def test_a_fresh_session_per_request_draws_from_one_pool_per_address():
    """No token, or a new token each time: one pool, which empties, then every new one waits."""
    registry = Browsers()
    spent = 0.0
    for n in range(200):
        bucket = registry.bucket(None, token(n) if n % 2 else None, SCHOOL, SHARE, BURST,
                                 now=n * 0.01)
        bucket.charge(1.0, now=n * 0.01)
        spent += 1.0
    late = registry.bucket(None, token(999), SCHOOL, SHARE, BURST, now=2.0)
    assert late.wait_seconds(now=2.0) == pytest.approx(fair_share.MAX_WAIT, abs=0.1)  # in debt
    elsewhere = registry.bucket(None, token(1000), "198.51.100.1", SHARE, BURST, now=2.0)
    assert elsewhere.wait_seconds(now=2.0) == 0.0  # another address is not held up
    assert spent > NEWCOMER_BURST


def test_past_its_first_minute_a_browser_draws_from_its_own_bucket():
    registry = Browsers()
    bucket = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=0.0)
    assert bucket.pool is not None
    bucket.charge(5.0, now=1.0)  # charged to the pool meanwhile
    assert bucket.level >= 0.0
    bucket = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=PROBATION + 1)
    assert bucket.pool is None and 0 < bucket.level <= BURST


def test_an_address_gets_a_limited_number_of_browser_buckets(monkeypatch):
    monkeypatch.setattr(browsers, "BROWSERS_PER_ADDRESS", 3)
    registry = Browsers()
    own = [registry.bucket(None, token(n), SCHOOL, SHARE, BURST, now=0.0) for n in range(3)]
    extra = registry.bucket(None, token(9), SCHOOL, SHARE, BURST, now=0.0)
    assert extra not in own and extra.pool is None and extra.level == BURST  # one shared tab
    assert registry.bucket(None, None, SCHOOL, SHARE, BURST, now=0.0) is extra
    assert registry.bucket(None, token(9), "198.51.100.1", SHARE, BURST, now=0.0) is not extra


def test_unused_entries_are_forgotten_after_the_session_ttl_and_bounded():
    registry = Browsers(idle_seconds=120.0, max_entries=50)
    for n in range(200):
        registry.bucket(None, token(n), f"10.0.{n}.1", SHARE, BURST, now=0.0)
    assert len(registry) == 50
    registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=121.0)
    assert len(registry) == 2  # the browser and its address's pool; the idle ones are gone
    assert registry.live(now=121.0 + 120.5) == 0  # and with no more runs, they leave too


def test_an_idle_or_new_session_does_not_dilute_the_share(monkeypatch):
    activity = fair_share.Activity()
    registry = Browsers()
    registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=0.0)
    old = registry.bucket(None, token(1), SCHOOL, SHARE, BURST, now=PROBATION + 1)
    for n in range(100):  # a script: a fresh session, with a fresh token or none, per request
        who = (token(100 + n) if n % 2 else None, SCHOOL)
        bucket = registry.bucket(None, *who, SHARE, BURST, now=PROBATION + 1)
        with activity.running(f"script {n}", shares=Browsers.shares(bucket, *who)):
            pass
    with activity.running("student", shares=Browsers.shares(old, token(1), SCHOOL)):
        pass
    with activity.running("teacher's laptop", shares=Browsers.shares(None, None, THIS_MACHINE)):
        pass
    assert activity.sessions("me") == 3  # the student, the laptop and me
    assert activity.busy("me")  # the scripts' runs still count as someone using the server


def test_sixty_students_behind_one_router_are_served_as_one_class():
    """A class of 60 arriving within 30 s behind one address, each looking at a view of 0.15 s
    every 8 s for three minutes: nobody waits more than a moment."""
    registry = Browsers()
    share = fair_share.share_per_tab(0.1, 60)
    worst = 0.0
    for second in range(180):
        for student in range(60):
            arrives = student / 2  # one every half second
            if second < arrives or (second - int(arrives)) % 8:
                continue
            known = token(student) if second > arrives else None  # first run: no token yet
            bucket = registry.bucket(None, known, SCHOOL, share, BURST, now=float(second))
            bucket.share = share
            worst = max(worst, bucket.wait_seconds(now=float(second)))
            bucket.charge(0.15, now=float(second))
    assert worst < 1.0


def test_one_address_keeps_a_bounded_number_of_sessions_busy():
    from tinygpt_hosting.serving.browsers import Sessions

    sessions = Sessions(3, idle_seconds=120.0)
    assert all(sessions.admit(f"s{n}", SCHOOL, now=0.0) for n in range(3))
    assert not sessions.admit("s9", SCHOOL, now=1.0)  # a fourth tab: refused
    assert sessions.admit("s0", SCHOOL, now=1.0)  # the ones admitted go on
    assert sessions.admit("s9", "198.51.100.1", now=1.0)  # another address is not counted
    assert sessions.admit("local", THIS_MACHINE, now=1.0) and sessions.of(SCHOOL) == 3
    assert sessions.admit("s9", SCHOOL, now=122.0)  # the idle ones are forgotten after the TTL
    assert sessions.of(SCHOOL) == 1
    assert sessions.live(now=122.0) == 1 and sessions.live(now=250.0) == 0


def test_a_session_has_stayed_once_its_first_run_is_old_enough():
    from tinygpt_hosting.serving.browsers import Sessions

    sessions = Sessions(3, idle_seconds=120.0)
    assert sessions.admit("s0", SCHOOL, now=0.0)
    assert not sessions.stayed("s0", 20.0, now=19.0)
    assert sessions.admit("s0", SCHOOL, now=19.0)  # a later run keeps its first run's time
    assert sessions.stayed("s0", 20.0, now=20.0)
    assert not sessions.stayed("never-seen", 20.0, now=20.0)
    assert sessions.admit("local", THIS_MACHINE, now=0.0)  # this machine is not recorded
    assert not sessions.stayed("local", 20.0, now=60.0)
