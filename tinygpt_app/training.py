"""The training job behind the Training page: the data it trains on, the run in a background
thread, and the server-wide limit on how many run at once.

A class of students shares a few CPU cores: at most ``settings.max_trainings()`` trainings run
at once on the server (all sessions together), so the pages stay quick for everyone.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from tinygpt.corpus import load_corpus, split_held_out
from tinygpt.explain import prediction_snapshot
from tinygpt.model import GPT, GPTConfig
from tinygpt.tokenizer import BPETokenizer
from tinygpt.train import TrainConfig, Trainer
from tinygpt_app import fair_share, settings
from tinygpt_app.models import model_label, model_version
from tinygpt_app.state import AppState

log = logging.getLogger("tinygpt.app")

MAX_TRAININGS = settings.max_trainings()
MAX_TEXT = 200_000  # pasted text, characters
MIN_TEXT = 2_000
SHIPPED_TRAIN, SHIPPED_VAL = 500_000, 50_000  # characters of the corpus used (tokenized once)
FRESH_VOCAB = 512

_slots = threading.Lock()
_trainings_running = 0


def trainings_running() -> int:
    return _trainings_running


def _take_slot() -> bool:
    global _trainings_running
    with _slots:
        if _trainings_running >= MAX_TRAININGS:
            return False
        _trainings_running += 1
        return True


def _give_back_slot() -> None:
    global _trainings_running
    with _slots:
        _trainings_running -= 1


class TrainingJob:
    """One training run in a background thread, owned by one session.

    The thread only calls `Trainer.run`; its callback appends each StepRecord here. The page
    reads `records()` on a timer, so the server keeps answering other users meanwhile (NumPy
    releases the GIL inside its matrix products).
    """

    def __init__(self, name: str, trainer: Trainer, tokenizer, about: str = "",
                 watch: np.ndarray | None = None) -> None:
        self.name = name
        self.trainer = trainer
        self.tokenizer = tokenizer
        self.about = about  # what it trains on, for the page
        self.max_steps = trainer.config.max_steps
        self.time_limit = trainer.config.time_limit or float("inf")
        self.params = trainer.model.num_parameters()
        self.vocab = trainer.model.config.vocab_size
        self.error: str | None = None
        self.stopped = False  # the user pressed stop
        self.model_id: str | None = None  # set once the model is registered
        self.started = self.ended = 0.0
        self._records: list = []
        # the checkpoint scrubber: the prediction after `watch` (ids) at ~20 steps of the run
        self.watch = watch
        self.snapshot_every = max(1, self.max_steps // 20)
        self._snapshots: list = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._resumed = 0.0  # when the current step began (see _keep)
        ctx = get_script_run_ctx()  # the session that started it: its own pages do not count
        self.owner = ctx.session_id if ctx else None

    def start(self, *, slot_taken: bool = False) -> bool:
        """Start training; False (and nothing started) when the server is at its limit.

        slot_taken: the caller already holds a slot (see ``prepare``); it passes to the job.
        """
        if not slot_taken and not _take_slot():
            return False
        self.started = self._resumed = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.name}",
                                        daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        try:
            self.trainer.run(self._keep)
        except Exception as err:  # noqa: BLE001 - shown on the page, never lost in a thread
            log.exception("training failed")
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.ended = time.monotonic()
            _give_back_slot()
            self._done.set()

    def _keep(self, record) -> None:
        # between two steps: while a class uses the server, sleep as long as the step took
        now = time.monotonic()
        fair_share.yield_to_class(now - self._resumed, self.owner)
        self._resumed = time.monotonic()
        snapshot = None
        if self.watch is not None and (record.step == 1 or record.step % self.snapshot_every == 0):
            # in the training thread, between two steps: the weights are not moving
            snapshot = prediction_snapshot(self.trainer.model, self.watch, record.step,
                                           record.loss)
        with self._lock:
            self._records.append(record)
            if snapshot is not None:
                self._snapshots.append(snapshot)

    def records(self) -> list:
        with self._lock:
            return list(self._records)

    def snapshots(self) -> list:
        """PredictionSnapshots so far (at most 21: step 1 and every 1/20 of the steps)."""
        with self._lock:
            return list(self._snapshots)

    def stop(self) -> None:
        self.stopped = True
        self.trainer.stop()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def seconds(self) -> float:
        if not self.started:
            return 0.0
        return (self.ended or time.monotonic()) - self.started  # frozen once it ends


# ----------------------------------------------------------------------------- what it trains on


@st.cache_resource(max_entries=4, show_spinner="Reading and tokenizing the corpus…")
def _shipped_ids(model_id: str, version: float, _tokenizer) -> tuple[np.ndarray, np.ndarray]:
    train = np.asarray(_tokenizer.encode(load_corpus("train")[:SHIPPED_TRAIN]), dtype=np.int64)
    val = np.asarray(_tokenizer.encode(load_corpus("val")[:SHIPPED_VAL]), dtype=np.int64)
    return train, val


@st.cache_resource(max_entries=4, show_spinner="Learning a vocabulary from the text…")
def _fresh_tokenizer(text: str) -> BPETokenizer:
    return BPETokenizer.train(text, FRESH_VOCAB)


def training_data(state: AppState, source_pasted: bool, text: str, fresh: bool, block: int):
    """(tokenizer, train ids, val ids, description), or a message saying why not.

    The pasted text (cut to MAX_TEXT) or the shipped Shakespeare corpus; the current model's
    tokenizer, or a fresh BPE vocabulary learnt from the training text.
    """
    if source_pasted:
        why = refusal(source_pasted, text)
        if why:
            return why
        train_text, val_text = split_held_out(text, 0.1)  # the last 10 % is held out
        tok = _fresh_tokenizer(train_text) if fresh else state.tokenizer
        train = np.asarray(tok.encode(train_text), dtype=np.int64)
        val = np.asarray(tok.encode(val_text), dtype=np.int64)
        about = f"your text ({len(text):,} characters)"
    else:
        if fresh:
            tok = _fresh_tokenizer(load_corpus("train")[:SHIPPED_TRAIN // 5])
            train, val = _shipped_ids(f"fresh{FRESH_VOCAB}", 0.0, tok)
        else:
            tok = state.tokenizer
            train, val = _shipped_ids(state.model_id, model_version(state.model_id), tok)
        about = f"the first {SHIPPED_TRAIN:,} characters of the Shakespeare training plays"
    if len(train) < block + 2 or len(val) < 3:
        return (f"The text gives only {len(train):,} training tokens: too short for a "
                f"context of {block}. Paste more, or choose a smaller context.")
    which = ("a fresh BPE vocabulary learnt from it" if fresh
             else f"the tokenizer of {model_label(state.model_id)}")
    return tok, train, val, f"{about}, {len(train):,} tokens, with {which} (v = {tok.vocab_size:,})"


def refusal(source_pasted: bool, text: str) -> str | None:
    """Why a pasted text cannot be used, checked before any work: its length."""
    if source_pasted and len(text) > MAX_TEXT:
        return f"Your text has {len(text):,} characters; at most {MAX_TEXT:,} can be used."
    if source_pasted and len(text) < MIN_TEXT:
        return f"Paste at least {MIN_TEXT:,} characters (you gave {len(text):,})."
    return None


def prepare_and_start(state: AppState, source_pasted: bool, text: str, fresh: bool,
                      sizes: dict) -> TrainingJob | str:
    """A started job, or a message saying why not. The cheap checks come first: the text's
    length, then a server slot; only then the costly part (learning a vocabulary, tokenizing
    the text), so a refused paste costs nothing."""
    why = refusal(source_pasted, text)
    if why:
        return why
    if not _take_slot():
        return (f"{trainings_running()} training(s) already running on this server (at most "
                f"{MAX_TRAININGS} at once, so the app stays quick for everyone). Please wait a "
                "minute and press Start again.")
    started = False
    try:
        data = training_data(state, source_pasted, text, fresh, sizes["block"])
        if isinstance(data, str):
            return data
        job = new_job(sizes["name"], data, sizes, watch_text=state.prompt)
        started = job.start(slot_taken=True)
        return job
    finally:
        if not started:
            _give_back_slot()


def new_job(name: str, data: tuple, sizes: dict, watch_text: str = "") -> TrainingJob:
    """A job (not started) training a fresh GPT of `sizes` on `data` from training_data.

    sizes: n_layer, n_head, n_embd, block, batch, steps, lr, limit (seconds). watch_text: the
    prompt whose prediction the checkpoint scrubber follows (its last `block` tokens).
    """
    tok, train, val, about = data
    config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=sizes["block"], n_embd=sizes["n_embd"],
                       n_head=sizes["n_head"], n_layer=sizes["n_layer"])
    steps, lr = sizes["steps"], sizes["lr"]
    tc = TrainConfig(batch_size=sizes["batch"], block_size=sizes["block"], max_steps=steps,
                     lr=lr, min_lr=lr / 10, warmup=max(1, min(100, steps // 10)),
                     eval_interval=max(1, steps // 20), eval_batches=4,
                     sample_interval=max(1, steps // 5), time_limit=sizes["limit"])
    trainer = Trainer(GPT(config, seed=0), train, val, tc, tokenizer=tok)
    watch = np.asarray(tok.encode(watch_text[:MAX_TEXT]), dtype=np.int64)[-sizes["block"]:]
    return TrainingJob(name, trainer, tok, about, watch if len(watch) else None)
