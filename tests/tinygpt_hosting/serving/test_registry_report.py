"""serving.registry_report: the registries' sizes and the trimmed RSS, for a bench (issue 26)."""

from __future__ import annotations

import json
import time

from tinygpt_app import settings
from tinygpt_hosting.serving import registry_report


def test_a_snapshot_has_each_registrys_size_and_survives_a_broken_one():
    def broken() -> int:
        raise RuntimeError("gone")

    line = registry_report.snapshot({"buckets": lambda: 3, "broken": broken})
    assert line["buckets"] == 3 and line["broken"] == "unavailable: RuntimeError"
    assert 1 < line["rss_trimmed_mb"] < 100_000


def test_the_report_appends_lines_to_its_file(tmp_path):
    path = tmp_path / "registries.jsonl"
    registry_report.start(str(path), {"sessions": lambda: 7}, every=0.05)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(path.read_text().splitlines()
                                               if path.exists() else []) < 2:
        time.sleep(0.05)
    lines = [json.loads(line) for line in path.read_text().splitlines()[:2]]
    assert [line["sessions"] for line in lines] == [7, 7]
    assert lines[0]["time"] <= lines[1]["time"]


def test_the_report_is_off_unless_a_file_is_named():
    assert settings.registry_report({}) is None
    assert settings.registry_report({"TINYGPT_REGISTRY_REPORT": "/tmp/r.jsonl"}) == "/tmp/r.jsonl"
