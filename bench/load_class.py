"""A live class under load: 1 teacher + N students following and guessing, over K processes
behind nginx, with the class store in SQLite (default) or Redis.

Students are websocket sessions as in bench/load.py (Streamlit's own protocol): each opens the
join link, joins, and then does what a browser tab does: reads the runs the server starts on
its own (the push of tinygpt_hosting.classroom.push) and reruns its heartbeat fragment every POLL
seconds
(the browser's run_every timer). The students arrive over --ramp seconds (each
scans the QR code), and the teacher starts once they are all in, then drives the class through
the class store (tinygpt_hosting.classroom.rules, the same calls the teacher's page makes):
every few seconds a new prompt and page, and now and then a "what comes next?" round. (Until
stop 20 the
teacher published its first step while 60 students were still joining at the same instant, so
the join queue counted as that step's follow delay.)

Measured:
  follow delay   teacher publishes -> the student's session shows that prompt in its URL
  click          a student's guess (form submit) or join: send -> script finished
  writes         on the Decoding page of a large model (its runs are written when asked), a
                 student who sees "Write the ... run" buttons clicks one (half of them do):
                 send -> script finished, and until its first generated words were on screen
  guesses        after each reveal: every guess the app confirmed ("your guess is in") counted
                 exactly once (0 lost, 0 doubled), student by student (each guesses its own
                 text); a guess sent after the next round opened is refused, not lost
  errors         timeouts, dropped connections, exceptions or error boxes in the app

With --teacher-tab the teacher is a tab too (issue 49): it starts the class on the Class page,
then clicks from page to page (a new prompt typed every len(PAGES) pages, so each page is once
new and then cached), as a teacher in front of a room does; no rounds. Measured:
  page change    the teacher's click to another page: send -> the teacher's own run finished
                 (teacher p50 / p95), and -> each student's run of that page finished
                 (students p50 / p95: the wait the room sees)

    python bench/load_class.py --students 60 --cluster 2                # SQLite
    python bench/load_class.py --students 60 --cluster 2 --store redis  # redis-server here
    python bench/load_class.py --students 10 --cluster 0 --teacher-tab --shape gpt2-small
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs

import numpy as np
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.load import (  # noqa: E402
    ROOT,
    WRITE_BUTTONS,
    Student,
    free_port,
    server_env,
    start_app,
    start_cluster,
    stop,
    wait_healthy,
    warm_up,
)
from tinygpt_hosting.classroom.session import POLL_SECONDS  # noqa: E402

FINISHED_FULL_RUN = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
POLL = POLL_SECONDS  # the app's heartbeat: the browser reruns it this often
LOOK_SECONDS = 0.5  # a student looks at the screen this often for a new question
JOIN_WAIT = 60.0  # the teacher waits at most this long for the class to join
PAGES = ["Logits", "Attention", "Softmax_and_sampling", "Decoding", "Tokens_and_embeddings"]
WRITE_SHARE = 0.5  # of the students shown a Decoding page's write buttons, those who click
GUESS_LABEL, SEND_LABEL = "… or type your guess", "Send my guess"
IS_IN = re.compile(r"Your guess for round (\d+) is in")


class ClassStudent(Student):
    """A student tab: also remembers its heartbeat fragment and the prompts its URL showed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.heartbeat = ""  # the run_every fragment's id
        self.seen_prompts: dict[str, float] = {}  # prompt -> first time the URL showed it
        self.confirmed: set[int] = set()  # rounds whose "your guess is in" the app showed
        self.considered: set[tuple] = set()  # (page, prompt) whose write buttons it weighed

    def _note(self, fm: ForwardMsg, kind: str | None) -> None:
        """The heartbeat fragment, the prompts the URL showed, and the confirmed guesses."""
        if kind == "auto_rerun":
            self.heartbeat = fm.auto_rerun.fragment_id
        elif kind == "page_info_changed":
            prompt = parse_qs(fm.page_info_changed.query_string).get("prompt", [None])[0]
            if prompt is not None:
                self.seen_prompts.setdefault(prompt, time.time())
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            element = fm.delta.new_element
            if element.WhichOneof("type") == "alert":
                confirmed = IS_IN.search(element.alert.body)
                if confirmed:
                    self.confirmed.add(int(confirmed.group(1)))

    async def listen(self, seconds: float) -> None:
        """Read for `seconds` what the server sends on its own, as a browser tab does: the runs
        its class's watcher starts when the teacher moves on (tinygpt_hosting.classroom.push)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0 and await self.take_next(left):
            pass

    async def take_next(self, timeout: float) -> bool:
        """Read and take the server's next message; False when none came within `timeout`."""
        try:
            raw = await asyncio.wait_for(self.ws.recv(), timeout)
        except TimeoutError:
            return False
        fm = ForwardMsg()
        fm.ParseFromString(raw)
        self._take(fm)
        return True

    async def beat(self) -> None:
        """One heartbeat, as the browser's timer sends it."""
        msg = self._fragment_rerun()
        await self.ws.send(msg.SerializeToString())
        await asyncio.wait_for(self._read_until_finished(full=False), self.timeout)

    def _fragment_rerun(self):
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        msg.rerun_script.page_script_hash = self.page_hash
        msg.rerun_script.fragment_id = self.heartbeat
        msg.rerun_script.is_auto_rerun = True
        return msg


