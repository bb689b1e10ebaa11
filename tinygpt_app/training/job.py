"""The training job behind the Training page: a child process that learns the vocabulary,
encodes the text and trains, and the server-wide limit on how many run at once.

Why a child process (issue 12): vocabulary learning, encoding and a training step's many small
NumPy operations hold Python's GIL. In a thread of the one server process they slowed every
other student's page (23 Decoding-page timeouts in a measured class load). The child
(tinygpt_app.training.worker) runs at a low OS priority, so it cannot hold the server's GIL
and only uses the CPU time the class leaves idle. The page thread only checks the text's
length, takes a slot and starts the process: it does no vocabulary learning or encoding.

Nothing is pickled: the job goes to the child as JSON and .npy files in a private temp dir,
the progress comes back as JSON lines on the child's stdout, and the trained model and
tokenizer as one checkpoint written by tinygpt.checkpoint.files.save and read by its `load`.

A class of students shares a few CPU cores: at most ``settings.max_trainings()`` trainings run
at once on the server (all sessions together), so the pages stay quick for everyone; the others
wait in line, first come first served (tinygpt_app.training.queue).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tinygpt.checkpoint import files as checkpoint
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt_app import settings
from tinygpt_app.compute.models import model_label, model_version
from tinygpt_app.compute.shared_cache import SharedCache
from tinygpt_app.host import host
from tinygpt_app.kit.state import AppState
from tinygpt_app.training.queue import ADDRESS, OFF, TrainingQueue, Turn
from tinygpt_app.training.worker import (
    FRESH_VOCAB,
    record_from_json,
    snapshot_every,
    snapshot_from_json,
)

__all__ = ["FRESH_VOCAB", "MAX_TEXT", "MIN_TEXT", "MAX_TRAININGS", "TrainingJob",
           "QUEUE", "Turn", "prepare_and_start", "refusal", "start_job", "trainings_running"]

log = logging.getLogger("tinygpt.app")

MAX_TRAININGS = settings.max_trainings()
MAX_TEXT = 200_000  # pasted text, characters
MIN_TEXT = 2_000
MAX_LINE = 4_000_000  # bytes of one line from the child (the fresh tokenizer is ~50 kB)
STOP_GRACE = 20.0  # seconds a stopped child may take to save its model before it is killed
OWNER_CHECK = 5.0  # seconds between two looks at whether the job's tab is still kept
WORKER = "tinygpt_app.training.worker"

QUEUE = TrainingQueue(MAX_TRAININGS, settings.max_training_queue(),  # the server's turns
                      per_address=settings.training_places_per_address())


def trainings_running() -> int:
    return QUEUE.running()


def _take_slot(client: str = "", limit: float = 300.0) -> int | None:
    """A slot now, for `client` (its ticket), or None: the client waits in line."""
    return QUEUE.ask(client, limit)[1]


def _give_back_slot(ticket: int | None) -> None:
    if ticket is not None:
        QUEUE.finish(ticket)


# ----------------------------------------------------------------------------- shipped ids

# The shipped corpus encoded once per server and tokenizer: (tokenizer, train ids, val ids).
# Bounded by its ids' bytes: 4 entries of at most 550,000 int64 ids each (one per character).
SHIPPED_BYTES = 4 * 550_000 * 8
_SHIPPED = SharedCache(SHIPPED_BYTES, sizeof=lambda entry: entry[1].nbytes + entry[2].nbytes)


def _shipped(key: str):
    return _SHIPPED.get(key)


def _keep_shipped(key: str, tok: BPETokenizer, train: np.ndarray, val: np.ndarray) -> None:
    _SHIPPED.put(key, (tok, train, val))


# ----------------------------------------------------------------------------- the job


def _short(message: str) -> str:
    """A child's message fit for the page: no server paths (any word that starts with a
    slash), one short line."""
    message = re.sub(r"(?<![\w.])/[^\s'\"]+", "…", message)
    return " ".join(message.split())[:300]


def _worker_env() -> dict:
    """The server's environment with one BLAS thread: the other core is for the class."""
    one = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    return {**os.environ, **one}


