"""docs/speed.md's speed table is what bench/results/*.json say (scripts/speed_table.py --check),
and the pieces that build it (bench/common.py's timing and rows, the generator) do their job.
Fast: nothing here runs a benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import common

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "speed_table.py"


def speed_table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)


def test_the_speed_table_matches_the_results_files():
    if not any(common.RESULTS_DIR.glob("*.json")):
        pytest.skip("bench/results/ holds no results yet (measure on a quiet machine)")
    done = speed_table("--check")
    assert done.returncode == 0, done.stdout + done.stderr


def results_file(folder: Path, other_cores_busy: float) -> None:
    """A results file as bench/common.run writes it, from hand-made runs."""
    rows = [
        common.row("forward, GPT-2 small, T=64", common.Measure((0.2, 0.21, 0.3)).in_ms(),
                   common.Measure((0.1, 0.1, 0.11)).in_ms(), "PyTorch", "<= 1.1x", threads=1),
        common.row("training", common.Measure((0.5, 0.4)).rate(2048),
                   common.Measure((1.0, 1.0)).rate(2048), "PyTorch", ">= 0.9x", threads=2),
        common.row("tinygpt.load", common.Measure((3.0,)), target="< 10 s", threads=1),
    ]
    payload = {"bench": "forward", "command": "python bench/forward.py", "date": "2030-01-02",
               "machine": {"cpu": "Test CPU", "nproc": 2, "numpy_blas": "OpenBLAS 0.3",
                           "versions": {"numpy": "2.0"}},
               "conditions": {"seconds": 1.0, "load_before": 0.0,
                              "other_cores_busy": other_cores_busy},
               "rows": rows}
    folder.mkdir(exist_ok=True)
    (folder / "forward.json").write_text(json.dumps(payload))


@pytest.fixture
def readme(tmp_path: Path) -> Path:
    path = tmp_path / "README.md"
    path.write_text("# x\n\n## Speed\n\n<!-- speed-table:start -->\nold figures\n"
                    "<!-- speed-table:end -->\n\n## Next\n")
    return path


def test_generated_table_carries_medians_spread_ratio_target_and_machine(tmp_path, readme):
    results_file(tmp_path / "results", other_cores_busy=0.01)
    args = ("--results-dir", str(tmp_path / "results"), "--readme", str(readme))
    assert speed_table(*args, "--check").returncode == 1  # "old figures" differ
    assert speed_table(*args).returncode == 0
    text = readme.read_text()
    assert "old figures" not in text and text.endswith("## Next\n")
    assert "| 1 | 3 | 210 ms (200–300) | 100 ms (100–110) | 2.10x | <= 1.1x: **missed** |" in text
    assert "| 2 | 2 | 4,608 tokens/s (4,096–5,120) | 2,048 tokens/s | 2.25x | >= 0.9x: met" in text
    assert "| 3.00 s | — | — | < 10 s: met |" in text
    assert "Test CPU, 2 cores, NumPy 2.0 with OpenBLAS 0.3" in text
    assert "0.01 cores busy" in text and "busy machine" not in text
    assert speed_table(*args, "--check").returncode == 0


def test_a_busy_machine_is_flagged_and_a_stale_readme_fails_the_check(tmp_path, readme):
    folder = tmp_path / "results"
    results_file(folder, other_cores_busy=1.2)
    args = ("--results-dir", str(folder), "--readme", str(readme))
    speed_table(*args)
    assert "busy machine: these figures are noise" in readme.read_text()
    (folder / "forward.json").unlink()
    done = speed_table(*args, "--check")
    assert done.returncode == 1 and "No figures yet" in done.stdout


def test_a_results_file_named_apart_is_shown_under_its_script(tmp_path, readme):
    """bench/gpt2_pages.py --shapes smollm2-real writes gpt2_pages_real.json: its rows name the
    script that wrote them (the file's "bench"), not the file."""
    folder = tmp_path / "results"
    results_file(folder, other_cores_busy=0.0)
    (folder / "forward.json").rename(folder / "forward_real.json")
    assert speed_table("--results-dir", str(folder), "--readme", str(readme)).returncode == 0
    text = readme.read_text()
    assert "(`forward.py`)" in text and "forward_real.py" not in text


def test_broken_results_file_and_missing_markers_are_clear_errors(tmp_path, readme):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "forward.json").write_text('{"rows": [{"name": "x"}]}')
    done = speed_table("--results-dir", str(folder), "--readme", str(readme))
    assert done.returncode != 0 and "forward.json: not a bench results file" in done.stderr
    (folder / "forward.json").unlink()
    readme.write_text("# no markers\n")
    done = speed_table("--results-dir", str(folder), "--readme", str(readme))
    assert done.returncode != 0 and "markers" in done.stderr


