"""A whole class at once: N students drive the tinygpt app through Streamlit's own protocol.

Each simulated student is one websocket session on ``/_stcore/stream`` (what a browser tab
opens), speaking protobuf BackMsg / ForwardMsg from ``streamlit.proto``. That is far lighter
than a real browser per student, so 100 sessions fit on a 2-core machine next to the server.

The classroom script (one student, repeated until the time is up):
  open a page by its link (?prompt=...)  -> type a prompt -> pick a position
  -> Softmax page: move temperature, top-p and top-k -> Decoding page: on a large model, write
  one of the runs (its buttons: the page writes them only when asked), then "next" twice
  -> another page.
Between two actions a student thinks for ``--think`` seconds on average.

Interaction latency = time from sending the rerun BackMsg (with the widget states) to the
``script_finished`` ForwardMsg. First words = on the Decoding page (opening it, writing a run),
from the click to the first generated words on screen: the first "Writing…" caption of a run
being written, or the first finished run's text. Errors = timeouts, dropped connections, and
any exception or st.error box the app shows. Peak memory = RSS of the server's process
tree, sampled in /proc.

    python bench/load.py --sessions 30 60 100              # starts the app on loopback
    python bench/load.py --sessions 30 --cluster 2         # two processes behind nginx
    python bench/load.py --soak --interactions 500         # memory over a long run
    python bench/load.py --sessions 30 --models-dir tests/fixtures --model tiny.npz
    python bench/load.py --sessions 30 --cluster 2 --shape gpt2-small --duration 90 --out gpt2
    python bench/load.py --sessions 30 --cluster 2 --real-model smollm2 --out smollm2_real

Everything is bounded: every session stops after ``--duration`` seconds or ``--max-actions``
actions, every wait has a timeout, and the servers started here are stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import websockets
from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
from bench.common import machine_info, real_model  # noqa: E402
from bench.servers import (  # noqa: E402 (bench/hostile.py, load_class.py import them from here)
    MemorySampler,
    free_port,
    server_env,
    start_app,
    start_cluster,
    stop,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parent.parent
WRITING = "Writing…"  # the Decoding page's caption under a run being written
WRITE_BUTTONS = [f"Write the {run} run" for run in ("greedy", "sampling", "beam search")]
GENERATING = {"open Decoding page", "write a run"}  # the clicks whose first words are timed
ACTION_TIMEOUT = 60.0  # seconds: a rerun slower than this counts as an error
FINISHED_EARLY = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
FINISHED_FRAGMENT = ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY

# what students type: short lines, some shared, some odd (emoji, CJK, a long paste, nothing)
PROMPTS = [
    "ROMEO:\nBut soft, what light through yonder window breaks?",
    "To be, or not to be, that is the question",
    "JULIET:\nO Romeo, Romeo! wherefore art thou",
    "Now is the winter of our discontent",
    "All the world's a stage, and all the men and women",
    "Friends, Romans, countrymen, lend me your ears",
    "Hello 👋🏽 世界, 東京へ行きます! 🎭",
    "The quick brown fox jumps over the lazy dog",
    "KING HENRY:\nOnce more unto the breach, dear friends",
    "What's in a name? That which we call a rose",
]
LONG_PASTE = "Shall I compare thee to a summer's day? " * 120  # ~4.8k characters
TEACHER_PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks?"
OPEN_PAGES = ["", "Tokens_and_embeddings", "Attention", "Logits"]  # "" = the home page
LAST_PAGES = ["Residual_stream", "What_if", "LayerNorm", "Logits", ""]


# ----------------------------------------------------------------------------- one student


class AppError(Exception):
    """The page showed an exception or an st.error box."""


@dataclass
class Widget:
    id: str
    kind: str  # "slider", "text_area", "button", ...
    fragment_id: str
    options: list[str] = field(default_factory=list)


class Student:
    """One browser tab: a websocket session that reruns pages with chosen widget values."""

    def __init__(self, base_url: str, rng: random.Random, timeout: float = ACTION_TIMEOUT):
        self.base_url = base_url.rstrip("/")
        self.rng = rng
        self.timeout = timeout
        self.ws = None
        self.pages: dict[str, str] = {}  # url path name -> page script hash
        self.widgets: dict[str, Widget] = {}  # label -> widget, from the last run
        self.page_hash = ""
        self._seen: dict[str, Widget] = {}  # the widgets of the run being read
        self._problems: list[str] = []  # the error boxes of the run being read
        self._first_words: float | None = None  # when a generation's first words came
        self.first_words_s: float | None = None  # last rerun: until generated words showed

    async def connect(self) -> None:
        """Load the page like a browser (the cookie keeps us on one backend), open the stream."""
        cookie = await asyncio.to_thread(_get_cookie, self.base_url + "/")
        ws_url = self.base_url.replace("http://", "ws://") + "/_stcore/stream"
        headers = {"Cookie": cookie} if cookie else {}
        self.ws = await asyncio.wait_for(websockets.connect(
            ws_url, subprotocols=["streamlit"], max_size=None, additional_headers=headers,
            open_timeout=self.timeout), self.timeout)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def rerun(self, query: dict | None = None, page: str | None = None,
                    values: dict[str, object] | None = None) -> float:
        """Send one rerun (page and/or widget values), wait for it to finish; return seconds.

        values: widget label -> value (a widget inside a fragment reruns only its fragment).
        """
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = urlencode(query or {})
        if page is not None:  # open or switch to a page by its url name
            state.page_name = page
            state.page_script_hash = self.pages.get(page, "")
        else:
            state.page_script_hash = self.page_hash
        fragments = set()
        for label, value in (values or {}).items():
            widget = self.widgets[label]
            _set_widget_value(state.widget_states.widgets.add(), widget, value)
            fragments.add(widget.fragment_id)
        if len(fragments) == 1 and "" not in fragments:
            state.fragment_id = fragments.pop()
        self._first_words = None
        start = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        await asyncio.wait_for(self._read_until_finished(full=not state.fragment_id),
                               self.timeout)
        end = time.perf_counter()
        # the Decoding page shows the runs' words while they are written ("Writing… n of N"),
        # then the runs' texts (code blocks): the first of those is when the student sees some
        self.first_words_s = None if self._first_words is None else self._first_words - start
        return end - start

    async def _read_until_finished(self, full: bool = True) -> None:
        """Read the server's messages until a run finishes (full or fragment: the run says)."""
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(await self.ws.recv())
            if self._take(fm):
                return

    def _take(self, fm: ForwardMsg) -> bool:
        """One message of a run, whoever started the run (a click, a timer, a server push);
        True when the run has finished. Raises AppError when the run showed an error."""
        kind = fm.WhichOneof("type")
        self._note(fm, kind)
        if kind == "navigation":
            self.pages = {p.url_pathname: p.page_script_hash for p in fm.navigation.app_pages}
            self.page_hash = fm.navigation.page_script_hash
        elif kind == "new_session":  # every run starts with one
            self._seen, self._problems = {}, []
            if fm.new_session.page_script_hash:
                self.page_hash = fm.new_session.page_script_hash
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            element = fm.delta.new_element
            if self._first_words is None and _shows_generated_words(element):
                self._first_words = time.perf_counter()
            problem = _read_element(element, fm.delta.fragment_id, self._seen)
            if problem:
                self._problems.append(problem)
        elif kind == "script_finished" and fm.script_finished != FINISHED_EARLY:
            full = fm.script_finished != FINISHED_FRAGMENT
            self.widgets = self._seen if full else {**self.widgets, **self._seen}
            problems, self._seen, self._problems = self._problems, {}, []
            if problems:
                raise AppError("; ".join(problems)[:300])
            return True
        return False

    def _note(self, fm: ForwardMsg, kind: str | None) -> None:
        """Called for every message of a rerun; a subclass reads more of them here."""

    def option(self, label: str) -> str:
        return self.rng.choice(self.widgets[label].options)