class TeacherTab(ClassStudent):
    """The teacher's tab: starts the class in the app (its code read off the page), then
    changes page as a click in the menu does."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.codes: list[str] = []  # the code blocks of the last run: the class code first

    def _note(self, fm: ForwardMsg, kind: str | None) -> None:
        super()._note(fm, kind)
        if kind == "new_session":
            self.codes = []
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            element = fm.delta.new_element
            if element.WhichOneof("type") == "code":
                self.codes.append(element.code.code_text)

    async def start_class(self) -> str:
        await self.connect()
        await self.rerun(page="Class")
        await self.rerun(values={"Start a class": True})
        if not self.codes:  # st.rerun() after the click: the class page draws in a second run
            await self.rerun()
        return self.codes[0]


class Tally:
    def __init__(self):
        self.clicks: list[float] = []
        self.writes: list[float] = []  # Decoding: writing a run, the whole click
        self.first_words: list[float] = []  # ... until its first words were on screen
        self.errors: list[str] = []
        self.sent = 0  # guesses sent (a late one, after the next round opened, is refused)
        self.senders: set[str] = set()  # every guess text sent
        self.submitted: dict[int, set[str]] = {}  # round -> guesses sent (one per student)
        self.expected = 0  # students who will join
        self.joined = 0  # students whose join finished
        self.teacher_runs: list[float] = []  # --teacher-tab: the teacher's own page changes


async def join_class(student: ClassStudent, code: str, nickname: str) -> float:
    """The student opens the class link and joins under `nickname`: the join click's seconds."""
    await student.connect()
    await student.rerun(query={"class": code}, page="Class")
    start = time.perf_counter()
    await student.rerun(values={"Class code": code, "Nickname (optional)": nickname,
                                "Join the class": True})
    return time.perf_counter() - start


async def run_student(i: int, url: str, code: str, deadline: float, tally: Tally,
                      students: list, rounds: list, arrival: float = 0.0) -> None:
    student = ClassStudent(url, random.Random(i))
    students.append(student)
    answered: set[int] = set()
    await asyncio.sleep(arrival)  # scanning the QR code takes a moment
    try:
        tally.clicks.append(await join_class(student, code, f"s{i}"))
        tally.joined += 1
        next_beat = time.monotonic() + POLL
        while time.monotonic() < deadline:
            await student.listen(min(LOOK_SECONDS, max(0.0, next_beat - time.monotonic())))
            if time.monotonic() >= next_beat:
                await student.beat()
                next_beat = time.monotonic() + POLL
            await _maybe_write(student, tally)
            number = _open_round(student, rounds)
            if number and number not in answered | student.confirmed:
                await asyncio.sleep(student.rng.uniform(0.5, 3.0))  # thinking
                guess = f"g{i}"
                start = time.perf_counter()
                await student.rerun(values={GUESS_LABEL: guess, SEND_LABEL: True})
                tally.clicks.append(time.perf_counter() - start)
                answered.add(number)
                tally.sent += 1
                tally.senders.add(guess)
        for confirmed in student.confirmed:  # the rounds the app said it took this guess for
            tally.submitted.setdefault(confirmed, set()).add(f"g{i}")
    except Exception as err:  # noqa: BLE001 - every failure is counted
        tally.errors.append(f"student {i}: {type(err).__name__}: {err}"[:300])
    finally:
        await student.close()


