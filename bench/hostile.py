"""Hostile neighbours (issue 12): a normal class plus a few sessions that try to hurt it.

One server process; first the normal class alone (``bench/load.py``'s lesson), then the same
class again with ``--hostile`` extra sessions that, in turn and without thinking:
  - paste 20,000 random letters without a space on the Tokens page (a fresh text each time),
  - try long distinct prompts (~2,000 characters) on the Softmax and Decoding pages,
  - open tampered links (?seed=inf, top_k=1e309, temperature=[markdown link], pos=١٢ ...),
  - flip between a good model and a broken model file (by link and by the model menu, then
    back to the good one by the menu),
  - paste 200,000 characters on the Training page and press Start (a fresh vocabulary).
Reported: the normal students' p95 with and without the neighbours (target: at most 1.5x),
their errors (target 0), the server's RSS peak and its trend over the second run.

Then the pranksters of issue 26 (bench/hostile.py --pranks, on by default), each from a loopback
address of its own (127.0.0.2 ...: other machines to the app; 127.0.0.1 is the server's own),
while a real teacher starts a class and real students join it:
  - a fresh session per request: three connections opening a new session (no browser token, or
    a new one each time) for every load of the Attention page with a distinct 180-word prompt,
  - class floods (Start a class in a loop, then heavy pages as a "teacher" nobody follows),
  - seat floods (fresh sessions joining the real class), round stuffing (one browser's Leave ->
    Join -> guess, forty times), session floods (300 sessions opened and dropped).
Run twice: the class of 30 on 127.0.0.1 as before, and the class sharing one other address
(127.0.0.50, a school router), its students reporting their browser tokens as the app's
component does. Reported per run: the class's p50 / p95 alone and with the pranksters, what
the pranksters got (classes made, seats taken, guesses counted), the server's RSS after a
settling time.

Then, with --ipv6 (alone with --ipv6-only), the /64 class of issue 45 (bench/hostile_ipv6.py):
fresh addresses of one IPv6 /64, each with a fresh browser token, try to take seats in a real
class, start classes and open sessions at once; written to --ipv6-out.

    python bench/hostile.py --sessions 30 --duration 120
    python bench/hostile.py --ipv6-only

Then (or alone, with --model-files) the hostile model files of issue 45, each loaded in a child
process of its own (bench/hostile_files.py: 150,000 added tokens, 1e9 layers, float and flag
lies, 2.2 million merges, 150,000 junk tensor entries), written to
bench/results/other/hostile_files.json and to docs/modern_models.md's table.

    python bench/hostile.py --model-files
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import string
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.load  # noqa: E402
from bench import hostile_files, hostile_ipv6, pranks  # noqa: E402
from bench.load import (  # noqa: E402
    ROOT,
    AppError,
    MemorySampler,
    Results,
    Student,
    free_port,
    run_class,
    server_env,
    start_app,
    stop,
    summary,
    wait_healthy,
    warm_up,
)
from tinygpt_hosting.serving.registry_report import rss_mb  # noqa: E402

INJECTED = "[Log in again](https://evil.example/login) ![t](https://evil.example/t.png)"
TAMPERED = [{"seed": "inf"}, {"top_k": "1e309"}, {"temperature": INJECTED}, {"pos": "١٢"},
            {"new": "inf", "beams": "-inf", "step": "inf"}, {"top_p": "nan"}, {"seed": "9" * 400}]


def hostile_actions(rng: random.Random) -> list[tuple[str, dict]]:
    """One round of the neighbour's attempts, as rerun arguments (see Student.rerun)."""
    letters = "".join(rng.choice(string.ascii_letters) for _ in range(20_000))
    long_prompt = " ".join(rng.choice(string.ascii_lowercase) * rng.randint(3, 12)
                           for _ in range(300))[:2_000]
    return [
        ("20k-letter paste", dict(page="Tokens_and_embeddings", query={"prompt": letters})),
        ("long distinct prompt", dict(page="Softmax_and_sampling", query={"prompt": long_prompt})),
        ("tampered link", dict(page=rng.choice(["Softmax_and_sampling", "Decoding"]),
                               query={"prompt": "Hi", **rng.choice(TAMPERED)})),
        ("broken model by link", dict(page="", query={"prompt": "Hi", "model": "broken.npz"})),
        ("broken model by menu", dict(values={"Model": "broken.npz"})),
        # back to the good model: a session left on the broken one would only get error boxes,
        # cheap ones, and its next pastes would never reach the tokenizer
        ("good model by menu", dict(values={"Model": "shakespeare.npz"})),
        ("training paste", dict(page="Training", query={"prompt": "Hi"})),
    ]


