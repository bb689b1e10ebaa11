"""The training job (tinygpt_app.training.job): it runs in a child process, not the server's; stop()
and the server's death end the child; a child that dies is a short error; and the model that
comes back gives exactly the logits of the same training run in-process."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from tinygpt.checkpoint.files import load
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.readouts.explain import PredictionSnapshot
from tinygpt.train.corpus import load_corpus, split_held_out
from tinygpt.train.trainer import StepRecord, TrainConfig, Trainer

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tinygpt_app.compute.shared_cache import SharedCache  # noqa: E402
from tinygpt_app.training import job as training  # noqa: E402
from tinygpt_app.training.worker import (  # noqa: E402
    configs,
    record_from_json,
    record_to_json,
    snapshot_from_json,
    snapshot_to_json,
)

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "fixtures" / "tiny.npz"
SMALL = dict(n_layer=1, n_head=1, n_embd=16, block=16, batch=4, steps=12, lr=3e-3, limit=60.0,
             name="t")
LONG = {**SMALL, "steps": 2000, "limit": 300.0}


def start(sizes: dict, **kwargs) -> training.TrainingJob:
    ticket = training._take_slot()
    assert ticket, "a slot is free for the test"
    return training.start_job(sizes, source_pasted=True, ticket=ticket, **kwargs)


def first_step(job: training.TrainingJob, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not job.records() and not job.done and time.monotonic() < deadline:
        time.sleep(0.02)
    assert job.records(), job.error


def gone(pid: int) -> bool:
    """The process has ended (a zombie nobody reaped counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return True


def hostile_text() -> str:
    """A 200,000-character paste whose vocabulary takes long to learn: 20,000 distinct
    characters, each a word of its own."""
    rng = np.random.default_rng(0)
    return "".join(map(chr, rng.integers(0x4E00, 0x9FFF, size=training.MAX_TEXT)))


def test_records_and_snapshots_cross_json_exactly():
    record = StepRecord(step=3, loss=math.pi, lr=1e-3 / 3, grad_norm=0.1 + 0.2,
                        tokens_per_sec=12345.678, elapsed=1 / 7, val_loss=float("nan"),
                        sample="é\n<|endoftext|>")
    back = record_from_json(json.loads(json.dumps(record_to_json(record))))
    assert math.isnan(back.val_loss)
    back.val_loss = record.val_loss = None
    assert back == record
    probs = np.array([0.5, 1 / 3, 1e-7], dtype=np.float32)
    snap = PredictionSnapshot(7, 2.0 / 3, np.array([5, 1, 9]), probs)
    again = snapshot_from_json(json.loads(json.dumps(snapshot_to_json(snap))))
    assert again.probs.dtype == np.float32 and np.array_equal(again.probs, probs)
    assert np.array_equal(again.tokens, snap.tokens) and again.loss == snap.loss


def test_arch_llama_gives_the_modern_parts_and_gpt2_stays_the_default():
    """The page's Llama-style choice: RMSNorm, rotary positions, half as many key/value heads,
    SwiGLU 3 d wide, no biases (the shipped Llama-style model's recipe, at the page's sizes)."""
    llama, _ = configs(512, {**SMALL, "n_head": 4, "n_embd": 32, "arch": "llama"})
    assert (llama.norm, llama.position, llama.mlp, llama.kv_heads, llama.inner_dim) == (
        "rmsnorm", "rope", "swiglu", 2, 96)
    assert not (llama.attn_bias or llama.proj_bias or llama.mlp_bias)
    one_head, _ = configs(512, {**SMALL, "arch": "llama"})
    assert one_head.kv_heads == 1
    gpt2, _ = configs(512, SMALL)
    assert gpt2 == GPTConfig(vocab_size=512, n_ctx=16, n_embd=16, n_head=1, n_layer=1)


def test_the_model_that_comes_back_equals_the_same_run_in_process():
    model, tok = load(TINY)
    text = load_corpus("val")[:6_000]
    job = start(SMALL, text=text, tokenizer=tok, tokenizer_name="tiny", watch_text="To be")
    assert job.wait(120) and job.error is None
    # the reference: the same settings written out by hand, Trainer.run in this process
    train_text, val_text = split_held_out(text, 0.1)
    config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=16, n_embd=16, n_head=1, n_layer=1)
    tc = TrainConfig(batch_size=4, block_size=16, max_steps=12, lr=3e-3, min_lr=3e-3 / 10,
                     warmup=1,
                     eval_interval=1, eval_batches=4, sample_interval=2, time_limit=60.0)
    reference = Trainer(GPT(config, seed=0), np.asarray(tok.encode(train_text)),
                        np.asarray(tok.encode(val_text)), tc, tokenizer=tok)
    with threadpool_limits(limits=1, user_api="blas"):  # the child's one BLAS thread
        history = reference.run()
    assert [r.loss for r in job.records()] == [r.loss for r in history]
    assert [r.sample for r in job.records()] == [r.sample for r in history]
    ids = np.asarray(tok.encode(val_text[:200]))[:16]
    with threadpool_limits(limits=1, user_api="blas"):
        assert np.array_equal(job.model.forward(ids), reference.model.forward(ids))
    assert job.tokenizer.encode(text[:500]) == tok.encode(text[:500])


def test_the_training_runs_in_a_child_process_and_gives_its_slot_back():
    before = training.trainings_running()
    job = start(SMALL, text=load_corpus("val")[:6_000], watch_text="To be")
    assert job.pid is not None and job.pid != os.getpid()
    folder = job.folder
    first_step(job)
    assert job.tokenizer is not None and job.tokenizer.vocab_size == training.FRESH_VOCAB
    assert job.wait(120) and job.error is None
    assert training.trainings_running() == before
    assert job.model is not None and len(job.records()) == 12
    assert not folder.exists()  # the temp dir is deleted


