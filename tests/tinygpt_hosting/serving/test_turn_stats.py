"""serving.turn_stats: where page runs spend their time, per address group (issue 26)."""

from __future__ import annotations

import pytest

from tinygpt_hosting.serving.turn_stats import TurnStats


def test_nothing_is_counted_unless_a_report_is_written():
    stats = TurnStats()
    stats.add("203.0.113.7", runs=1, waited_line_s=2.0)
    assert stats.snapshot()["groups"] == {}


def test_counters_add_up_per_group_beside_the_processs_cpu():
    stats = TurnStats()
    stats.on = True
    stats.add("203.0.113.7", runs=1, waited_line_s=0.5, cpu_charged_s=0.25)
    stats.add("203.0.113.7", runs=1, newcomer_runs=True, waited_pool_s=1.5)
    stats.add("198.51.100.1", runs=1, cpu_charged_s=0.5)
    snap = stats.snapshot()
    school = snap["groups"]["203.0.113.7"]
    assert school["runs"] == 2 and school["newcomer_runs"] == 1
    assert school["waited_line_s"] == 0.5 and school["waited_pool_s"] == 1.5
    assert snap["cpu_charged_s"] == pytest.approx(0.75)
    assert snap["process_cpu_s"] > 0  # this process's CPU time, to compare with the charges


def test_groups_past_the_bound_add_up_as_other():
    stats = TurnStats(max_groups=2)
    stats.on = True
    for n in range(5):
        stats.add(f"198.51.100.{n}", runs=1)
    groups = stats.snapshot()["groups"]
    assert set(groups) == {"198.51.100.0", "198.51.100.1", "other"}
    assert groups["other"]["runs"] == 3