def _get_cookie(url: str) -> str:
    """GET the page (as a browser does first); return its cookies as a Cookie header."""
    with urllib.request.urlopen(url, timeout=ACTION_TIMEOUT) as response:
        cookies = response.headers.get_all("Set-Cookie") or []
        response.read()
    return "; ".join(c.split(";", 1)[0] for c in cookies)


def _shows_generated_words(element) -> bool:
    """A run's words: its "Writing…" caption while written, or its text (the page's code
    blocks are the runs' texts)."""
    kind = element.WhichOneof("type")
    return kind == "code" or (kind == "markdown" and element.markdown.body.startswith(WRITING))


def _read_element(element, fragment_id: str, seen: dict[str, Widget]) -> str | None:
    """Remember widgets by label; return a description if the element is an error."""
    kind = element.WhichOneof("type")
    proto = getattr(element, kind)
    if kind == "exception":
        return f"exception {proto.type}: {proto.message}"
    if kind == "alert" and proto.format == Alert.ERROR:
        return f"error box: {proto.body}"
    widget_id = getattr(proto, "id", "")
    if widget_id.startswith("$$ID") and getattr(proto, "label", ""):
        options = list(getattr(proto, "options", []))
        seen[proto.label] = Widget(widget_id, kind, fragment_id, options)
    return None


