"""A live class under load with a lesson running (issue 48): the teacher runs a shipped lesson
file, step by step, while N students follow and answer its rounds; K processes behind nginx.

The students are websocket sessions as in bench/load_class.py (Streamlit's own protocol, the
server's push, the heartbeat every POLL seconds). The teacher drives the class through the class
store as the lesson runner does (tinygpt_hosting.classroom.lesson.runner): each step is published
with its page, prompt, position, controls and model; a step with a question opens its round
(its choices, its true next token), which every student answers (a choice: the pill; a free
guess: typed), and is revealed before Next, so each student's page draws the reveal's scores
(the room's probability beside the model's). On a large model's Decoding page half the
students write a run, as in bench/load.py.

Measured, against the class targets of docs/serving.md (every click p95 <= 2 s, first words
p95 <= 1 s, the processes' peak RSS together < 3 GB; on the shipped model a click p95 <= 1.5 s):
  step shown     the teacher publishes a step (Next) -> the student's session finished a run of
                 the step's page on the step's prompt
  click          join, a guess (form submit), writing a run: send -> its run finished (what
                 the server sent before the send is read first, not taken for its end)
  first words    on the Decoding page: writing a run (a large model), the click -> its first
                 words on screen; on a model whose page writes its runs itself, from the
                 moment the step may show them (its Next, or its round's reveal) -> the first
                 words on the student's screen
  guesses        every guess confirmed by the app (whenever its confirmation came) is counted
                 in its round exactly once
  peak RSS       the server's process tree (nginx and both processes), sampled in /proc

    python bench/load_lesson.py --sessions 30 --cluster 2 --lesson 1_next_word.toml \\
        --real-model smollm2 --out smollm2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import machine_info, real_model  # noqa: E402
from bench.load import (  # noqa: E402
    ROOT,
    _shows_generated_words,
    free_port,
    server_env,
    start_app,
    start_cluster,
    stop,
    wait_healthy,
    warm_up,
)
from bench.load_class import (  # noqa: E402
    GUESS_LABEL,
    JOIN_WAIT,
    LOOK_SECONDS,
    POLL,
    SEND_LABEL,
    ClassStudent,
    _maybe_write,
    join_class,
)
from bench.servers import MemorySampler  # noqa: E402

PICK_LABEL = "Pick a token"  # a lesson's choices, as pills
FINISHED_EARLY = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
FINISHED_FRAGMENT = ForwardMsg.ScriptFinishedStatus.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
DRAIN_SECONDS = 0.005  # a message already sent arrives within this; none waits longer
TARGETS = {"click_p95_s": 2.0, "first_words_p95_s": 1.0, "peak_rss_mb": 3 * 1024}


class LessonStudent(ClassStudent):
    """A class student that also notes every full run it finished: when, on which page and
    prompt (a step may keep the page or the prompt of the one before)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prompt: str | None = None
        self.runs: list[tuple[float, str, str | None]] = []  # (time, page hash, prompt)
        self.words: list[float] = []  # when generated words were drawn (any run)
        self._before_start = False  # a rerun sent, its run's new_session not read yet

    def _note(self, fm: ForwardMsg, kind: str | None) -> None:
        super()._note(fm, kind)
        if kind == "page_info_changed":
            from urllib.parse import parse_qs

            self.prompt = parse_qs(fm.page_info_changed.query_string).get("prompt", [None])[0]
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element" and \
                _shows_generated_words(fm.delta.new_element):
            self.words.append(time.time())
        elif kind == "script_finished" and fm.script_finished not in (FINISHED_EARLY,
                                                                       FINISHED_FRAGMENT):
            self.runs.append((time.time(), self.page_hash, self.prompt))

    async def rerun(self, query: dict | None = None, page: str | None = None,
                    values: dict[str, object] | None = None) -> float:
        """A rerun that ends with its own run: a full run starts with its new_session, so a
        run's end read before that is an earlier run's (one that finished while the click was
        on its way: it ended a write at 0.0 s, with no first words)."""
        fragments = {self.widgets[label].fragment_id for label in values or {}}
        self._before_start = not (len(fragments) == 1 and "" not in fragments)
        try:
            return await super().rerun(query, page, values)
        finally:
            self._before_start = False

    def _take(self, fm: ForwardMsg) -> bool:
        kind = fm.WhichOneof("type")
        if self._before_start:
            if kind == "new_session":
                self._before_start = False
            elif kind == "script_finished":  # an earlier run's end: noted, not taken for ours
                self._note(fm, kind)
                return False
        return super()._take(fm)

    async def drain(self) -> None:
        """Read what the server has already sent, without waiting for more: called before a
        click (outside its timing), so the click does not end on the finish of a run the
        class's watcher started while the student was thinking (it did: a write "took" 0.0 s
        with no first words, and a guess's confirmation came after the guess was counted)."""
        while await self.take_next(DRAIN_SECONDS):
            pass

    def shown_at(self, since: float, page: str, prompt: str) -> float | None:
        """When this student first finished a run of `page` on `prompt` after `since`."""
        wanted = self.pages.get(page)
        return next((t for t, page_hash, shown in self.runs
                     if t >= since and page_hash == wanted and shown == prompt), None)


