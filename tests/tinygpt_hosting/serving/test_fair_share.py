"""Fair shares (issue 12): a session that used more CPU than its share waits before its next
run, with a note; a student who clicks now and then never waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tinygpt_hosting.serving import fair_share
from tinygpt_hosting.serving.fair_share import (
    MAX_WAIT,
    RUNS,
    Bucket,
    thread_cpu_seconds,
    wait_while_busy,
)


def wait_until(condition: Callable[[], bool], seconds: float = 5.0) -> None:
    """Wait for `condition` (a thread got there); fail, not hang, after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


def finishes(body: Callable[[], None], seconds: float = 10.0) -> None:
    """Run `body` in a thread of its own: a deadlock fails the test after `seconds` instead of
    hanging the run (the thread is a daemon: it cannot keep the process alive)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            body()
        except BaseException as err:  # noqa: BLE001 - handed to the test's thread
            errors.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: a deadlock?"
    if errors:
        raise errors[0]


def joined(*threads: threading.Thread, seconds: float = 5.0) -> None:
    for thread in threads:
        thread.join(seconds)
        assert not thread.is_alive(), f"{thread.name} still running after {seconds} s"


def test_a_quiet_session_never_waits():
    bucket = Bucket(share=0.1, burst=3.0, updated=0.0)
    for second in range(0, 600, 5):  # a view of 0.3 s every 5 s: 0.06 s per second
        assert bucket.wait_seconds(now=second) == 0.0
        bucket.charge(0.3, now=second)


def test_a_busy_session_waits_for_what_it_overspent():
    bucket = Bucket(share=0.1, burst=3.0, updated=0.0)
    bucket.charge(4.0, now=0.0)  # 1 s past its burst
    assert bucket.wait_seconds(now=0.0) == pytest.approx(10.0)  # 1 s at 0.1 s per second
    assert bucket.wait_seconds(now=4.0) == pytest.approx(6.0)
    assert bucket.wait_seconds(now=10.0) == 0.0


def test_the_refill_stops_at_the_burst_and_the_debt_at_the_longest_wait():
    bucket = Bucket(share=0.1, burst=3.0, updated=0.0)
    bucket.refill(now=10_000.0)
    assert bucket.level == 3.0
    bucket.charge(1_000.0, now=10_000.0)
    assert bucket.wait_seconds(now=10_000.0) == pytest.approx(MAX_WAIT)


def test_many_heavy_tabs_share_one_tabs_share():
    """Three scripted tabs, each within its own bucket, together wait as one tab would; a
    quiet student's run beside them does not wait, and one heavy tab alone is not slowed."""
    heavy_tabs = fair_share.HeavyTabs(share=0.1, burst=2.0)
    heavy_tabs.bucket.updated = 0.0
    tabs = [Bucket(share=0.1, burst=10.0, updated=0.0) for _ in range(3)]
    for tab in tabs:  # HEAVY_DEBT and a bit each: every tab heavy, none past its own burst
        heavy_tabs.charge(tab, fair_share.HEAVY_DEBT + 0.1, heavy=True, now=0.0)
    for tab in tabs:  # alone, each could run now; together they owe 7.3 s: past MAX_WAIT
        assert tab.heavy and tab.wait_seconds(now=0.0) == 0.0
        assert heavy_tabs.wait_seconds(tab, now=0.0) == pytest.approx(MAX_WAIT)
    student = Bucket(share=0.1, burst=10.0, updated=0.0)
    assert heavy_tabs.wait_seconds(student, now=0.0) == 0.0
    alone = fair_share.HeavyTabs(share=0.1, burst=2.0)
    alone.bucket.updated = 0.0
    lone_tab = Bucket(share=0.1, burst=2.0, updated=0.0)
    alone.charge(lone_tab, 4.0, heavy=True, now=0.0)  # its own debt is the shared debt
    assert alone.wait_seconds(lone_tab, now=0.0) == lone_tab.wait_seconds(now=0.0) > 0


def test_thread_cpu_time_counts_work_not_sleep():
    start = thread_cpu_seconds()
    time.sleep(0.2)
    slept = thread_cpu_seconds() - start
    total = 0
    for i in range(2_000_000):
        total += i
    worked = thread_cpu_seconds() - start - slept
    assert slept < 0.05 and worked > 0.02


def test_a_runs_cost_counts_its_helper_threads_once_and_not_outside_it():
    assert fair_share.current_cost() is None
    with fair_share.counting_cost() as cost:
        assert fair_share.current_cost() is cost
        helper = threading.Thread(target=lambda: cost.add(0.75))  # as a generation's run does
        helper.start()
        joined(helper)
        assert 0.75 <= cost.seconds() < 0.75 + 0.2
    assert fair_share.current_cost() is None