def _set_widget_value(ws, widget: Widget, value) -> None:
    """Fill a WidgetState the way the browser does for this kind of widget."""
    ws.id = widget.id
    if widget.kind == "button":
        ws.trigger_value = True
    elif widget.kind == "button_group" or (widget.kind == "slider" and widget.options):
        ws.string_array_value.data.append(str(value))  # pills, select_slider: option labels
    elif widget.kind == "slider":
        ws.double_array_value.data.append(float(value))
    elif widget.kind == "number_input":
        ws.double_value = float(value)
    else:  # text_area, selectbox, radio
        ws.string_value = str(value)


# ----------------------------------------------------------------------------- the lesson


@dataclass
class Results:
    latencies: dict[str, list[float]] = field(default_factory=dict)  # action -> seconds
    errors: list[str] = field(default_factory=list)
    actions: int = 0
    first_words: list[float] = field(default_factory=list)  # Decoding: until words seen
    finished: list[tuple[float, float]] = field(default_factory=list)  # (monotonic, seconds)

    def add(self, action: str, seconds: float) -> None:
        self.latencies.setdefault(action, []).append(seconds)
        self.finished.append((time.monotonic(), seconds))
        self.actions += 1

    def all_latencies(self) -> np.ndarray:
        return np.array([s for v in self.latencies.values() for s in v], dtype=np.float64)


def lesson(student: Student, number: int) -> list[tuple[str, dict]]:
    """The classroom script as (action name, rerun arguments); values may be callables that
    pick from the widgets of the previous run (e.g. a position from the slider's options)."""
    rng = student.rng
    prompt = rng.choice(PROMPTS + [LONG_PASTE, ""]) if rng.random() < 0.2 else (
        f"{rng.choice(PROMPTS)} (student {number}, try {rng.randrange(10**6)})")
    return [
        ("type a prompt", dict(values={"Prompt": prompt})),
        ("pick a position", dict(values={"Position inspected":
                                         lambda s: s.option("Position inspected")})),
        ("open Softmax page", dict(page="Softmax_and_sampling")),
        ("move temperature", dict(values={"Temperature T": round(rng.uniform(0.1, 2.5), 2)})),
        ("move top-p", dict(values={"Top-p (1 = off)": round(rng.uniform(0.3, 1.0), 2)})),
        ("set top-k", dict(values={"Top-k (0 = off)": rng.choice([0, 5, 20, 100])})),
        ("open Decoding page", dict(page="Decoding")),
        ("write a run", dict(pick=lambda s: [b for b in WRITE_BUTTONS if b in s.widgets])),
        ("step generation", dict(values={"next ▶": True})),
        ("step generation", dict(values={"next ▶": True})),
        ("switch page", dict(page=rng.choice(LAST_PAGES))),
    ]