async def run_neighbour(number: int, url: str, deadline: float, results: Results) -> None:
    """A hostile session: every attempt counted in its own Results (not the class's)."""
    rng = random.Random(10_000 + number)
    student = Student(url, rng)
    await student.connect()
    try:
        while time.monotonic() < deadline:
            for action, kwargs in hostile_actions(rng):
                if time.monotonic() >= deadline:
                    break
                try:
                    try:
                        results.add(action, await student.rerun(**kwargs))
                    except AppError:  # an error box is the expected answer to some of these
                        results.add(action, 0.0)
                    if action == "training paste":
                        await paste_training_text(student, rng, results)
                except Exception as err:  # noqa: BLE001 - counted, the neighbour goes on
                    results.errors.append(f"{action}: {type(err).__name__}: {err}"[:200])
                    await student.close()
                    student = Student(url, rng)
                    await student.connect()
                await asyncio.sleep(0.2)
    finally:
        await student.close()


async def paste_training_text(student: Student, rng: random.Random, results: Results) -> None:
    text_label = next((lab for lab in student.widgets if lab.startswith("Your text")), None)
    if text_label is None or "Start training" not in student.widgets:
        return
    text = "".join(map(chr, (rng.randrange(0x4E00, 0x9FFF) for _ in range(200_000))))
    values = {"Training text": "Text I paste below", text_label: text,
              "Start training": True}
    vocab = next((lab for lab in student.widgets if lab == "Vocabulary"), None)
    if vocab:
        values[vocab] = next(o for o in student.widgets[vocab].options if o.startswith("A fresh"))
    try:
        results.add("training start", await student.rerun(values=values))
    except AppError:
        results.add("training start", 0.0)


async def class_with_neighbours(url: str, args, hostile: int,
                                duration: float) -> tuple[Results, Results]:
    neighbours = Results()
    deadline = time.monotonic() + duration + args.ramp
    tasks = [run_neighbour(i, url, deadline, neighbours) for i in range(hostile)]
    # a new seed per run: the same prompts again would hit the generation cache (unfair)
    everyone = asyncio.gather(run_class(url, args.sessions, duration, args.max_actions,
                                        args.think, args.ramp, args.seed + hostile),
                              *tasks, return_exceptions=True)
    done = await everyone
    normal = done[0]
    if isinstance(normal, BaseException):
        raise normal
    return normal, neighbours


async def class_with_pranksters(url: str, args, data_dir: Path, pranked: bool,
                                tally: pranks.Tally) -> tuple[Results, dict]:
    """The class (as bench.load runs it) with, if `pranked`, every prankster of issue 26."""
    duration = args.prank_duration
    lag = asyncio.create_task(loop_lag(duration + args.ramp))
    jobs = [run_class(url, args.sessions, duration, args.max_actions, args.think, args.ramp,
                      args.seed + 7 + pranked)]
    if pranked:
        jobs.append(pranks.pranks(url, data_dir, duration + args.ramp, tally))
    done = await asyncio.gather(*jobs)
    tally.client_lag = await lag
    return done[0], (done[1] if pranked else {})


async def loop_lag(seconds: float, every: float = 0.05) -> dict:
    """How late this bench's own event loop wakes (p50 / p95 / max s): the class's latencies
    are read through it, so a loop the pranksters' pages keep busy would add to them."""
    late, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic()
        await asyncio.sleep(every)
        late.append(time.monotonic() - start - every)
    return {"p50_s": round(float(np.percentile(late, 50)), 4),
            "p95_s": round(float(np.percentile(late, 95)), 4), "max_s": round(max(late), 3)}


PLACES = ("127.0.0.1", "one shared address")  # where the honest class sits, in turn


def shared_address_students():
    """From now on bench.load's students are tabs of real browsers behind one address (each
    with its own browser token, reported as the app's component does)."""
    bench.load.Student = lambda url, rng: pranks.BrowserTab(url, rng, source=pranks.SHARED_CLASS,
                                                            token=pranks.new_token())


def registries(report: Path, data_dir: Path) -> dict:
    """The server's registries now: its last report line (serving.registry_report: buckets,
    busy sessions, Streamlit's sessions, RSS after malloc_trim) and the class store's size."""
    from tinygpt_hosting.classroom.rules import Classroom, Limits
    from tinygpt_hosting.classroom.store_sqlite import SqliteClassStore

    time.sleep(REPORT_EVERY + 0.5)  # a line written after this moment
    lines = report.read_text().splitlines() if report.exists() else []
    now = json.loads(lines[-1]) if lines else {}
    now.pop("time", None)
    store = data_dir / "classes.sqlite3"
    if store.exists():
        stats = Classroom(SqliteClassStore(store), Limits()).stats()
        now.update(classes=stats.classes, seats=stats.students, guesses=stats.guesses)
    return now