def test_what_helpers_add_after_the_run_was_charged_is_charged_at_once():
    """A generation outlives its page run when the student clicks on: its cost still goes to
    the tab, when it is known."""
    late: list[float] = []
    with fair_share.counting_cost() as cost:
        cost.add(0.5)
        charged = cost.close(late.append)
    assert 0.5 <= charged < 0.5 + 0.2 and late == []
    cost.add(1.25)
    cost.add(-1.0)  # never a refund
    assert late == [1.25, 0.0]


pytest.importorskip("streamlit", reason="the app tests need streamlit")


def overspent_page(monkeypatch):
    from tests.apptest_support import open_page

    monkeypatch.setenv("TINYGPT_FAIR_SHARE", "1")
    monkeypatch.setenv("TINYGPT_BURST_SECONDS", "0.1")
    at = open_page("pages/6_Logits.py", prompt="Hello there")
    bucket = at.session_state["fair_share.bucket"]
    assert bucket.level < 0.1  # the first run was charged
    bucket.level = -0.5  # as after an expensive run: half a second to wait at 1 s per second
    return at


def test_an_overspent_tab_waits_while_other_students_pages_run(monkeypatch, tiny_models):
    at = overspent_page(monkeypatch)
    started = time.monotonic()
    with RUNS.running():  # another session's page, running all along
        at.run()
    assert time.monotonic() - started >= 0.45
    assert not at.exception
    assert at.session_state["fair_share.bucket"].level <= 0.1


def test_an_overspent_tab_alone_on_the_server_does_not_wait(monkeypatch, tiny_models):
    monkeypatch.setattr(fair_share, "RUNS", fair_share.Activity())  # no other session here
    at = overspent_page(monkeypatch)
    started = time.monotonic()
    at.run()
    assert time.monotonic() - started < 0.45 + at_least_a_run(at)
    assert not at.exception


def at_least_a_run(at) -> float:
    """The time of a rerun of the same page with nothing to wait for."""
    started = time.monotonic()
    at.session_state["fair_share.bucket"].level = 10.0
    at.run()
    return time.monotonic() - started


def test_waiting_stops_when_the_others_are_done(monkeypatch):
    monkeypatch.setattr(fair_share, "RECENT", 0.3)
    activity = fair_share.Activity()
    monkeypatch.setattr(fair_share, "RUNS", activity)
    with activity.running("other"):
        assert wait_while_busy(0.2, "me", step=0.05) >= 0.15
    assert activity.busy("me")  # the other tab clicked a moment ago: still in class
    assert not activity.busy("other")  # its own recent click does not count for itself
    time.sleep(0.35)
    assert wait_while_busy(5.0, "me") < 0.05


def test_fair_shares_can_be_turned_off(monkeypatch, tiny_models):
    from tests.apptest_support import open_page

    monkeypatch.setenv("TINYGPT_FAIR_SHARE", "0")
    at = open_page("pages/6_Logits.py", prompt="Hello there")
    assert "fair_share.bucket" not in at.session_state


def test_admission_lets_k_runs_in_at_once_first_come_first_served():
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(2)
    inside, most, order = [0], [0], []
    lock, release = threading.Lock(), threading.Event()

    def run(name: str) -> None:
        with line.slot():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                order.append(name)
            release.wait(5)
            with lock:
                inside[0] -= 1

    threads = []
    for name in "abcde":  # they arrive in this order
        threads.append(threading.Thread(target=run, args=(name,), daemon=True))
        threads[-1].start()
        wait_until(lambda: line.waiting + inside[0] == len(threads))
    assert inside[0] == 2 and line.waiting == 3 and order == ["a", "b"]
    release.set()
    joined(*threads)
    assert most[0] == 2 and order == list("abcde") and line.waiting == 0


def test_a_run_inside_a_run_takes_no_second_slot():
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(1)

    def body() -> None:
        with line.slot(), line.slot():  # would wait for itself forever without re-entry
            pass
        with line.slot():  # the slot was given back
            pass

    finishes(body)


