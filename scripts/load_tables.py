"""Write the load tables of docs/serving.md from the load benches' results files, so they
cannot drift.

    python scripts/load_tables.py            # rewrite docs/serving.md between the markers
    python scripts/load_tables.py --check    # exit 1 if docs/serving.md differs from the results

(The tables lived in the README until issue 25 gave the README a short front page.)

Reads bench/results/other/load_class_*.json (bench/load_class.py: a live class following its
teacher), bench/results/other/hostile.json (bench/hostile.py: a class with hostile
neighbours, and with the pranksters of issue 26), the other load_*.json (bench/load.py
--out: a class on one model) and lesson_load_*.json (bench/load_lesson.py --out: a class
following a lesson file) and writes each table between its own markers:
`<!-- load-table:class:start -->` ... `<!-- load-table:class:end -->`, and the same with
`hostile`, `load` and `lesson` (a page may leave the lesson table out). (The speed table is
scripts/speed_table.py's.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OTHER = ROOT / "bench" / "results" / "other"
DOC = ROOT / "docs" / "serving.md"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- load-table:{name}:start -->", f"<!-- load-table:{name}:end -->"


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def table_row(*cells: object) -> str:
    """One Markdown table row: | a | b | c |."""
    return "| " + " | ".join(map(str, cells)) + " |"


def between(low: float | None, high: float | None) -> str:
    """"p50 / p95" of two times in seconds."""
    return f"{seconds(low)} / {seconds(high)}"


def class_table(folder: Path) -> str:
    """One row per class store: guesses, errors, follow delay and student clicks."""
    rows = []
    for path in sorted(folder.glob("load_class_*.json")):
        if path.name.startswith("load_class_teacher_"):
            continue  # the teacher's page change: teacher_table
        r = json.loads(path.read_text(encoding="utf-8"))
        rows.append(table_row(
            r["store"], r["students"], r["processes"], f"{r['sent']} / {r['confirmed']}",
            r["lost"], r["doubled"], r["errors"], between(r["follow_p50_s"], r["follow_p95_s"]),
            between(r["click_p50_s"], r["click_p95_s"])))
    if not rows:
        return "No figures yet: run `python bench/load_class.py` on a quiet machine."
    return "\n".join([
        "| store | students | processes | guesses sent / confirmed | lost | doubled | errors "
        "| follow delay p50 / p95 | student click p50 / p95 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|", *rows])


def hostile_table(folder: Path) -> str:
    """The class alone, then with its neighbours: latency, errors, memory; then the pranksters
    of issue 26 (prank_table), when the results have them."""
    path = folder / "hostile.json"
    if not path.is_file():
        return "No figures yet: run `python bench/hostile.py` on a quiet machine."
    result = json.loads(path.read_text(encoding="utf-8"))
    lines = []
    if result["runs"]:
        lines = ["| run | actions | p50 | p95 | max | errors | peak RSS | RSS over the run |",
                 "|---|---:|---:|---:|---:|---:|---:|---|"]
        for name, run in result["runs"].items():
            lines.append(table_row(name, run["actions"], *latencies(run), run["errors"],
                                   f"{run['peak_rss_mb']:,.0f} MB", run["rss_trend"]))
        met = "met" if result["met"] else "**missed**"
        lines += ["", f"`{result['command']}`, {result['date']}: the students' p95 with the "
                      f"neighbours is {result['p95_ratio']:.2f}x the p95 without them (target "
                      f"<= 1.5x: {met})."]
    if result.get("prank_runs"):
        lines += ["", *prank_table(result)] if lines else prank_table(result)
    return "\n".join(lines)


def prank_table(result: dict) -> list[str]:
    """bench/hostile.py's prank runs: the class alone and with the pranksters of issue 26, on
    this machine's address and behind one shared address; what the pranksters got."""
    lines = ["| run | actions | p50 | p95 | max | errors | RSS before / after settling "
             "| registries before -> after settling | the pranksters got "
             "| the real teacher and student |",
             "|---|---:|---:|---:|---:|---:|---|---|---|---|"]
    for name, run in result["prank_runs"].items():
        rss = f"{run['rss_before_mb']:,.0f} MB"
        if "rss_after_settle_mb" in run:
            rss += f" / {run['rss_after_settle_mb']:,.0f} MB ({run['settle_s']:.0f} s)"
        got = "; ".join(f"{what} {n} of {run['pranksters_tried'].get(what, n)}"
                        for what, n in sorted(run.get("pranksters_got", {}).items())) or "—"
        real = "; ".join(f"{what}: {value}" for what, value in run.get("real", {}).items())
        lines.append(table_row(name, run["actions"], *latencies(run), run["errors"], rss,
                               registries(run), got, real or "—"))
    ratios = ", ".join(f"{place}: {ratio:.2f}x" for place, ratio
                       in result.get("prank_p95_ratios", {}).items())
    met = "met" if result.get("pranks_met") else "**missed**"
    command, date = result.get("prank_command", result["command"]), result.get("prank_date",
                                                                               result["date"])
    return lines + ["", f"`{command}`, {date}: the class's p95 with the "
                        f"pranksters over its p95 alone: {ratios or '—'} (target <= 1.5x, 0 "
                        f"errors: {met})."]


def registries(run: dict) -> str:
    """The server's registries before a prank run and after its settling time (bench/hostile.py
    reads serving.registry_report): "buckets 0 -> 2; ..."; "—" without them. The turn
    counters per address group (a nested record) are for a diagnosis, not this table."""
    before, after = run.get("registries_before") or {}, run.get("registries_after_settle")
    if not before:
        return "—"
    def shown(value) -> str:
        return "/".join(map(str, value)) if isinstance(value, list) else str(value)
    return "; ".join(f"{name.replace('_', ' ')} {shown(value)}"
                     + (f" -> {shown(after.get(name, '?'))}" if after else "")
                     for name, value in before.items() if not isinstance(value, dict))