def test_stop_ends_the_child_and_keeps_what_it_learnt():
    before = training.trainings_running()
    job = start(LONG, text=load_corpus("val")[:6_000])
    first_step(job)  # LONG: still running here (SMALL's 12 steps may already be over)
    assert training.trainings_running() == before + 1  # held while the child runs
    if hasattr(os, "SCHED_IDLE"):  # it runs only on cores the class leaves idle
        assert os.sched_getscheduler(job.pid) == os.SCHED_IDLE
    job.stop()
    assert job.wait(30), "the child did not stop"
    assert training.trainings_running() == before
    assert gone(job.pid) and job.stopped and job.error is None
    assert 0 < len(job.records()) < LONG["steps"]
    assert job.model is not None  # saved after the step it was in


def test_a_closed_tabs_training_stops(monkeypatch):
    """Issue 45: a training ran on at least 94 s after its tab closed. Once Streamlit no
    longer keeps the tab's session (alive: False), the training stops like a pressed stop."""
    monkeypatch.setattr(training, "OWNER_CHECK", 0.2)
    kept = [True]
    job = start(LONG, text=load_corpus("val")[:6_000], owner_alive=lambda: kept[0])
    first_step(job)
    time.sleep(0.5)
    assert job.running  # its tab is still there
    kept[0] = False  # the tab closed and its TTL passed
    assert job.wait(30), "the child did not stop"
    assert gone(job.pid) and job.stopped and job.abandoned
    assert len(job.records()) < LONG["steps"]


def test_nobody_can_tell_without_a_server():
    """AppTest and scripts run no server: session_alive says None, and the training goes on."""
    from tinygpt_hosting import streamlit_internals

    assert streamlit_internals.session_alive("no-such-session") is None
    assert training._session_of("") is None
    assert training._session_of("tab")() is None


def test_stop_while_the_vocabulary_is_learnt_ends_the_child_at_once():
    job = start(LONG, text=hostile_text())
    time.sleep(1.0)  # the child is learning a vocabulary of 20,000 distinct characters
    job.stop()
    assert job.wait(10), "the child did not stop"
    assert gone(job.pid) and job.error is None and job.model is None and not job.records()


def test_the_time_limit_covers_learning_the_vocabulary():
    job = start({**LONG, "limit": 2.0}, text=hostile_text())
    assert job.wait(15), "the child went on past its time limit"
    assert gone(job.pid) and job.model is None and not job.records()
    assert "time limit of 2 s" in job.error and training.trainings_running() == 0


def test_a_child_that_dies_is_a_short_error_and_frees_its_slot():
    before = training.trainings_running()
    job = start(LONG, text=load_corpus("val")[:6_000])
    first_step(job)
    job._process.kill()
    assert job.wait(30)
    assert job.error == "the training process ended unexpectedly (exit code -9)"
    assert training.trainings_running() == before


def test_the_child_ends_when_the_server_dies():
    """A 'server' process starts a training on a hostile paste, then dies while the child is
    still learning the vocabulary (writing nothing): the child sees its stdin close."""
    server = textwrap.dedent(f"""
        import os, time
        from tests.tinygpt_app.training.test_job import hostile_text
        from tinygpt_app.training import job as training
        ticket = training._take_slot()
        job = training.start_job({LONG!r}, source_pasted=True, text=hostile_text(),
                                 ticket=ticket)
        time.sleep(1.0)
        print(job.pid, job.folder, flush=True)
        os._exit(0)
    """)
    out = subprocess.run([sys.executable, "-c", server], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    pid, folder = int(out.split()[0]), Path(out.split()[1])
    deadline = time.monotonic() + 10
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(pid), "the training process outlived the server"
    assert not folder.exists()  # it deleted its temp dir: nobody else would


def test_an_error_in_the_child_is_shown_without_server_paths():
    job = start({**SMALL, "block": 128}, text="x" * 2_000)
    assert job.wait(60)
    assert job.error.startswith("The text gives only") and "/" not in job.error
    assert training._short(f"FileNotFoundError: '{job.folder}/model.npz' is missing, 1/2 "
                           "and/or") == "FileNotFoundError: '…' is missing, 1/2 and/or"


def test_the_shipped_corpus_is_encoded_once_per_server(monkeypatch):
    """The first training on the shipped corpus encodes it in the child; the server keeps the
    ids (exactly the tokenizer's encoding) and hands them to the next child as .npy files."""
    from tinygpt_app.training.worker import SHIPPED_TRAIN

    monkeypatch.setattr(training, "_SHIPPED", SharedCache(training.SHIPPED_BYTES))
    _, tok = load(TINY)
    runs, handed = [], []
    for _ in range(2):
        ticket = training._take_slot()
        assert ticket
        job = training.start_job(SMALL, source_pasted=False, tokenizer=tok, shipped_key="tiny",
                                 ticket=ticket)
        handed.append((job.folder / "train.npy").is_file())  # written by the server, or not
        assert job.wait(120) and job.error is None
        runs.append([r.loss for r in job.records()])
    assert handed == [False, True]
    _, train, _ = training._SHIPPED.get("tiny")
    assert train.dtype == np.int64
    assert np.array_equal(train, tok.encode(load_corpus("train")[:SHIPPED_TRAIN]))
    assert runs[0] == runs[1]  # the same data either way