async def _maybe_write(student: ClassStudent, tally: Tally) -> None:
    """On a large model's Decoding page, ask for one of the runs not written yet (once per
    page shown: the buttons are gone once the run is written, by this student or another)."""
    offered = [label for label in WRITE_BUTTONS if label in student.widgets]
    shown = (student.page_hash, max(student.seen_prompts, key=student.seen_prompts.get,
                                    default=None))
    if not offered or shown in student.considered:
        return
    student.considered.add(shown)
    if student.rng.random() >= WRITE_SHARE:
        return
    seconds = await student.rerun(values={student.rng.choice(offered): True})
    tally.writes.append(seconds)
    if student.first_words_s is not None:
        tally.first_words.append(student.first_words_s)


def _open_round(student: ClassStudent, rounds: list) -> int | None:
    """The latest round, when the page shows its guess form."""
    if rounds and GUESS_LABEL in student.widgets and SEND_LABEL in student.widgets:
        return rounds[-1]
    return None


async def teach(room, code: str, secret: str, deadline: float, published: dict, tally: Tally,
                rounds: list, every: float) -> None:
    """The teacher: once the class has joined, a new prompt and page every `every` s; a round
    every 3rd step, checked at the end."""
    waited = time.monotonic() + JOIN_WAIT
    while (await asyncio.to_thread(room.teacher_view, code, secret)).students < tally.expected \
            and time.monotonic() < waited:  # a teacher starts when the class is in
        await asyncio.sleep(0.5)
    step = 0
    while time.monotonic() + every < deadline:
        prompt = f"ROMEO:\nBut soft, what light (step {step})"
        published[prompt] = time.time()
        await asyncio.to_thread(room.publish, code, secret, page=PAGES[step % len(PAGES)],
                                prompt=prompt, position=None)
        if step % 3 == 0:
            number = await asyncio.to_thread(room.open_round, code, secret, kind="next_token",
                                             prompt=prompt)
            rounds.append(number)
        await asyncio.sleep(every)
        step += 1


def check_rounds(room, code: str, secret: str, rounds: list,
                 tally: Tally) -> tuple[int, int, int, int]:
    """(lost, doubled, unconfirmed, phantom) over every round. lost: confirmed by the app but
    not counted; doubled: a student's guess counted twice; unconfirmed: counted, but the
    simulated student never read the app's confirmation (it may have stopped at the deadline);
    phantom: counted though no student sent it."""
    lost = doubled = unconfirmed = phantom = 0
    for number in rounds:
        result = room.reveal(code, secret, number)
        counted = {text.strip(): n for text, n in result.guesses}
        confirmed = tally.submitted.get(number, set())
        lost += sum(1 for g in confirmed if g not in counted)
        doubled += sum(n - 1 for n in counted.values() if n > 1)
        unconfirmed += sum(1 for g in counted if g not in confirmed and g in tally.senders)
        phantom += sum(1 for g in counted if g not in tally.senders)
    return lost, doubled, unconfirmed, phantom