def test_timed_runs_warmup_untimed_and_setup_outside_the_clock():
    calls: list[str] = []
    measure = common.timed(lambda arg: calls.append(arg), runs=3, warmup=2,
                           setup=lambda: "fresh")
    assert calls == ["fresh"] * 5 and len(measure.values) == 3 and measure.unit == "s"
    spread = common.Measure((4.0, 1.0, 2.0, 3.0)).spread()
    assert spread["min"] == 1.0 and spread["max"] == 4.0 and spread["q1"] <= 2.5 <= spread["q3"]
    assert common.Measure((0.5, 0.25)).rate(100).values == (200.0, 400.0)


@pytest.mark.parametrize(("target", "value", "met"), [
    ("<= 1.1x", 1.1, True), ("<= 1.1x", 1.2, False), (">= 0.9x", 0.95, True),
    ("< 10 s", 10.0, False), (None, 1.0, None), ("stays ahead", 1.0, None),
])  # fmt: skip
def test_target_met(target, value, met):
    assert common.target_met(target, value) is met


def test_recorded_command_leaves_out_the_results_folder():
    argv = ["--runs", "3", "--results-dir", "/tmp/x", "--results-dir=/tmp/y", "--threads", "1"]
    assert common.measuring_args(argv) == ["--runs", "3", "--threads", "1"]


LOAD_SCRIPT = ROOT / "scripts" / "load_tables.py"


def load_tables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LOAD_SCRIPT), *args], capture_output=True,
                          text=True, timeout=60)


def test_the_load_tables_match_the_results_files():
    done = load_tables("--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_load_tables_are_written_from_the_files(tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "load_class_redis.json").write_text(json.dumps({
        "store": "redis", "students": 60, "processes": 2, "sent": 180, "confirmed": 180,
        "lost": 0, "doubled": 0, "errors": 0, "follow_p50_s": 1.5, "follow_p95_s": 2.9,
        "click_p50_s": 0.02, "click_p95_s": 0.1}))
    (folder / "load_gpt2.json").write_text(json.dumps({
        "command": "python bench/load.py --out gpt2", "date": "2026-01-02 03:04 UTC",
        "model": "gpt2", "processes": 2, "rows": [{"sessions": 30, "p50_s": 0.5, "p95_s": 2.25,
                                                   "max_s": 4.0, "errors": 0,
                                                   "peak_rss_mb": 2048.0,
                                                   "by_action": {
                                                       "open Decoding page": {
                                                           "n": 30, "p50_s": 1.5,
                                                           "p95_s": 3.0},
                                                       "move top-p": {
                                                           "n": 30, "p50_s": 0.1,
                                                           "p95_s": 0.2}},
                                                   "decoding_first_words": {
                                                       "n": 30, "p50_s": 0.6,
                                                       "p95_s": 1.2}}]}))
    readme = tmp_path / "README.md"
    readme.write_text("# x\n<!-- load-table:class:start -->\nold\n<!-- load-table:class:end -->"
                      "\n<!-- load-table:hostile:start -->\n<!-- load-table:hostile:end -->\n"
                      "<!-- load-table:load:start -->\n<!-- load-table:load:end -->\n")
    args = ("--results-dir", str(folder), "--readme", str(readme))
    assert load_tables(*args, "--check").returncode == 1
    assert load_tables(*args).returncode == 0
    text = readme.read_text()
    assert "| redis | 60 | 2 | 180 / 180 | 0 | 0 | 0 | 1.50 s / 2.90 s | 0.02 s / 0.10 s |" in text
    assert "No figures yet: run `python bench/hostile.py`" in text and "old" not in text
    assert ("| gpt2 | 2 | 30 | 0.50 s | 2.25 s | 4.00 s | 0 | 2,048 MB | "
            "open Decoding page: 1.50 s / 3.00 s | 0.60 s / 1.20 s | "
            "`python bench/load.py --out gpt2`, 2026-01-02 03:04 UTC |") in text
    assert load_tables(*args, "--check").returncode == 0