async def run_student(number: int, base_url: str, deadline: float, max_actions: int,
                      think: float, results: Results, seed: int) -> None:
    rng = random.Random(seed * 1000 + number)
    student = Student(base_url, rng)
    try:
        start = time.perf_counter()
        await student.connect()
        query = {"prompt": TEACHER_PROMPT}
        await student.rerun(query=query, page=rng.choice(OPEN_PAGES))  # the teacher's link
        results.add("open the link", time.perf_counter() - start)
    except Exception as err:  # noqa: BLE001 - every failure is counted, none stops the class
        results.errors.append(f"open: {type(err).__name__}: {err}"[:300])
        await student.close()
        return
    done = 1
    try:
        while time.monotonic() < deadline and done < max_actions:
            for action, kwargs in lesson(student, number):
                if time.monotonic() >= deadline or done >= max_actions:
                    break
                await asyncio.sleep(think * rng.uniform(0.5, 1.5))
                done += 1
                await _one_action(student, action, kwargs, results)
    finally:
        await student.close()


async def _one_action(student: Student, action: str, kwargs: dict, results: Results) -> None:
    if "pick" in kwargs:  # a button among those the page shows now (none: nothing to click)
        offered = kwargs["pick"](student)
        if not offered:
            return
        kwargs = {"values": {student.rng.choice(offered): True}}
    values = kwargs.get("values")
    if values:
        missing = [label for label in values if label not in student.widgets]
        if missing:  # e.g. no position slider for a one-token prompt: nothing to click
            return
        kwargs = {**kwargs, "values": {k: v(student) if callable(v) else v
                                       for k, v in values.items()}}
    try:
        results.add(action, await student.rerun(**kwargs))
        if action in GENERATING and student.first_words_s is not None:
            results.first_words.append(student.first_words_s)
    except AppError as err:
        results.errors.append(f"{action}: {err}")
    except Exception as err:  # noqa: BLE001 - a timeout or a dropped connection
        results.errors.append(f"{action}: {type(err).__name__}: {err}"[:300])
        raise


async def run_class(base_url: str, n: int, duration: float, max_actions: int, think: float,
                    ramp: float, seed: int) -> Results:
    """n students, arriving over `ramp` seconds, each working until the deadline."""
    results = Results()
    deadline = time.monotonic() + duration

    async def arrive(i: int):
        await asyncio.sleep(ramp * i / max(n, 1))
        try:
            await run_student(i, base_url, deadline, max_actions, think, results, seed)
        except Exception:  # noqa: BLE001 - already counted in results.errors
            pass

    await asyncio.wait_for(asyncio.gather(*(arrive(i) for i in range(n))),
                           duration + ramp + 2 * ACTION_TIMEOUT)
    return results


def warm_up(url: str) -> None:
    """One student's first run of every page, so that imports and model loading are not
    counted as classroom latency (the teacher opens the app before the class)."""
    async def go():
        student = Student(url, random.Random(0))
        await student.connect()
        await student.rerun(query={"prompt": TEACHER_PROMPT}, page="")
        for page in [*student.pages, ""]:
            await student.rerun(page=page)
        await student.close()
    asyncio.run(go())


# ----------------------------------------------------------------------------- reports


def summary(n: int, results: Results, sampler: MemorySampler | None, wall: float) -> dict:
    lat = results.all_latencies()
    row = {
        "sessions": n, "actions": results.actions, "errors": len(results.errors),
        "p50_s": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "p95_s": float(np.percentile(lat, 95)) if lat.size else float("nan"),
        "max_s": float(lat.max()) if lat.size else float("nan"),
        "actions_per_s": results.actions / wall,
        "by_action": {action: {"n": len(values), "p50_s": float(np.percentile(values, 50)),
                               "p95_s": float(np.percentile(values, 95))}
                      for action, values in sorted(results.latencies.items())},
    }
    if results.first_words:  # Decoding clicks: until the first generated words were seen
        row["decoding_first_words"] = {
            "n": len(results.first_words),
            "p50_s": float(np.percentile(results.first_words, 50)),
            "p95_s": float(np.percentile(results.first_words, 95))}
    if sampler is not None:
        row["peak_rss_mb"] = sampler.peak / 2**20
        row["server_cpu_s"] = sampler.cpu_used
    return row