REPORT_EVERY = 5.0  # seconds between the server's registry reports (TINYGPT_REGISTRY_REPORT)


def prank_runs(url: str, args, server, data_dir: Path, report: Path) -> dict:
    """Alone and with the pranksters: the class on this machine's address, then behind one."""
    rows = {}
    for place in (PLACES[1:] if args.shared_only else PLACES[:args.places]):
        if place != "127.0.0.1":
            shared_address_students()
        for pranked in (False, True):
            label = f"class on {place}, {'with pranksters' if pranked else 'alone'}"
            tally = pranks.Tally()
            before = rss_mb(server.pid)
            level = registries(report, data_dir)
            sampler = MemorySampler(server.pid, every=1.0)
            start = time.monotonic()
            with sampler:
                normal, real = asyncio.run(class_with_pranksters(url, args, data_dir, pranked,
                                                                 tally))
            row = summary(args.sessions, normal, sampler, time.monotonic() - start)
            row.update(rss_before_mb=before, rss_trend=rss_trend(sampler.samples),
                       client_loop_lag=tally.client_lag)
            row.update(registries_before=level, p95_by_window=p95_by_window(normal, start))
            if pranked:
                time.sleep(args.settle)
                row.update(registries_after_settle=registries(report, data_dir))
                row.update(real=real, pranksters_tried=tally.tried, pranksters_got=tally.got,
                           pranksters_refused=tally.refused, settle_s=args.settle,
                           rss_after_settle_mb=rss_mb(server.pid))
            rows[label] = row
            print(f"{label}: p50 {row['p50_s']:.3f} s, p95 {row['p95_s']:.3f} s, errors "
                  f"{row['errors']}; bench loop lag {tally.client_lag}; {real or ''}", flush=True)
            if pranked:
                print(f"   pranksters got {tally.got}; refused {tally.refused}", flush=True)
                after = row["registries_after_settle"]
                print(f"   registries before {sizes(level)}; {args.settle:.0f} s after "
                      f"{sizes(after)}", flush=True)
                print(f"   turns of each address group during the run: "
                      f"{turns_between(level, after)}", flush=True)
    runs = list(rows.values())
    # each run until its settling report, or until the next run's first one
    for row, following in zip(runs, runs[1:] + [None], strict=True):
        after = row.get("registries_after_settle") or (following or {}).get("registries_before")
        if after:
            row["turns_during"] = turns_between(row["registries_before"], after)
    return rows