def test_the_prank_runs_of_bench_hostile_feed_the_hostile_table(tmp_path):
    """bench/hostile.py's prank runs (issue 26): one row per run, what the pranksters got, the
    real teacher's and student's outcome, the ratios and whether the target was met."""
    run = {"actions": 40, "p50_s": 0.1, "p95_s": 0.3, "max_s": 0.9, "errors": 0,
           "peak_rss_mb": 700.0, "rss_before_mb": 650.0}
    turns = {"groups": {"127.0.0.50": {"runs": 3}}, "process_cpu_s": 9.0}  # not in the table
    run["registries_before"] = {"buckets": 0, "streamlit_sessions": [31, 30], "turns": turns}
    pranked = dict(run, p95_s=0.4, rss_after_settle_mb=690.0, settle_s=120.0,
                   registries_after_settle={"buckets": 2, "streamlit_sessions": [30, 30],
                                            "turns": turns},
                   pranksters_tried={"seat": 50, "class started": 9},
                   pranksters_got={"seat": 4, "class started": 6},
                   real={"real student seated": True})
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "hostile.json").write_text(json.dumps({
        "command": "python bench/hostile.py --no-neighbours", "date": "2026-11-25 20:00 UTC",
        "p95_ratio": float("nan"), "met": True, "runs": {},
        "prank_runs": {"class on 127.0.0.1, alone": run,
                       "class on 127.0.0.1, with pranksters": pranked},
        "prank_p95_ratios": {"127.0.0.1": 4 / 3}, "pranks_met": True}))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- load-table:class:start -->\n<!-- load-table:class:end -->\n"
                      "<!-- load-table:hostile:start -->\n<!-- load-table:hostile:end -->\n"
                      "<!-- load-table:load:start -->\n<!-- load-table:load:end -->\n")
    assert load_tables("--results-dir", str(folder), "--readme", str(readme)).returncode == 0
    text = readme.read_text()
    assert ("| class on 127.0.0.1, with pranksters | 40 | 0.10 s | 0.40 s | 0.90 s | 0 | "
            "650 MB / 690 MB (120 s) | buckets 0 -> 2; streamlit sessions 31/30 -> 30/30 | "
            "class started 6 of 9; seat 4 of 50 | "
            "real student seated: True |") in text
    assert "127.0.0.1: 1.33x (target <= 1.5x, 0 errors: met)" in text


def test_the_lesson_runs_of_bench_load_lesson_feed_the_lesson_table(tmp_path):
    """bench/load_lesson.py's runs (issue 48): one row per file, the slowest kind of click, the
    targets missed named; a page without the lesson markers goes without the table."""
    figures = {"n": 90, "p50_s": 0.1, "p95_s": 0.5, "max_s": 1.0}
    row = {"lesson": "1_next_word.toml", "models": ["real.gguf"], "processes": 2,
           "students": 30, "steps": 7, "rounds": 4, "errors": 0,
           "step_shown": {"n": 210, "p50_s": 0.8, "p95_s": 1.6, "max_s": 2.0},
           "click": figures, "by_click": {"guess": figures, "join": dict(figures, p95_s=0.7),
                                          "write a run": None},
           "first_words": {"n": 12, "p50_s": 0.2, "p95_s": 0.4, "max_s": 0.5},
           "confirmed": 120, "lost": 0, "peak_rss_mb": 3200.0,
           "targets_met": {"click_p95_s": True, "first_words_p95_s": True,
                           "peak_rss_mb": False}}
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "lesson_load_real.json").write_text(json.dumps({
        "command": "python bench/load_lesson.py --out real", "date": "2026-11-29 05:00 UTC",
        "row": row}))
    plain = ("<!-- load-table:class:start -->\n<!-- load-table:class:end -->\n"
             "<!-- load-table:hostile:start -->\n<!-- load-table:hostile:end -->\n"
             "<!-- load-table:load:start -->\n<!-- load-table:load:end -->\n")
    readme = tmp_path / "README.md"
    readme.write_text(plain)
    args = ("--results-dir", str(folder), "--readme", str(readme))
    assert load_tables(*args).returncode == 0 and "1_next_word" not in readme.read_text()
    readme.write_text(plain + "<!-- load-table:lesson:start -->\n<!-- load-table:lesson:end -->")
    assert load_tables(*args).returncode == 0
    assert ("| 1_next_word.toml | real.gguf | 2 | 30 | 7 / 4 | 0 | 0.80 s / 1.60 s | "
            "0.10 s / 0.50 s | join: 0.70 s | 0.20 s / 0.40 s | 120 / 0 | 3,200 MB | "
            "missed: peak_rss_mb | `python bench/load_lesson.py --out real`, "
            "2026-11-29 05:00 UTC |") in readme.read_text()


def test_the_real_model_is_taken_from_the_cache_folder_without_a_fetch(tmp_path, monkeypatch):
    """bench/load.py --real-model and gpt2_pages.py --shapes smollm2-real serve the file
    `python -m tinygpt.models get smollm2` put in the user's cache folder: nothing is fetched
    when it and its card are there."""
    import tinygpt.models.fetch as fetch

    folder = tmp_path / "tinygpt" / "test-models"
    folder.mkdir(parents=True)
    pin = fetch.MODELS["smollm2"]
    (folder / pin.file_name).write_bytes(b"GGUF")
    (folder / pin.card_name).write_text("{}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fetch, "get", lambda *a, **k: pytest.fail("fetched"))
    assert common.real_model("smollm2") == folder / pin.file_name