async def run_class(url: str, room, n: int, duration: float, every: float,
                    ramp: float = 10.0) -> dict:
    new = room.create_class()
    tally, published, rounds, students = Tally(), {}, [], []
    tally.expected = n
    deadline = time.monotonic() + duration
    tasks = [run_student(i, url, new.code, deadline, tally, students, rounds, ramp * i / n)
             for i in range(n)]
    await asyncio.sleep(0)
    await asyncio.gather(teach(room, new.code, new.secret, deadline, published, tally, rounds,
                               every), *tasks)
    view = room.teacher_view(new.code, new.secret)
    lost, doubled, unconfirmed, phantom = check_rounds(room, new.code, new.secret, rounds,
                                                        tally)
    delays = [s.seen_prompts[p] - t for s in students for p, t in published.items()
              if p in s.seen_prompts]
    missed = sum(1 for s in students for p in list(published)[:-1] if p not in s.seen_prompts)
    clicks = np.array(tally.clicks)
    writes, words = np.array(tally.writes), np.array(tally.first_words)
    if os.environ.get("FOLLOW_DEBUG"):
        for p, t in published.items():
            d = np.array([s.seen_prompts[p] - t for s in students if p in s.seen_prompts])
            if d.size:
                print(f"step {p[:20]!r}: n={d.size} p10 {np.percentile(d, 10):.2f} "
                      f"p50 {np.median(d):.2f} p90 {np.percentile(d, 90):.2f} max {d.max():.2f}",
                      file=sys.stderr)
    delays = np.array(delays)
    return {
        "students": n, "rounds": len(rounds),
        "sent": tally.sent, "confirmed": sum(map(len, tally.submitted.values())),
        "lost": lost, "doubled": doubled, "unconfirmed": unconfirmed, "phantom": phantom,
        "errors": len(tally.errors),
        "follows": int(delays.size), "follows_missed": missed,
        "follow_p50_s": float(np.percentile(delays, 50)) if delays.size else None,
        "follow_p95_s": float(np.percentile(delays, 95)) if delays.size else None,
        "follow_max_s": float(delays.max()) if delays.size else None,
        "click_p50_s": float(np.percentile(clicks, 50)) if clicks.size else None,
        "click_p95_s": float(np.percentile(clicks, 95)) if clicks.size else None,
        "writes": int(writes.size),
        "write_p95_s": float(np.percentile(writes, 95)) if writes.size else None,
        "first_words_p95_s": float(np.percentile(words, 95)) if words.size else None,
        "seats": view.students, "error_samples": tally.errors[:5],
    }


class PageWatch:
    """When each student's run of a page finished (the page's script hash, wall clock)."""

    def __init__(self, students: list[ClassStudent]):
        self.finished: dict[int, list[tuple[str, float]]] = {id(s): [] for s in students}
        for student in students:
            student._note = self._noting(student, student._note)

    def _noting(self, student, note):
        def noted(fm: ForwardMsg, kind: str | None) -> None:
            note(fm, kind)
            if kind == "script_finished" and fm.script_finished == FINISHED_FULL_RUN:
                self.finished[id(student)].append((student.page_hash, time.time()))
        return noted

    def delays(self, page_hash: str, since: float) -> list[float]:
        """Each student's first finished run of the page after `since`, in seconds."""
        out = []
        for runs in self.finished.values():
            ends = [t for h, t in runs if h == page_hash and t >= since]
            if ends:
                out.append(min(ends) - since)
        return out


async def teach_from_a_tab(teacher: TeacherTab, deadline: float, tally: Tally,
                           watch: PageWatch, every: float) -> list[float]:
    """The teacher tab, once the class has joined: another page every `every` s, a new
    prompt before each round of the pages. Returns the students' follow delays."""
    waited = time.monotonic() + JOIN_WAIT
    while tally.joined < tally.expected and time.monotonic() < waited:
        await asyncio.sleep(0.5)
    follows, step = [], 0
    while time.monotonic() + every < deadline:
        page = PAGES[step % len(PAGES)]
        if step % len(PAGES) == 0:
            await teacher.rerun(values={"Prompt": f"ROMEO:\nBut soft, what light (take {step})"})
        since = time.time()
        tally.teacher_runs.append(await teacher.rerun(page=page))
        await asyncio.sleep(every)
        follows += watch.delays(teacher.page_hash, since)
        step += 1
    return follows