def p95_by_window(results: Results, start: float, window: float = 20.0) -> dict:
    """The class's p95 (s) and actions in each `window` seconds of a run, by when an action
    ended: the pranksters' floods peak at their start, and the class's first clicks meet it."""
    spans: dict[int, list[float]] = {}
    for ended, seconds in results.finished:
        spans.setdefault(int((ended - start) // window), []).append(seconds)
    return {f"{k * window:.0f}-{(k + 1) * window:.0f} s": [
        round(float(np.percentile(v, 95)), 3), len(v)] for k, v in sorted(spans.items())}


def sizes(registries: dict) -> dict:
    """The registries' sizes, without the turn counters (a nested record)."""
    return {k: v for k, v in registries.items() if k != "turns"}


def turns_between(before: dict, after: dict) -> dict:
    """Per address group, what its page runs did between two reports (serving.turn_stats):
    runs, seconds waited per limit and in the Admission line, CPU charged; and the process's
    CPU seconds, charged to a tab or to nobody."""
    then, now = before.get("turns") or {}, after.get("turns") or {}
    if not now:
        return {}
    out = {}
    for group, counters in now.get("groups", {}).items():
        old = then.get("groups", {}).get(group, {})
        diff = {k: round(v - old.get(k, 0.0), 2) for k, v in counters.items()}
        if diff.get("runs"):
            out[group] = {k: v for k, v in diff.items() if v}
    cpu = now["process_cpu_s"] - then.get("process_cpu_s", 0.0)
    charged = now["cpu_charged_s"] - then.get("cpu_charged_s", 0.0)
    out["process"] = {"cpu_s": round(cpu, 1), "charged_to_nobody_s": round(cpu - charged, 1)}
    if "loop_cpu_s" in now:  # the event loop's share of it (serving.turn_stats)
        out["process"]["event_loop_s"] = round(now["loop_cpu_s"] - then.get("loop_cpu_s", 0.0), 1)
    return out


def prank_ratios(rows: dict) -> dict:
    """The class's p95 with the pranksters over its p95 alone, per place."""
    ratios = {}
    for place in PLACES:
        alone = rows.get(f"class on {place}, alone")
        pranked = rows.get(f"class on {place}, with pranksters")
        if alone and pranked and alone["p95_s"] > 0:
            ratios[place] = pranked["p95_s"] / alone["p95_s"]
    return ratios


def rss_trend(samples: list[tuple[float, int]]) -> str:
    """RSS at the start, middle and end of a run (MB): a rise that does not flatten is a leak."""
    if not samples:
        return "no samples"
    picks = [samples[0], samples[len(samples) // 2], samples[-1]]
    return " -> ".join(f"{rss / 2**20:.0f} MB @ {t - samples[0][0]:.0f} s" for t, rss in picks)


def rss_per_minute(samples: list[tuple[float, int]]) -> list[float]:
    """The highest RSS (MB) of each minute of the run: a bound shows as a flat tail."""
    peaks: dict[int, int] = {}
    for t, rss in samples:
        minute = int((t - samples[0][0]) // 60)
        peaks[minute] = max(peaks.get(minute, 0), rss)
    return [round(peaks[m] / 2**20) for m in sorted(peaks)]


def models_folder() -> Path:
    """A models folder with the shipped model and a broken file (the flips go between them)."""
    folder = Path(tempfile.mkdtemp(prefix="tinygpt-hostile-")) / "models"
    folder.mkdir()
    shutil.copy(ROOT / "models" / "shakespeare.npz", folder / "shakespeare.npz")
    (folder / "broken.npz").write_bytes(b"PK\x03\x04" + b"\x00" * 4000)
    return folder


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=30)
    p.add_argument("--hostile", type=int, default=3)
    p.add_argument("--duration", type=float, default=120.0, help="seconds of the class alone")
    p.add_argument("--soak", type=float, help="seconds of the class with its neighbours "
                   "(default: --duration; issue 12 asks for a 10-minute soak: 600)")
    p.add_argument("--max-actions", type=int, default=200)
    p.add_argument("--think", type=float, default=8.0)
    p.add_argument("--ramp", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prank-duration", type=float, default=120.0,
                   help="seconds of each prank run (issue 26); 0 skips them")
    p.add_argument("--settle", type=float, default=120.0,
                   help="seconds after the pranks before the server's RSS is read again")
    p.add_argument("--places", type=int, choices=(1, 2), default=2,
                   help="1: only the class on 127.0.0.1 (a quicker look); 2: also behind one "
                   "shared address")
    p.add_argument("--shared-only", action="store_true",
                   help="only the class behind one shared address (a quicker diagnosis)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "other" /
                   "hostile.json", help="where the results go")
    p.add_argument("--ipv6", action="store_true", help="also run the /64 class (issue 45)")
    p.add_argument("--ipv6-only", action="store_true", help="only the /64 class")
    p.add_argument("--ipv6-out", type=Path, default=ROOT / "bench" / "results" / "other" /
                   "hostile_ipv6.json", help="where the /64 class's results go")
    p.add_argument("--keep-report", type=Path, help="copy the server's registry report "
                   "(TINYGPT_REGISTRY_REPORT lines, every 5 s) to this file")
    p.add_argument("--no-neighbours", action="store_true",
                   help="skip issue 12's neighbours (alone / with neighbours)")
    p.add_argument("--model-files", action="store_true",
                   help="only the hostile model files of issue 45 (bench/hostile_files.py)")
    p.add_argument("--no-model-files", action="store_true",
                   help="skip the hostile model files (run after the server's runs)")
    return p.parse_args(argv)


def neighbour_runs(url: str, args, server) -> dict:
    """Issue 12's runs: the class alone, then with its hostile neighbours (unless skipped)."""
    rows = {}
    runs = () if args.no_neighbours else (
        ("alone", 0, args.duration),
        ("with neighbours", args.hostile, args.soak or args.duration))
    for label, hostile, duration in runs:
        sampler = MemorySampler(server.pid, every=1.0)
        start = time.monotonic()
        with sampler:
            normal, neighbours = asyncio.run(class_with_neighbours(url, args, hostile,
                                                                   duration))
        row = summary(args.sessions, normal, sampler, time.monotonic() - start)
        row["rss_trend"] = rss_trend(sampler.samples)
        row["peak_rss_per_minute_mb"] = rss_per_minute(sampler.samples)
        row["peak_server_rss_mb"] = sampler.root_peak / 2**20  # without the training child
        row["p95_by_action_s"] = {a: round(float(np.percentile(v, 95)), 3)
                                  for a, v in sorted(normal.latencies.items())}
        if hostile:
            row["neighbour_attempts"] = {a: len(v) for a, v in neighbours.latencies.items()}
        rows[label] = row
        print(f"{label:16s}: {row['actions']} actions, p50 {row['p50_s']:.3f} s, "
              f"p95 {row['p95_s']:.3f} s, max {row['max_s']:.2f} s, errors {row['errors']}, "
              f"peak RSS {row['peak_rss_mb']:.0f} MB; RSS {rss_trend(sampler.samples)}",
              flush=True)
        if normal.errors:
            print("   normal errors:", normal.errors[:5])
        if hostile:
            tried = {a: len(v) for a, v in neighbours.latencies.items()}
            print(f"   neighbours: {tried}; their failures {len(neighbours.errors)} "
                  f"{neighbours.errors[:3]}", flush=True)
    return rows


def ipv6_run(url: str, args, data_dir: Path) -> None:
    """The /64 class, written to args.ipv6_out."""
    rows = hostile_ipv6.ipv6_class(url, data_dir)
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = {"command": "python bench/hostile.py " + " ".join(sys.argv[1:]), "date": date,
              "prefix": f"{hostile_ipv6.PREFIX}:<case>::/64", "runs": rows}
    out = args.ipv6_out.resolve()
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.model_files:
        return hostile_files.main([])
    if args.ipv6_only:
        return serve_and_run(args)
    code = serve_and_run(args)
    return code if args.no_model_files else max(code, hostile_files.main([]))


def serve_and_run(args) -> int:
    """Issue 12's neighbours and issue 26's pranksters against one server."""
    load_before = [round(x, 2) for x in os.getloadavg()]  # how quiet the machine was
    folder = models_folder()
    data_dir = folder.parent / "data"
    report = folder.parent / "registries.jsonl"
    env = dict(server_env(str(folder), "shakespeare.npz"), TINYGPT_DATA_DIR=str(data_dir),
               TINYGPT_REGISTRY_REPORT=str(report))
    server = start_app(free_port_value := free_port(), env)
    url = f"http://127.0.0.1:{free_port_value}"
    try:
        wait_healthy(url)
        warm_up(url)
        if args.ipv6 or args.ipv6_only:
            ipv6_run(url, args, data_dir)
        if args.ipv6_only:
            return 0
        rows = neighbour_runs(url, args, server)
        ratio, ok = float("nan"), True
        if rows:
            ratio = rows["with neighbours"]["p95_s"] / rows["alone"]["p95_s"]
            ok = ratio <= 1.5 and rows["with neighbours"]["errors"] == 0
            print(f"p95 ratio (with / alone) = {ratio:.2f} (target <= 1.5): "
                  f"{'OK' if ok else 'MISS'}")
        prank_rows = (prank_runs(url, args, server, data_dir, report)
                      if args.prank_duration > 0 else {})
        ratios = prank_ratios(prank_rows)
        pranks_ok = all(r <= 1.5 for r in ratios.values()) and all(
            row["errors"] == 0 for row in prank_rows.values())
        print(f"pranks: p95 ratios {ratios} (target <= 1.5): {'OK' if pranks_ok else 'MISS'}")
        out = args.out.resolve()
        command = "python bench/hostile.py " + " ".join(sys.argv[1:])
        date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        result = {"command": command, "date": date, "p95_ratio": ratio, "met": ok, "runs": rows}
        if args.no_neighbours and out.is_file():  # keep the last neighbour runs, as they were
            earlier = json.loads(out.read_text())
            result = {k: earlier.get(k) for k in ("command", "date", "p95_ratio", "met", "runs")}
        result.update(prank_command=command, prank_date=date, prank_runs=prank_rows,
                      prank_p95_ratios=ratios, pranks_met=pranks_ok,
                      conditions={"load_before": load_before, "load_after":
                                  [round(x, 2) for x in os.getloadavg()]})
        out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
        return 0 if ok and pranks_ok else 1
    finally:
        stop(server)
        if args.keep_report and report.exists():  # the server's report lines, for a diagnosis
            shutil.copy(report, args.keep_report)
        shutil.rmtree(folder.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