class Tally:
    def __init__(self, expected: int):
        self.expected = expected  # students who will join
        self.clicks: dict[str, list[float]] = {}  # kind of click -> seconds
        self.writes: list[float] = []  # read by load_class._maybe_write
        self.first_words: list[float] = []
        self.errors: list[str] = []
        self.sent: dict[int, set[str]] = {}  # round -> the guessers' names

    def click(self, kind: str, seconds: float) -> None:
        self.clicks.setdefault(kind, []).append(seconds)


def guess_values(student: LessonStudent, i: int) -> tuple[str, dict]:
    """(who, the form's values): a choice round's pill (one of its labels), else typed text."""
    widget = student.widgets.get(PICK_LABEL)
    if GUESS_LABEL not in student.widgets and widget is not None:
        labels = [option.content for option in widget.options]
        return f"s{i}", {PICK_LABEL: student.rng.choice(labels), SEND_LABEL: True}
    return f"s{i}", {GUESS_LABEL: f"g{i}", SEND_LABEL: True}


async def run_student(i: int, url: str, code: str, done: asyncio.Event, tally: Tally,
                      students: list, rounds: list, arrival: float) -> None:
    student = LessonStudent(url, random.Random(i))
    students.append(student)
    answered: set[int] = set()
    guessed: dict[int, str] = {}  # round -> who this student sent its guess as
    await asyncio.sleep(arrival)  # scanning the QR code takes a moment
    try:
        tally.click("join", await join_class(student, code, f"s{i}"))
        next_beat = time.monotonic() + POLL
        while not done.is_set():
            await student.listen(min(LOOK_SECONDS, max(0.0, next_beat - time.monotonic())))
            if time.monotonic() >= next_beat:
                await student.beat()
                next_beat = time.monotonic() + POLL
            await student.drain()
            writes = len(tally.writes)  # shared: nothing awaited before _maybe_write's own click
            await _maybe_write(student, tally)
            if len(tally.writes) > writes:
                tally.click("write a run", tally.writes[-1])
            number = rounds[-1] if rounds and SEND_LABEL in student.widgets else None
            if number and number not in answered | student.confirmed:
                await asyncio.sleep(student.rng.uniform(0.5, 3.0))  # thinking
                who, values = guess_values(student, i)  # the same draws of rng in every run
                await student.drain()  # the screen as it is now
                if not all(label in student.widgets for label in values):
                    continue  # the round was revealed meanwhile: nothing to send it to
                start = time.perf_counter()
                await student.rerun(values=values)
                tally.click("guess", time.perf_counter() - start)
                answered.add(number)
                guessed[number] = who
    except Exception as err:  # noqa: BLE001 - every failure is counted
        tally.errors.append(f"student {i}: {type(err).__name__}: {err}"[:300])
    finally:
        for number in student.confirmed & set(guessed):  # whenever the app said it was in
            tally.sent.setdefault(number, set()).add(guessed[number])
        await student.close()


def lesson_steps(name: str, models: list[str], default: str | None):
    """The lesson's steps, each with the model it runs on and what its publish carries."""
    from tinygpt_hosting.classroom.lesson import loader
    from tinygpt_hosting.classroom.lesson.runner import choose_model, round_details

    lesson = loader.load_lesson(loader.shipped_lessons()[name])
    for step in lesson.steps:
        model_id, _ = choose_model(step.models, models, default)
        controls = dict(step.controls, **({"model": model_id} if model_id else {}))
        top_p = float(step.controls.get("top_p", 0.9))
        yield step, controls, (round_details(step, model_id, top_p)
                               if step.question is not None else None)


async def teach(room, code: str, secret: str, steps: list, every: float, tally: Tally,
                rounds: list, published: list) -> None:
    """Once the class has joined: every step for `every` s; a round is open for `every` s,
    then revealed and discussed for `every` s more (the teacher's Next, Reveal, Next)."""
    waited = time.monotonic() + JOIN_WAIT
    while (await asyncio.to_thread(room.teacher_view, code, secret)).students < tally.expected \
            and time.monotonic() < waited:
        await asyncio.sleep(0.5)
    for step, controls, details in steps:
        shown = time.time()
        await asyncio.to_thread(room.publish, code, secret, page=step.page, prompt=step.prompt,
                                position=step.position, controls=controls)
        if details is not None:
            number = await asyncio.to_thread(room.open_round, code, secret, kind="next_token",
                                             prompt=step.prompt, position=step.position,
                                             details=details)
            rounds.append(number)
            await asyncio.sleep(every)
            await asyncio.to_thread(room.reveal, code, secret, number)
        published.append((step, shown, time.time()))  # (step, its Next, when it may show all)
        await asyncio.sleep(every)


def percentiles(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"n": len(values), "p50_s": float(np.percentile(values, 50)),
            "p95_s": float(np.percentile(values, 95)), "max_s": float(np.max(values))}