async def run_class_tab(url: str, n: int, duration: float, every: float,
                        ramp: float = 10.0) -> dict:
    """--teacher-tab: the class started and led from a tab; the page changes measured."""
    tally, students = Tally(), []
    tally.expected = n
    teacher = TeacherTab(url, random.Random(-1))
    code = await teacher.start_class()
    deadline = time.monotonic() + duration
    tasks = [asyncio.create_task(run_student(i, url, code, deadline, tally, students, [],
                                             ramp * i / n)) for i in range(n)]
    while len(students) < n:  # each task makes its student first, then waits its turn
        await asyncio.sleep(0.01)
    watch = PageWatch(students)
    follows, *_ = await asyncio.gather(teach_from_a_tab(teacher, deadline, tally, watch, every),
                                       *tasks)
    await teacher.close()
    runs, delays = np.array(tally.teacher_runs), np.array(follows)
    return {
        "students": n, "joined": tally.joined, "errors": len(tally.errors),
        "page_changes": int(runs.size), "follows": int(delays.size),
        "teacher_page_p50_s": float(np.percentile(runs, 50)) if runs.size else None,
        "teacher_page_p95_s": float(np.percentile(runs, 95)) if runs.size else None,
        "students_follow_p50_s": float(np.percentile(delays, 50)) if delays.size else None,
        "students_follow_p95_s": float(np.percentile(delays, 95)) if delays.size else None,
        "error_samples": tally.errors[:5],
    }


def start_redis(port: int) -> subprocess.Popen:
    return subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--students", type=int, default=60)
    p.add_argument("--cluster", type=int, default=2, help="processes behind nginx (0: one)")
    p.add_argument("--store", choices=["sqlite", "redis"], default="sqlite")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--every", type=float, default=6.0, help="seconds between teacher steps")
    p.add_argument("--ramp", type=float, default=10.0,
                   help="the students arrive over this many seconds (the teacher starts once "
                        "they are all in)")
    p.add_argument("--models-dir")
    p.add_argument("--model")
    p.add_argument("--shape", choices=["gpt2-small", "smollm2-135m"],
                   help="serve a random model of this shape (bench/large_folders.py)")
    p.add_argument("--teacher-tab", action="store_true",
                   help="the teacher is a tab that changes page: its page changes measured")
    args = p.parse_args(argv)
    if args.shape:
        from bench.large_folders import serve_on_shape

        return serve_on_shape(args, serve_class)
    return serve_class(args)


def serve_class(args) -> int:
    """Start the server(s) and the store, run the class, stop."""
    data = tempfile.mkdtemp(prefix="tinygpt-class-")
    env = server_env(args.models_dir, args.model)
    env["TINYGPT_DATA_DIR"] = data
    redis = None
    if args.store == "redis":
        redis_port = free_port()
        redis = start_redis(redis_port)
        env["TINYGPT_CLASS_STORE"] = f"redis://127.0.0.1:{redis_port}/0"
    os.environ.update({k: env[k] for k in ("TINYGPT_DATA_DIR", "TINYGPT_CLASS_STORE")
                       if k in env})
    port = free_port()
    first = random.Random().randrange(20000, 30000)
    server = start_cluster(args.cluster, port, first, env) if args.cluster \
        else start_app(port, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        backends = [f"http://127.0.0.1:{first + i}" for i in range(args.cluster)] or [url]
        for backend in backends:
            warm_up(backend)
        from tinygpt_hosting.classroom.rules import open_classroom

        room = open_classroom()
        if args.teacher_tab:
            row = asyncio.run(run_class_tab(url, args.students, args.duration, args.every,
                                            args.ramp))
        else:
            row = asyncio.run(run_class(url, room, args.students, args.duration, args.every,
                                        args.ramp))
        row.update(store=args.store, processes=max(args.cluster, 1), ramp_s=args.ramp,
                   every_s=args.every, duration_s=args.duration,
                   model=args.shape or args.model or "shipped", load_before=os.getloadavg()[0])
        print(json.dumps(row, indent=1))
        name = f"load_class_{args.store}"
        if args.teacher_tab:
            name = f"load_class_teacher_{args.shape or args.model or 'shipped'}"
        out = ROOT / "bench" / "results" / "other" / f"{name}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(row, indent=1) + "\n")
    finally:
        stop(server)
        if redis is not None:
            stop(redis)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