def print_row(row: dict) -> None:
    mem = (f"  peak RSS {row['peak_rss_mb']:7.0f} MB  server CPU {row['server_cpu_s']:6.1f} s"
           if "peak_rss_mb" in row else "")
    print(f"N = {row['sessions']:3d}: {row['actions']:5d} actions ({row['actions_per_s']:.1f}/s)"
          f"  p50 {row['p50_s']:6.3f} s  p95 {row['p95_s']:6.3f} s  max {row['max_s']:6.2f} s"
          f"  errors {row['errors']}{mem}", flush=True)


def print_actions(results: Results) -> None:
    for action, values in sorted(results.latencies.items()):
        v = np.array(values)
        print(f"    {action:20s} n={v.size:4d}  p50 {np.percentile(v, 50):6.3f} s  "
              f"p95 {np.percentile(v, 95):6.3f} s")
    if results.first_words:
        v = np.array(results.first_words)
        print(f"    (Decoding clicks, until the first generated words were on screen: "
              f"p50 {np.percentile(v, 50):.3f} s  p95 {np.percentile(v, 95):.3f} s)")
    for err in results.errors[:5]:
        print(f"    error: {err}")


def soak_report(samples: list[tuple[float, int]], actions: int) -> bool:
    """Print memory over time; True when the last quarter still grows past the third."""
    if len(samples) < 8:
        print("soak: too few memory samples")
        return False
    mb = np.array([b for _, b in samples]) / 2**20
    t = np.array([s for s, _ in samples])
    quarters = np.array_split(np.arange(len(mb)), 4)
    peaks = [float(mb[q].max()) for q in quarters]
    print(f"soak: {actions} actions over {t[-1]:.0f} s; peak RSS by quarter of the run (MB): "
          + ", ".join(f"{p:.0f}" for p in peaks))
    for q in quarters:
        print(f"    t = {t[q[0]]:5.0f} s .. {t[q[-1]]:5.0f} s   RSS {mb[q].min():6.0f} .. "
              f"{mb[q].max():6.0f} MB")
    growth = peaks[3] - peaks[2]
    growing = growth > max(20.0, 0.05 * peaks[2])  # more than 5 % (or 20 MB) in a quarter
    print(f"soak: last quarter vs third: {growth:+.0f} MB -> "
          + ("STILL GROWING" if growing else "flat (bounded by the caches)"))
    return growing


# ----------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, nargs="+", default=[30, 60, 100],
                   help="class sizes to run, one after the other (default 30 60 100)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds per class size")
    p.add_argument("--max-actions", type=int, default=200, help="per student, at most")
    p.add_argument("--think", type=float, default=8.0,
                   help="mean seconds a student waits between two actions")
    p.add_argument("--ramp", type=float, default=10.0, help="students arrive over these seconds")
    p.add_argument("--cluster", type=int, default=0,
                   help="run K Streamlit processes behind nginx (deploy/run_cluster.sh)")
    p.add_argument("--url", help="use a running server instead of starting one (no memory)")
    p.add_argument("--models-dir", help="TINYGPT_MODELS_DIR for the server (default models/)")
    p.add_argument("--model", help="TINYGPT_DEFAULT_MODEL for the server")
    p.add_argument("--shape", choices=["gpt2-small", "smollm2-135m"],
                   help="serve a random model of this shape (bench/large_folders.py), written "
                   "to a temporary folder for this run (instead of --models-dir/--model)")
    p.add_argument("--real-model", choices=["smollm2"], help="serve this model of tinygpt.models "
                   "from the user's cache folder (bench.common.real_model)")
    p.add_argument("--soak", action="store_true",
                   help="one long run of --interactions actions; memory over time")
    p.add_argument("--interactions", type=int, default=500, help="soak: total actions")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write the rows to bench/results/other/load_<OUT>.json "
                   "(scripts/load_tables.py puts them in docs/serving.md)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    args.load_before = os.getloadavg()  # 1, 5, 15 min: how quiet the machine was
    if args.real_model:
        path = real_model(args.real_model)
        args.models_dir, args.model = str(path.parent), path.name
    if not args.shape:
        return serve_and_measure(args)
    from bench.large_folders import serve_on_shape

    return serve_on_shape(args, serve_and_measure)


