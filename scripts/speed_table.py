"""Write the speed table of docs/speed.md from the benches' results files, so it cannot drift.

    python scripts/speed_table.py            # rewrite docs/speed.md between the speed-table markers
    python scripts/speed_table.py --check    # exit 1 if docs/speed.md differs from the results

(The table lived in the README until issue 25 gave the README a short front page.)

Reads bench/results/*.json (written by bench/forward.py, generate.py, train_speed.py,
tokenize_speed.py and any bench that uses bench/common.py) and writes, between
`<!-- speed-table:start -->` and `<!-- speed-table:end -->`: where and when each file was
measured (CPU, cores, NumPy's BLAS, library versions, how busy the machine was), then one table
row per measurement and thread count: medians with their min-max, the ratio, the target.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench.common import RESULTS_DIR, fmt  # noqa: E402

DOC = ROOT / "docs" / "speed.md"
START, END = "<!-- speed-table:start -->", "<!-- speed-table:end -->"
ORDER = ("forward", "generate", "train_speed", "tokenize_speed")  # then any other, by name
BUSY_CORES = 0.1  # other processes busier than this during a run: say the figures are noisy
FILE_KEYS = ("command", "date", "machine", "conditions", "rows")
ROW_KEYS = ("name", "reference", "value", "reference_value", "unit", "ratio", "target", "met",
            "runs", "spread", "threads")


def load_results(folder: Path) -> list[dict]:
    """Every results file in folder, in the table's order; a broken file stops the build."""
    results = []
    for path in sorted(folder.glob("*.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
            check_result(result)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"{path.name}: not a bench results file ({err})") from err
        # the script that wrote it: gpt2_pages_real.json is bench/gpt2_pages.py's, for one
        result["bench"] = result.get("bench") or path.stem
        results.append(result)
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(results, key=lambda r: (rank.get(r["bench"], len(ORDER)), r["bench"]))


def check_result(result: dict) -> None:
    """Raise KeyError when a results file lacks what the table shows."""
    missing = [key for key in FILE_KEYS if key not in result]
    if missing:
        raise KeyError(f"lacks {missing}")
    for row in result["rows"]:
        missing = [key for key in ROW_KEYS if key not in row]
        if missing:
            raise KeyError(f"row {row.get('name')!r} lacks {missing}")


def machine(m: dict) -> str:
    """"AMD EPYC, 2 cores, NumPy 2.4.6 with scipy-openblas 0.3.31 (Haswell, pthreads), ..."."""
    versions = m.get("versions", {})
    libraries = "".join(f", {name} {versions[name]}" for name in
                        ("torch", "transformers", "tokenizers") if name in versions)
    return (f"{m['cpu']}, {m['nproc']} cores, NumPy {versions.get('numpy', '?')} with "
            f"{m['numpy_blas']}{libraries}")


def provenance(result: dict, same_machine: bool) -> str:
    """One line: which script, how it was run, when, on what, and how quiet the machine was."""
    c = result["conditions"]
    line = f"- `{result['bench']}.py`, {result['date']}: `{result['command']}`; "
    if not same_machine:
        line += machine(result["machine"]) + "; "
    other = c.get("other_cores_busy")
    if other is None:
        return line + f"load average before the run {c['load_before']:.2f}."
    line += f"other processes kept {other:.2f} cores busy during the run"
    if other > BUSY_CORES:
        line += " (**a busy machine: these figures are noise, re-measure them**)"
    return line + "."


def measured(value: float | None, spread: dict | None, unit: str) -> str:
    """"194 ms (190–199)": the median and, in brackets, the lowest and highest run."""
    if value is None:
        return "—"
    text = f"{fmt(value)} {unit}"
    if spread and spread["min"] != spread["max"]:
        text += f" ({fmt(spread['min'])}–{fmt(spread['max'])})"
    return text


def table_row(row: dict, bench: str) -> str:
    spread = row["spread"] or {}
    ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}x"
    target = row["target"] or "—"
    if row["met"] is not None:
        target += ": met" if row["met"] else ": **missed**"
    cells = (f"{row['name']} (`{bench}.py`)", row["reference"], str(row["threads"]),
             str(row["runs"]), measured(row["value"], spread.get("value"), row["unit"]),
             measured(row["reference_value"], spread.get("reference"), row["unit"]),
             ratio, target)
    return "| " + " | ".join(cells) + " |"


def section(results: list[dict]) -> str:
    """The page's text between the markers."""
    lines = [START, "<!-- written by scripts/speed_table.py from bench/results/*.json: "
             "do not edit by hand -->", ""]
    if not results:
        lines += [wrap("No figures yet: `bench/results/` holds no results files. The figures "
                       "that stood here did not reproduce (issue 14); the table comes back from "
                       "a run on a quiet machine (the commands above)."), END]
        return "\n".join(lines)
    machines = {json.dumps(r["machine"], sort_keys=True) for r in results}
    if len(machines) == 1:
        lines += [wrap(f"Measured on {machine(results[0]['machine'])}:"), ""]
    lines += [wrap(provenance(r, len(machines) == 1), "  ") for r in results]
    lines += ["", "| what | compared with | threads | runs | tinygpt | reference | ratio "
              "| target |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for result in results:
        names = list(dict.fromkeys(row["name"] for row in result["rows"]))
        rows = sorted(result["rows"], key=lambda r: (names.index(r["name"]), r["threads"]))
        lines += [table_row(row, result["bench"]) for row in rows]
    lines += ["", wrap("Each cell: the median, in brackets the fastest and the slowest run. "
                       "Ratio = tinygpt / reference: for times (s, ms) lower is faster, for rates "
                       "(tokens/s) higher is faster."), END]
    return "\n".join(lines)


def wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=96, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False)


def replace_section(readme: str, new: str) -> str:
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{DOC.name}: markers {START} ... {END} not found")
    return readme[:start] + new + readme[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fail if the page differs")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--readme", type=Path, default=DOC,
                   help="the page that holds the table (default: %(default)s)")
    args = p.parse_args(argv)
    readme = args.readme.read_text(encoding="utf-8")
    wanted = replace_section(readme, section(load_results(args.results_dir)))
    if wanted == readme:
        print(f"{args.readme.name}: speed table up to date")
        return 0
    if args.check:
        diff = difflib.unified_diff(readme.splitlines(), wanted.splitlines(),
                                    args.readme.name, "from bench/results", lineterm="")
        print("\n".join(diff))
        print(f"{args.readme.name}'s speed table differs from bench/results: run "
              "python scripts/speed_table.py", file=sys.stderr)
        return 1
    args.readme.write_text(wanted, encoding="utf-8")
    print(f"{args.readme.name}: speed table rewritten from {args.results_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