def load_table(folder: Path) -> str:
    """bench/load.py --out NAME runs (a class on one model): latency, errors, memory."""
    lines = ["| model | processes | students | p50 | p95 | max | errors | peak RSS "
             "| slowest click p50 / p95 | Decoding: first words seen p50 / p95 | taken |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
    for path in sorted(folder.glob("load_*.json")):
        if path.name.startswith("load_class_"):
            continue
        r = json.loads(path.read_text(encoding="utf-8"))
        for row in r["rows"]:
            lines.append(table_row(r["model"], r["processes"], row["sessions"],
                                   *latencies(row), row["errors"],
                                   f"{row['peak_rss_mb']:,.0f} MB", slowest_action(row),
                                   first_words(row), f"`{r['command']}`, {r['date']}"))
    return table_or_note(lines, "python bench/load.py --out NAME")


def slowest_action(row: dict) -> str:
    """The kind of click with the highest p95 in a load.py row, and its p50 / p95."""
    by_action = row.get("by_action")
    if not by_action:
        return "—"
    name, worst = max(by_action.items(), key=lambda item: item[1]["p95_s"])
    return f"{name}: {p50_p95(worst)}"


def first_words(row: dict) -> str:
    """The Decoding clicks that write runs: until their first generated words were on screen."""
    return p50_p95(row.get("decoding_first_words"))


def p50_p95(figures: dict | None) -> str:
    """"p50 / p95" of a record's `p50_s` and `p95_s`, or "—" without one."""
    return "—" if not figures else between(figures["p50_s"], figures["p95_s"])


def latencies(run: dict) -> tuple[str, str, str]:
    """A run's p50, p95 and max, in seconds."""
    return seconds(run["p50_s"]), seconds(run["p95_s"]), seconds(run["max_s"])


def table_or_note(lines: list[str], command: str) -> str:
    """The table (its header's two lines, then a row a run), or, with no run yet, a note
    naming the command that makes the first figures."""
    if len(lines) == 2:
        return f"No figures yet: run `{command}` on a quiet machine."
    return "\n".join(lines)


def lesson_table(folder: Path) -> str:
    """bench/load_lesson.py --out NAME runs: a class following a lesson file, step by step."""
    lines = ["| lesson | model | processes | students | steps / rounds | errors | step shown "
             "p50 / p95 | click p50 / p95 | slowest click p95 | first words p50 / p95 | "
             "guesses confirmed / lost | peak RSS | targets | taken |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|"]
    for path in sorted(folder.glob("lesson_load_*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        row = r["row"]
        slowest = max(((kind, f["p95_s"]) for kind, f in row["by_click"].items() if f),
                      key=lambda item: item[1], default=None)
        missed = [name for name, ok in row["targets_met"].items() if not ok]
        lines.append(table_row(
            row["lesson"], ", ".join(row["models"]), row["processes"], row["students"],
            f"{row['steps']} / {row['rounds']}", row["errors"], p50_p95(row["step_shown"]),
            p50_p95(row["click"]), f"{slowest[0]}: {seconds(slowest[1])}" if slowest else "—",
            p50_p95(row["first_words"] or row.get("first_words_after_step")),
            f"{row['confirmed']} / {row['lost']}", f"{row['peak_rss_mb']:,.0f} MB",
            "met" if not missed else "missed: " + ", ".join(missed),
            f"`{r['command']}`, {r['date']}"))
    return table_or_note(lines, "python bench/load_lesson.py --out NAME")


def teacher_table(folder: Path) -> str:
    """The teacher's own page change and the students' follow of it (load_class.py
    --teacher-tab), a row a run."""
    lines = ["| model | students | page changes | followed | errors | teacher p50 / p95 "
             "| students p50 / p95 | load before |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for path in sorted(folder.glob("load_class_teacher_*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        lines.append(table_row(
            r["model"], r["students"], r["page_changes"], r["follows"], r["errors"],
            between(r["teacher_page_p50_s"], r["teacher_page_p95_s"]),
            between(r["students_follow_p50_s"], r["students_follow_p95_s"]),
            f"{r.get('load_before', 0):.1f}"))
    return table_or_note(lines, "python bench/load_class.py --teacher-tab --out NAME")


TABLES = {"class": class_table, "teacher": teacher_table, "hostile": hostile_table,
          "load": load_table, "lesson": lesson_table}
OPTIONAL = {"lesson", "teacher"}  # a page without its markers goes without it


def rewrite(readme: str, folder: Path) -> str:
    for name, build in TABLES.items():
        start, end = markers(name)
        a, b = readme.find(start), readme.find(end)
        if name in OPTIONAL and a < 0 and b < 0:
            continue
        if a < 0 or b < a:
            raise SystemExit(f"{DOC.name}: markers {start} ... {end} not found")
        note = f"<!-- written by scripts/load_tables.py from {folder.name}/ -->"
        readme = readme[:a] + f"{start}\n{note}\n{build(folder)}\n{end}" + readme[b + len(end):]
    return readme


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the page is out of date")
    p.add_argument("--readme", type=Path, default=DOC,
                   help="the page that holds the table (default: %(default)s)")
    p.add_argument("--results-dir", type=Path, default=OTHER)
    args = p.parse_args(argv)
    old = args.readme.read_text(encoding="utf-8")
    new = rewrite(old, args.results_dir)
    if args.check:
        if new != old:
            print(f"{args.readme.name}'s load tables differ from the results files: run "
                  "python scripts/load_tables.py")
            return 1
        return 0
    args.readme.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