def serve_and_measure(args) -> int:
    """Start the server(s), warm every page, run the class sizes (or the soak), stop."""
    env = server_env(args.models_dir, args.model)
    server, backends = None, []
    if args.url:
        url = args.url
    else:
        port = free_port()
        if args.cluster:
            first = random.Random().randrange(20000, 30000)
            backends = [f"http://127.0.0.1:{first + i}" for i in range(args.cluster)]
            server = start_cluster(args.cluster, port, first, env)
        else:
            server = start_app(port, env)
        url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        kind = (f"{args.cluster} processes behind nginx" if args.cluster
                else "one process" if server else "external")
        print(f"server: {url} ({kind}); model dir "
              f"{env.get('TINYGPT_MODELS_DIR', 'models/')}, default "
              f"{env.get('TINYGPT_DEFAULT_MODEL', 'shakespeare.npz')}; trace cache "
              f"{env.get('TINYGPT_TRACE_CACHE_MB', '1024 (default)')} MB; think {args.think} s; "
              f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", flush=True)
        for backend in backends or [url]:  # every process, not only the one nginx picks
            warm_up(backend)
        if args.soak:
            return run_soak(args, url, server)
        rows = [run_one(args, url, server, n) for n in args.sessions]
        if args.out:
            write_rows(args, env, rows)
    finally:
        if server is not None:
            stop(server)
    return 0


def write_rows(args, env: dict, rows: list[dict]) -> None:
    """The rows as bench/results/other/load_<out>.json, with how and where they were taken."""
    out = ROOT / "bench" / "results" / "other" / f"load_{args.out}.json"
    out.write_text(json.dumps({
        "command": "python bench/load.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "model": env.get("TINYGPT_DEFAULT_MODEL", "shakespeare.npz"),
        "processes": args.cluster or 1, "think_s": args.think, "duration_s": args.duration,
        "machine": machine_info(),
        "conditions": {"load_before": args.load_before, "load_after": os.getloadavg()},
        "rows": rows}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


def run_one(args, url: str, server, n: int) -> dict:
    client_cpu = resource.getrusage(resource.RUSAGE_SELF)
    sampler = MemorySampler(server.pid) if server else None
    start = time.monotonic()
    if sampler:
        with sampler:
            results = asyncio.run(run_class(url, n, args.duration, args.max_actions,
                                            args.think, args.ramp, args.seed))
    else:
        results = asyncio.run(run_class(url, n, args.duration, args.max_actions, args.think,
                                        args.ramp, args.seed))
    row = summary(n, results, sampler, time.monotonic() - start)
    used = resource.getrusage(resource.RUSAGE_SELF)
    row["client_cpu_s"] = (used.ru_utime + used.ru_stime
                           - client_cpu.ru_utime - client_cpu.ru_stime)
    print_row(row)
    print(f"    (load client used {row['client_cpu_s']:.1f} s of CPU on the same machine)")
    print_actions(results)
    return row


def run_soak(args, url: str, server) -> int:
    """Students keep coming and going (a new session per lesson) until enough actions."""
    n = args.sessions[0]
    per_student = max(10, args.interactions // n + 1)
    duration = max(args.duration, args.interactions * args.think / n * 1.5)
    sampler = MemorySampler(server.pid, every=1.0) if server else None
    start = time.monotonic()
    results = Results()
    with sampler or contextlib.nullcontext():
        rounds = 0
        while results.actions < args.interactions and time.monotonic() - start < duration * 3:
            part = asyncio.run(run_class(url, n, duration, min(per_student, 11), args.think,
                                         args.ramp, args.seed + rounds))
            rounds += 1
            for action, values in part.latencies.items():
                results.latencies.setdefault(action, []).extend(values)
            results.actions += part.actions
            results.errors += part.errors
    row = summary(n, results, sampler, time.monotonic() - start)
    print_row(row)
    print_actions(results)
    if sampler:
        return 1 if soak_report(sampler.samples, results.actions) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