def order_in_line(*waiting: tuple[str, float, dict]) -> list[str]:
    """The order runs take a one-slot Admission line in: "first" (credit 10) holds the slot
    while the `waiting` runs (name, credit, slot keywords) queue one by one, then lets go."""
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(1)
    order, release = [], threading.Event()

    def run(name: str, credit: float, how: dict) -> None:
        with line.slot(credit, **how):
            order.append(name)
            if name == "first":
                release.wait(5)

    first = threading.Thread(target=run, args=("first", 10.0, {}), daemon=True)
    first.start()
    wait_until(lambda: bool(order))
    threads = []
    for name, credit, how in waiting:
        threads.append(threading.Thread(target=run, args=(name, credit, how), daemon=True))
        threads[-1].start()
        wait_until(lambda: line.waiting == len(threads))
    release.set()
    joined(first, *threads)
    return order


def test_in_line_a_tab_with_more_cpu_in_hand_goes_first():
    order = order_in_line(("busy tab", -1.0, {}), ("quiet student", 9.5, {}),
                          ("another student", 9.5, {}))
    assert order == ["first", "quiet student", "another student", "busy tab"]


def test_a_hurried_run_goes_before_the_tabs_that_did_not_click():
    """A student's click on words to come (hurried) goes before the class's other runs, even
    those with more CPU in hand; a newcomer's or a heavy tab's click keeps its place."""
    order = order_in_line(("pushed", 10.0, {}), ("heavy click", 9.0, {"alone": True}),
                          ("newcomer click", 0.5, {"newcomer": True}),
                          ("click", 9.8, {}), ("writer", 9.0, {"hurried": True}),
                          ("heavy writer", -5.0, {"hurried": True, "alone": True}),
                          ("new writer", 0.5, {"hurried": True, "newcomer": True}),
                          ("fuller writer", 9.5, {"hurried": True}))
    assert order == ["first", "fuller writer", "writer", "pushed", "click", "newcomer click",
                     "new writer", "heavy click", "heavy writer"]


def test_a_hurried_run_keeps_its_place_when_it_comes_back_from_outside_the_line():
    """The Decoding page watches a generation outside the line, then queues again to draw the
    finished run: still hurried, it goes before a run that came meanwhile."""
    from tinygpt_hosting.serving.fair_share import Admission, outside_the_line

    line = Admission(1)
    order, back = [], threading.Event()

    def other(name: str) -> None:
        with line.slot(10.0):
            order.append(name)
            if name == "pushed":
                back.wait(5)

    def writer() -> None:
        with line.slot(1.0, hurried=True):
            pushed = threading.Thread(target=other, args=("pushed",), daemon=True)
            with outside_the_line():
                pushed.start()
                wait_until(lambda: order == ["pushed"])
                later = threading.Thread(target=other, args=("later",), daemon=True)
                later.start()
                wait_until(lambda: line.waiting == 1)
            order.append("writer")  # after the pushed run, before the later one
            joined(pushed)
        joined(later)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    wait_until(lambda: line.waiting == 2)  # the later run and the writer, back in line
    back.set()
    joined(thread)
    assert order == ["pushed", "writer", "later"]


def test_outside_the_line_gives_the_slot_back_and_takes_it_again():
    from tinygpt_hosting.serving.fair_share import Admission, outside_the_line

    line = Admission(1)
    other_ran = threading.Event()

    def other() -> None:
        with line.slot():
            other_ran.set()

    def body() -> None:
        with line.slot(5.0):
            thread = threading.Thread(target=other, daemon=True)
            thread.start()
            wait_until(lambda: line.waiting == 1)
            with outside_the_line():  # waiting for a generation: the other run goes meanwhile
                assert other_ran.wait(5)
            joined(thread)
            with line.slot():  # still inside: no second slot, no deadlock
                pass
        with outside_the_line():  # outside any page run: nothing to give back
            pass

    finishes(body)


def test_a_heavy_tab_runs_alone_and_after_the_others():
    from tinygpt_hosting.serving.fair_share import HEAVY_DEBT, Admission

    assert Bucket(share=0.1, burst=10.0, level=10.0 - HEAVY_DEBT - 0.1).heavy
    assert not Bucket(share=0.1, burst=10.0, level=10.0 - HEAVY_DEBT + 0.1).heavy
    line = Admission(2)
    started, release = [], threading.Event()

    def run(name: str, credit: float, alone: bool) -> None:
        with line.slot(credit, alone=alone):
            started.append(name)
            release.wait(5)

    student = threading.Thread(target=run, args=("student", 10.0, False), daemon=True)
    student.start()
    wait_until(lambda: bool(started))
    heavy = threading.Thread(target=run, args=("heavy tab", 2.0, True), daemon=True)
    heavy.start()
    wait_until(lambda: line.waiting == 1)
    time.sleep(0.05)
    assert started == ["student"]  # a slot is free, but the heavy tab waits to run alone
    other = threading.Thread(target=run, args=("other student", 9.9, False), daemon=True)
    other.start()
    wait_until(lambda: len(started) == 2)
    assert started == ["student", "other student"]  # it goes past the heavy tab
    release.set()
    joined(student, heavy, other)
    assert started == ["student", "other student", "heavy tab"]