class TrainingJob:
    """One training run in a child process, owned by one session.

    A reader thread appends the child's step records and snapshots here; the page reads
    `records()` on a timer. When the child ends, the thread loads the trained model
    (`model`, `tokenizer`), deletes the temp dir and gives the slot back.
    """

    def __init__(self, name: str, sizes: dict, *, tokenizer: BPETokenizer | None = None,
                 shipped_key: str | None = None) -> None:
        self.name = name
        self.arch = "llama" if sizes.get("arch") == "llama" else "gpt2"  # the family trained
        self.max_steps = int(sizes["steps"])
        self.time_limit = float(sizes["limit"])
        self.snapshot_every = snapshot_every(self.max_steps)
        self.params = 0  # known once the child has its data ("ready")
        self.vocab = tokenizer.vocab_size if tokenizer is not None else FRESH_VOCAB
        self.about = ""
        self.tokenizer = tokenizer  # a fresh one comes from the child
        self.model = None  # the trained GPT, once the child is done
        self.watch: np.ndarray | None = None
        self.error: str | None = None
        self.stopped = False  # the user pressed stop (or the tab was closed: abandoned)
        self.abandoned = False
        self.model_id: str | None = None  # set once the model is registered
        self.started = self.ended = 0.0  # the training's own time: from "ready" to the end
        self.folder = Path(tempfile.mkdtemp(prefix="tinygpt-train-"))  # private: mode 0700
        self._shipped_key = shipped_key
        self._records: list = []
        self._snapshots: list = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._process: subprocess.Popen | None = None
        self._finished = False  # the child said "done"
        self.ticket: int | None = None  # its slot in the training queue, given back at the end

    @property
    def pid(self) -> int | None:
        """The child's process id (never the server's)."""
        return self._process.pid if self._process is not None else None

    def start(self, spec: dict) -> None:
        """Write the spec and start the child; the caller holds a slot, given back at the end."""
        (self.folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        self._process = subprocess.Popen(
            [sys.executable, "-m", WORKER, str(self.folder)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=None, text=True, encoding="utf-8",
            cwd=Path(__file__).resolve().parents[2], env=_worker_env())
        threading.Thread(target=self._read, name=f"train-{self.name}", daemon=True).start()

    def _read(self) -> None:
        try:
            while line := self._process.stdout.readline(MAX_LINE):
                if len(line) >= MAX_LINE:
                    raise ValueError("the training process sent a line too long")
                if not line.endswith("\n"):  # cut short: the child died while writing
                    break
                self._take(json.loads(line))
            self._process.wait()
            self._collect()
        except Exception as err:  # noqa: BLE001 - shown on the page, never lost in a thread
            log.exception("training failed")
            self.error = _short(f"{type(err).__name__}: {err}")
            self._process.kill()
            self._process.wait()
        finally:
            with contextlib.suppress(OSError):  # a "stop" still buffered for a dead child
                self._process.stdin.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            self.ended = self.ended or time.monotonic()
            _give_back_slot(self.ticket)
            self._done.set()

    def _take(self, message: dict) -> None:
        kind = message["kind"]
        if kind == "ready":
            if message["tokenizer"] is not None:
                self.tokenizer = BPETokenizer.from_json_dict(message["tokenizer"])
            self.params, self.vocab = int(message["params"]), int(message["vocab"])
            self.about = str(message["about"])
            watch = np.asarray([int(i) for i in message["watch"]], dtype=np.int64)
            self.watch = watch if len(watch) else None
            self.started = time.monotonic()
        elif kind == "step":
            record = record_from_json(message["record"])
            with self._lock:
                self._records.append(record)
        elif kind == "snapshot":
            snap = snapshot_from_json(message["snapshot"])
            with self._lock:
                self._snapshots.append(snap)
        elif kind == "error":
            self.error = _short(str(message["message"]))
        elif kind == "done":
            self._finished = True
        else:
            raise ValueError(f"unknown message {kind!r} from the training process")

    def _collect(self) -> None:
        """After the child's exit: the trained model, the shipped ids it encoded, or why not."""
        self.ended = time.monotonic()
        if self._finished:
            self.model, self.tokenizer = checkpoint.load(self.folder / "model.npz", self.folder)
            if self._shipped_key is not None and _shipped(self._shipped_key) is None:
                train = np.load(self.folder / "train.npy", allow_pickle=False)
                val = np.load(self.folder / "val.npy", allow_pickle=False)
                _keep_shipped(self._shipped_key, self.tokenizer, train, val)
        elif self.error is None and not self.stopped:
            self.error = (f"the training process ended unexpectedly (exit code "
                          f"{self._process.returncode})")

    def records(self) -> list:
        with self._lock:
            return list(self._records)

    def snapshots(self) -> list:
        """PredictionSnapshots so far (at most 21: step 1 and every 1/20 of the steps)."""
        with self._lock:
            return list(self._snapshots)

    def stop(self) -> None:
        """Ask the child to stop after its current step and save what it learnt; a child that
        does not end within STOP_GRACE seconds is killed."""
        self.stopped = True
        if self._process is None or self.done:
            return
        try:
            self._process.stdin.write("stop\n")
            self._process.stdin.flush()
        except (OSError, ValueError):  # it has just ended
            return
        timer = threading.Timer(STOP_GRACE, self._kill)
        timer.daemon = True
        timer.start()

    def watch_owner(self, alive: Callable[[], bool | None], every: float | None = None) -> None:
        """Stop this training once `alive()` says its tab's session is gone (False; None: no
        one can tell). Streamlit keeps a closed tab's session server.disconnectedSessionTTL
        for a reconnect: the training stops within that and `every` seconds. Before, a closed
        tab's training ran on to its limit (issue 45: 94 s after the tab closed, a full core)."""
        every = OWNER_CHECK if every is None else every

        def watch() -> None:
            while not self._done.wait(every):
                if alive() is False:
                    log.info("training %r stopped: its tab was closed", self.name[:40])
                    self.abandoned = True
                    self.stop()
                    return

        threading.Thread(target=watch, name="train-owner", daemon=True).start()

    def _kill(self) -> None:
        if not self.done:
            self._process.kill()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def running(self) -> bool:
        return self._process is not None and not self._done.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def seconds(self) -> float:
        if not self.started:
            return 0.0
        return (self.ended or time.monotonic()) - self.started  # frozen once it ends


# ----------------------------------------------------------------------------- starting one


def refusal(source_pasted: bool, text: str) -> str | None:
    """Why a pasted text cannot be used, checked before any work: its length."""
    if source_pasted and len(text) > MAX_TEXT:
        return f"Your text has {len(text):,} characters; at most {MAX_TEXT:,} can be used."
    if source_pasted and len(text) < MIN_TEXT:
        return f"Paste at least {MIN_TEXT:,} characters (you gave {len(text):,})."
    return None


def prepare_and_start(state: AppState, source_pasted: bool, text: str, fresh: bool,
                      sizes: dict, client: str = "", address: str = ""
                      ) -> TrainingJob | Turn | str:
    """A started job; or the client's Turn in line (ask again: it starts when its turn comes);
    or a message saying why not. `client`: the tab; `address`: its machine
    (serving.client_address), whose places in line are capped. The cheap checks come first:
    the text's length, then the queue; the costly part (learning a vocabulary, encoding the
    text) happens in the child process."""
    why = refusal(source_pasted, text)
    if why:
        return why
    turn, ticket = QUEUE.ask(client, float(sizes["limit"]), address)
    if ticket is None and turn.full:
        return refused_turn(turn)
    if ticket is None:
        return turn
    try:
        tokenizer = None if fresh else state.tokenizer
        return start_job(sizes, source_pasted=source_pasted, text=text, tokenizer=tokenizer,
                         tokenizer_name=model_label(state.model_id), watch_text=state.prompt,
                         shipped_key=None if source_pasted else (
                             f"fresh{FRESH_VOCAB}" if fresh else
                             f"{state.model_id}@{model_version(state.model_id)}"),
                         ticket=ticket, owner_alive=_session_of(client))
    except BaseException:
        _give_back_slot(ticket)
        raise


def _session_of(client: str) -> Callable[[], bool | None] | None:
    """Whether the tab `client` (its session id) is still kept by Streamlit, as a callable."""
    return (lambda: host().streamlit.session_alive(client)) if client else None


def refused_turn(turn: Turn) -> str:
    """The plain message the page shows for a refused Turn."""
    if turn.why == OFF:
        return "Training is switched off on this server."
    if turn.why == ADDRESS:
        return (f"Your computer already holds {QUEUE.per_address} places in the training line "
                "(one per open tab): wait in one of those tabs, or close some, so that every "
                "student gets a turn.")
    return (f"{QUEUE.waiting()} students already wait for a training on this server (at "
            f"most {MAX_TRAININGS} run at once, so the app stays quick for everyone). "
            "Please try again in a few minutes.")


def start_job(sizes: dict, *, source_pasted: bool, text: str = "",
              tokenizer: BPETokenizer | None = None, tokenizer_name: str = "",
              watch_text: str = "", shipped_key: str | None = None,
              ticket: int | None = None,
              owner_alive: Callable[[], bool | None] | None = None) -> TrainingJob:
    """Start a child training a fresh GPT of `sizes`; the caller holds a slot (`ticket`,
    given back when the training ends).

    sizes: n_layer, n_head, n_embd, block, batch, steps, lr, limit (seconds), name, and
    optionally arch ("gpt2", the default, or "llama"). tokenizer:
    the one to use, or None to learn a fresh one. watch_text: the prompt whose prediction the
    checkpoint scrubber follows. shipped_key: names the shipped corpus's ids in the server's
    cache (None for a pasted text). owner_alive: whether the tab that asked is still kept
    (TrainingJob.watch_owner), None: nobody watches.
    """
    job = TrainingJob(sizes["name"], sizes, tokenizer=tokenizer, shipped_key=shipped_key)
    job.ticket = ticket
    try:
        cached = _shipped(shipped_key) if shipped_key is not None else None
        if cached is not None:
            tokenizer = cached[0]
            np.save(job.folder / "train.npy", cached[1], allow_pickle=False)
            np.save(job.folder / "val.npy", cached[2], allow_pickle=False)
        if tokenizer is not None:
            tokenizer.save(job.folder / "tokenizer.json")
        keys = ("n_layer", "n_head", "n_embd", "block", "batch", "steps", "lr", "limit")
        job.start({"source": "pasted" if source_pasted else "shipped",
                   "text": text if source_pasted else "", "fresh": job.tokenizer is None,
                   "tokenizer_name": tokenizer_name, "watch_text": watch_text,
                   "sizes": {**{k: sizes[k] for k in keys},
                             "arch": job.arch}})
        if owner_alive is not None:
            job.watch_owner(owner_alive)
    except BaseException:
        shutil.rmtree(job.folder, ignore_errors=True)
        raise
    return job