def counted(room, code: str, secret: str, rounds: list, tally: Tally) -> dict:
    """Each round's guesses as the store counted them against those the app confirmed."""
    lost = extra = 0
    for number in rounds:
        result = room.round_result(code, number, secret=secret)
        confirmed = tally.sent.get(number, set())
        lost += max(0, len(confirmed) - result.answers)
        extra += max(0, result.answers - len(confirmed))
    return {"confirmed": sum(map(len, tally.sent.values())), "lost": lost,
            "counted_not_confirmed": extra}


async def run_lesson(url: str, room, n: int, steps: list, every: float, ramp: float) -> dict:
    new = room.create_class()
    tally, rounds, published, students = Tally(n), [], [], []
    done = asyncio.Event()
    tasks = [asyncio.create_task(run_student(i, url, new.code, done, tally, students, rounds,
                                             ramp * i / n)) for i in range(n)]
    await teach(room, new.code, new.secret, steps, every, tally, rounds, published)
    done.set()
    await asyncio.gather(*tasks)
    shown = [(s.shown_at(t, step.page, step.prompt), t) for step, t, _ in published
             for s in students]
    words = [w - free for step, _, free in published if step.page == "Decoding"
             for s in students if (w := next((w for w in s.words if w >= free), None))]
    delays = [seen - t for seen, t in shown if seen is not None]
    clicks = [v for values in tally.clicks.values() for v in values]
    return {
        "students": n, "steps": len(published), "rounds": len(rounds),
        "errors": len(tally.errors), "error_samples": tally.errors[:5],
        "steps_shown": len(delays), "steps_missed": sum(1 for seen, _ in shown if seen is None),
        "step_shown": percentiles(delays),
        "click": percentiles(clicks),
        "by_click": {kind: percentiles(v) for kind, v in sorted(tally.clicks.items())},
        "first_words": percentiles(tally.first_words),
        "first_words_after_step": percentiles(words),
        **counted(room, new.code, new.secret, rounds, tally),
    }


def met(row: dict) -> dict[str, bool]:
    """Each target of TARGETS: met or not (a figure not measured is not met)."""
    words = row["first_words"] or row["first_words_after_step"] or {}
    figures = {"click_p95_s": (row["click"] or {}).get("p95_s"),
               "first_words_p95_s": words.get("p95_s"),
               "peak_rss_mb": row.get("peak_rss_mb")}
    return {name: figures[name] is not None and figures[name] <= top
            for name, top in TARGETS.items()}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=30, help="students")
    p.add_argument("--cluster", type=int, default=2, help="processes behind nginx (0: one)")
    p.add_argument("--lesson", default="1_next_word.toml", help="a file of lessons/")
    p.add_argument("--every", type=float, default=10.0,
                   help="seconds per step (a round: open this long, then as long revealed)")
    p.add_argument("--ramp", type=float, default=10.0, help="students arrive over these seconds")
    p.add_argument("--models-dir")
    p.add_argument("--model")
    p.add_argument("--real-model", choices=["smollm2"], help="serve this model of tinygpt.models "
                   "from the user's cache folder (bench.common.real_model)")
    p.add_argument("--out", help="write bench/results/other/lesson_load_<OUT>.json")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.real_model:
        path = real_model(args.real_model)
        args.models_dir, args.model = str(path.parent), path.name
    data = tempfile.mkdtemp(prefix="tinygpt-lesson-")
    env = server_env(args.models_dir, args.model)
    env["TINYGPT_DATA_DIR"] = data
    os.environ.update({k: env[k] for k in ("TINYGPT_DATA_DIR", "TINYGPT_MODELS_DIR",
                                           "TINYGPT_DEFAULT_MODEL") if k in env})
    from tinygpt_app.compute.models import available_models
    from tinygpt_hosting.classroom.rules import open_classroom

    steps = list(lesson_steps(args.lesson, available_models(), args.model or "shakespeare.npz"))
    port, first = free_port(), random.Random().randrange(20000, 30000)
    server = start_cluster(args.cluster, port, first, env) if args.cluster \
        else start_app(port, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        for backend in [f"http://127.0.0.1:{first + i}" for i in range(args.cluster)] or [url]:
            warm_up(backend)
        load_before = os.getloadavg()
        with MemorySampler(server.pid) as sampler:
            row = asyncio.run(run_lesson(url, open_classroom(), args.sessions, steps,
                                         args.every, args.ramp))
        row.update(peak_rss_mb=sampler.peak / 2**20, server_cpu_s=sampler.cpu_used,
                   lesson=args.lesson, models=sorted({c.get("model", "") for _, c, _ in steps}),
                   processes=max(args.cluster, 1), every_s=args.every, ramp_s=args.ramp,
                   load_average_before=[round(x, 2) for x in load_before],
                   load_average_after=[round(x, 2) for x in os.getloadavg()])
        row["targets_met"] = met(row)
        print(json.dumps(row, indent=1))
        if args.out:
            out = ROOT / "bench" / "results" / "other" / f"lesson_load_{args.out}.json"
            out.write_text(json.dumps({
                "command": "python bench/load_lesson.py " + " ".join(sys.argv[1:]),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "machine": machine_info(), "row": row}, indent=1) + "\n")
            print(f"wrote {out.relative_to(ROOT)}")
    finally:
        stop(server)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