def test_a_generation_in_its_own_threads_is_charged_to_the_tab_that_asked(monkeypatch,
                                                                          tiny_models):
    """The Decoding page's runs play in lockstep threads, not in the page's thread: the tab
    is charged what they used too (without it a looped Decoding page was charged a fifth)."""
    from dataclasses import replace

    from tests.apptest_support import open_page
    from tinygpt_app import host

    host.load_wing()  # the class server, whose generations these are
    helpers: list[float] = []
    real = host.host().generate_runs

    def counted(*args, on_thread_cpu=None, **kwargs):
        def both(seconds: float) -> None:
            helpers.append(seconds)
            on_thread_cpu(seconds)
        return real(*args, on_thread_cpu=both if on_thread_cpu else None, **kwargs)

    monkeypatch.setattr(host, "_host", replace(host.host(), generate_runs=counted))
    charged: list[float] = []
    original = fair_share.HeavyTabs.charge
    monkeypatch.setattr(fair_share.HeavyTabs, "charge",
                        lambda self, tab, seconds, heavy, now=None:
                        (charged.append(seconds), original(self, tab, seconds, heavy, now)))
    at = open_page("pages/8_Decoding.py", prompt="To be, or not to be", seed="11")
    assert not at.exception and helpers, "the page made a generation"
    assert charged[-1] >= sum(helpers)


def test_the_share_is_the_process_divided_among_the_sessions_using_it(monkeypatch):
    activity = fair_share.Activity()
    monkeypatch.setattr(fair_share, "RUNS", activity)
    assert activity.sessions("me") == 1
    assert fair_share.share_per_tab(0.1, 1) == 0.1  # a teacher alone: the most a tab may use
    for student in range(32):
        with activity.running(f"student {student}"):
            pass
    assert activity.sessions("me") == 33 and activity.sessions("student 3") == 32
    share = fair_share.share_per_tab(0.1, activity.sessions("me"))
    assert share == pytest.approx(fair_share.CAPACITY / 33)
    assert 33 * share <= fair_share.CAPACITY + 1e-9  # together, never more than the process
    monkeypatch.setattr(fair_share, "ACTIVE", 0.0)  # long gone: they no longer count
    assert activity.sessions("me") == 1


def test_a_student_gets_the_process_divided_and_a_live_class_teacher_the_most(monkeypatch,
                                                                              tiny_models):
    from tests.apptest_support import open_page
    from tinygpt_app.kit import hooks
    from tinygpt_hosting.serving import turn

    activity = fair_share.Activity()
    monkeypatch.setattr(fair_share, "RUNS", activity)
    for student in range(30):  # a class that clicked within the last minute
        with activity.running(f"student {student}"):
            pass
    monkeypatch.setenv("TINYGPT_FAIR_SHARE", "0.1")
    at = open_page("pages/6_Logits.py", prompt="Hello there")
    assert at.session_state["fair_share.bucket"].share == pytest.approx(fair_share.CAPACITY / 31)
    # a live class's teacher, as the classroom's page hooks say it (kit.hooks.leads_others)
    hooks.register("test.teacher", hooks.PageHooks(leads_others=lambda: True))
    try:
        at.run()
        assert at.session_state["fair_share.bucket"].share == 0.1
        at.session_state["fair_share.bucket"].level = 0.0  # past HEAVY_DEBT: heavy for a student
        owed = turn.HEAVY_TABS.bucket.level
        at.run()  # the teacher is not charged to the heavy tabs' shared bucket
        assert turn.HEAVY_TABS.bucket.level >= owed
    finally:
        hooks.unregister("test.teacher")


def test_newcomers_leave_a_slot_for_the_tabs_that_earned_theirs():
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(2)
    started, release = [], threading.Event()

    def run(name: str, newcomer: bool) -> None:
        with line.slot(0.0 if newcomer else 9.0, newcomer=newcomer, group=name[0]):
            started.append(name)
            release.wait(5)

    first = threading.Thread(target=run, args=("a new tab", True), daemon=True)
    first.start()
    wait_until(lambda: bool(started))
    second = threading.Thread(target=run, args=("b new tab", True), daemon=True)
    second.start()
    wait_until(lambda: line.waiting == 1)
    time.sleep(0.05)
    assert started == ["a new tab"]  # a slot is free, but not for a second newcomer
    student = threading.Thread(target=run, args=("student", False), daemon=True)
    student.start()
    wait_until(lambda: len(started) == 2)
    assert started == ["a new tab", "student"]  # the free slot was kept for this one
    release.set()
    joined(first, second, student)
    assert started[-1] == "b new tab" and line.waiting == 0


def test_among_newcomers_the_address_with_fewer_runs_in_line_goes_first():
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(1)
    order, release = [], threading.Event()

    def run(name: str, group: str) -> None:
        with line.slot(0.0, newcomer=True, group=group):
            order.append(name)
            if name == "flood 0":
                release.wait(5)

    threads = [threading.Thread(target=run, args=("flood 0", "flood"), daemon=True)]
    threads[0].start()
    wait_until(lambda: bool(order))
    for name, group in (("flood 1", "flood"), ("flood 2", "flood"), ("class", "school")):
        threads.append(threading.Thread(target=run, args=(name, group), daemon=True))
        threads[-1].start()
        wait_until(lambda: line.waiting == len(threads) - 1)
    release.set()
    joined(*threads)
    assert order == ["flood 0", "class", "flood 1", "flood 2"]


def test_newcomers_of_an_address_that_was_there_first_go_before_the_strangers():
    """A class behind one router (its address known: its students stayed) opening many tabs
    has more runs in line than any flood, yet its newcomers go first; still after a tab that
    earned its place."""
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(1)
    order, release = [], threading.Event()

    def run(name: str, group: str, newcomer: bool = True) -> None:
        with line.slot(0.0 if newcomer else 9.0, newcomer=newcomer, group=group,
                       known=group == "school"):
            order.append(name)
            if name == "flood 0":
                release.wait(5)

    jobs = [("flood 0", "flood"), ("class 1", "school"), ("class 2", "school"),
            ("stranger", "other"), ("class 3", "school"), ("student", "school", False)]
    threads = []
    for job in jobs:
        threads.append(threading.Thread(target=run, args=job, daemon=True))
        threads[-1].start()
        wait_until(lambda: line.waiting == len(threads) - 1)
    release.set()
    joined(*threads)
    assert order == ["flood 0", "student", "class 1", "class 2", "class 3", "stranger"]


def test_a_heavy_newcomer_waiting_to_run_alone_holds_up_no_other_newcomer():
    from tinygpt_hosting.serving.fair_share import Admission

    line = Admission(3)
    started, release = [], threading.Event()

    def run(name: str, newcomer: bool, alone: bool) -> None:
        # the heavy tab has more in hand than the newcomer: by credit alone it would go first
        with line.slot(0.5 if alone else 0.0, alone=alone, newcomer=newcomer, group=name):
            started.append(name)
            release.wait(5)

    student = threading.Thread(target=run, args=("student", False, False), daemon=True)
    student.start()
    wait_until(lambda: bool(started))
    heavy = threading.Thread(target=run, args=("heavy", True, True), daemon=True)
    heavy.start()
    wait_until(lambda: line.waiting == 1)
    newcomer = threading.Thread(target=run, args=("newcomer", True, False), daemon=True)
    newcomer.start()
    wait_until(lambda: len(started) == 2)
    assert started == ["student", "newcomer"]  # past the heavy one, which waits to run alone
    release.set()
    joined(student, heavy, newcomer)
    assert started[-1] == "heavy"


def test_a_tab_with_nothing_in_hand_is_a_newcomer_in_line():
    from tinygpt_hosting.serving.browsers import THIS_MACHINE, Browsers

    registry, school = Browsers(), "203.0.113.7"
    first = registry.bucket(None, None, school, 0.05, 10.0, now=0.0)  # no token yet: shared
    assert first.level == 10.0 and not fair_share.newcomer(first)
    new = registry.bucket(first, "1" * 43, school, 0.05, 10.0, now=0.0)
    assert fair_share.newcomer(new)  # a browser seen for the first time
    new.refill(now=5.0)  # five seconds there: it has earned its place
    assert new.level >= fair_share.EARNED and not fair_share.newcomer(new)
    local = registry.bucket(None, None, THIS_MACHINE, 0.05, 10.0, now=0.0)
    assert not fair_share.newcomer(local)
    local.charge(10.0, now=0.0)
    assert fair_share.newcomer(local)  # it spent its burst
    assert not fair_share.newcomer(None)  # fair shares off
