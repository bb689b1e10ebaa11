"""The child process that runs one training of the Training page (issue 12).

    python -m tinygpt_app.training.worker <private temp dir>

Why a process: learning a BPE vocabulary, encoding a pasted text and the many small NumPy
operations of a training step all hold Python's GIL. In a thread of the server they slowed
every other student's page (a lockstep generation most of all). In a process of their own they
cannot, and at a low OS priority they only use the CPU time the class leaves idle.

The parent (tinygpt_app.training.job) writes `spec.json` (and, when it has them, `tokenizer.json`,
`train.npy`, `val.npy`) into the temp dir. This worker writes one JSON line per event to stdout:
    {"kind": "ready", ...}     the data is ready: sizes, about, the watched prompt's ids
    {"kind": "step", ...}      one StepRecord
    {"kind": "snapshot", ...}  one PredictionSnapshot
    {"kind": "error", ...}     why it failed (then it exits)
    {"kind": "done"}           model.npz (and train.npy / val.npy) are saved in the temp dir
Its stdin stays open: a line "stop" asks it to stop after the current step; end of file means
the server is gone, and the worker exits at once. No pickle anywhere: JSON, .npy and the
project's own checkpoint format.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np

from tinygpt.checkpoint import files as checkpoint
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.readouts.explain import PredictionSnapshot, prediction_snapshot
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.train.cli import architecture_fields
from tinygpt.train.corpus import load_corpus, split_held_out
from tinygpt.train.trainer import StepRecord, TrainConfig, Trainer

NICENESS = 19  # added to the worker's priority where SCHED_IDLE is missing (see main)
FRESH_VOCAB = 512
SHIPPED_TRAIN, SHIPPED_VAL = 500_000, 50_000  # characters of the corpus used
MAX_WATCH_CHARS = 200_000  # the watched prompt is cut to this before encoding


# ----------------------------------------------------------------------------- JSON forms


def record_to_json(record: StepRecord) -> dict:
    """A StepRecord as plain JSON values (floats round-trip exactly: json writes repr)."""
    return {"step": int(record.step), "loss": float(record.loss), "lr": float(record.lr),
            "grad_norm": float(record.grad_norm),
            "tokens_per_sec": float(record.tokens_per_sec), "elapsed": float(record.elapsed),
            "val_loss": None if record.val_loss is None else float(record.val_loss),
            "sample": record.sample}


def record_from_json(d: dict) -> StepRecord:
    """Inverse of record_to_json; ValueError / TypeError / KeyError on a malformed dict."""
    sample = d["sample"]
    if sample is not None and not isinstance(sample, str):
        raise TypeError("sample must be a string")
    val = d["val_loss"]
    return StepRecord(step=int(d["step"]), loss=float(d["loss"]), lr=float(d["lr"]),
                      grad_norm=float(d["grad_norm"]),
                      tokens_per_sec=float(d["tokens_per_sec"]), elapsed=float(d["elapsed"]),
                      val_loss=None if val is None else float(val), sample=sample)


def snapshot_to_json(snap: PredictionSnapshot) -> dict:
    """float32 probabilities become Python floats, which hold every float32 exactly."""
    return {"step": int(snap.step), "loss": float(snap.loss),
            "tokens": [int(t) for t in snap.tokens], "probs": [float(p) for p in snap.probs]}


def snapshot_from_json(d: dict) -> PredictionSnapshot:
    tokens = np.asarray([int(t) for t in d["tokens"]], dtype=np.int64)
    probs = np.asarray([float(p) for p in d["probs"]], dtype=np.float32)
    if tokens.shape != probs.shape or len(tokens) > 100:
        raise ValueError("a snapshot needs as many probabilities as tokens (at most 100)")
    return PredictionSnapshot(int(d["step"]), float(d["loss"]), tokens, probs)


# ----------------------------------------------------------------------------- the run


class TooShort(ValueError):
    """The text gives too few tokens: the message is for the student as it is."""


def configs(vocab_size: int, sizes: dict) -> tuple[GPTConfig, TrainConfig]:
    """The model and the training settings of the page's `sizes`.

    sizes: n_layer, n_head, n_embd, block, batch, steps, lr, limit (seconds), and arch:
    "gpt2" (the default) or "llama" (RMSNorm, rotary positions, SwiGLU, no biases; half as
    many key/value heads as query heads and a SwiGLU 3 d wide, as the shipped Llama-style model).
    """
    llama = sizes.get("arch", "gpt2") == "llama"
    model = GPTConfig(vocab_size=vocab_size, n_ctx=sizes["block"], n_embd=sizes["n_embd"],
                      n_head=sizes["n_head"], n_layer=sizes["n_layer"],
                      n_kv_head=max(1, sizes["n_head"] // 2) if llama else None,
                      n_inner=3 * sizes["n_embd"] if llama else None,
                      **architecture_fields(sizes.get("arch", "gpt2")))
    steps, lr = sizes["steps"], sizes["lr"]
    train = TrainConfig(batch_size=sizes["batch"], block_size=sizes["block"], max_steps=steps,
                        lr=lr, min_lr=lr / 10, warmup=max(1, min(100, steps // 10)),
                        eval_interval=max(1, steps // 20), eval_batches=4,
                        sample_interval=max(1, steps // 5), time_limit=sizes["limit"])
    return model, train


def snapshot_every(max_steps: int) -> int:
    """The checkpoint scrubber keeps the prediction at step 1 and every 1/20 of the steps."""
    return max(1, max_steps // 20)


def training_data(spec: dict, folder: Path) -> tuple[BPETokenizer, np.ndarray, np.ndarray, str]:
    """(tokenizer, train ids, val ids, description); TooShort says why not.

    The pasted text or the shipped corpus; the tokenizer in folder/tokenizer.json (the current
    model's, or a fresh one the server already learnt) or a fresh one learnt here. Ids the
    server already has come as folder/train.npy and val.npy.
    """
    given = folder / "tokenizer.json"
    if spec["source"] == "pasted":
        train_text, val_text = split_held_out(spec["text"], 0.1)  # the last 10 % is held out
        about = f"your text ({len(spec['text']):,} characters)"
    else:
        train_text = load_corpus("train")[:SHIPPED_TRAIN]
        val_text = load_corpus("val")[:SHIPPED_VAL]
        about = f"the first {SHIPPED_TRAIN:,} characters of the Shakespeare training plays"
    if given.is_file():
        tok = BPETokenizer.load(given)
    else:  # the shipped corpus's fresh vocabulary is learnt from its first fifth
        source = train_text if spec["source"] == "pasted" else train_text[:SHIPPED_TRAIN // 5]
        tok = BPETokenizer.train(source, FRESH_VOCAB)
    if (folder / "train.npy").is_file():
        train = np.load(folder / "train.npy", allow_pickle=False)
        val = np.load(folder / "val.npy", allow_pickle=False)
    else:
        train = np.asarray(tok.encode(train_text), dtype=np.int64)
        val = np.asarray(tok.encode(val_text), dtype=np.int64)
    block = spec["sizes"]["block"]
    if len(train) < block + 2 or len(val) < 3:
        raise TooShort(f"The text gives only {len(train):,} training tokens: too short for a "
                         f"context of {block}. Paste more, or choose a smaller context.")
    which = ("a fresh BPE vocabulary learnt from it" if spec["fresh"]
             else f"the tokenizer of {spec['tokenizer_name']}")
    return tok, train, val, f"{about}, {len(train):,} tokens, with {which} (v = {tok.vocab_size:,})"


class Worker:
    """One training from a spec: data, Trainer.run, snapshots, the saved model."""

    def __init__(self, folder: Path, out) -> None:
        self.folder = folder
        self.out = out
        self.trainer: Trainer | None = None
        self.stop_asked = threading.Event()
        self.watch: np.ndarray | None = None
        self.every = 1
        self.born = time.monotonic()  # the time limit counts from here: data and training

    def send(self, kind: str, **fields) -> None:
        self.out.write(json.dumps({"kind": kind, **fields}) + "\n")
        self.out.flush()

    def run(self) -> None:
        spec = json.loads((self.folder / "spec.json").read_text(encoding="utf-8"))
        limit = float(spec["sizes"]["limit"])
        watchdog = threading.Timer(limit, self.out_of_time, args=(limit,))
        watchdog.daemon = True
        watchdog.start()
        tok, train, val, about = training_data(spec, self.folder)
        # one row per id, a model's padding ids included (Qwen2.5's tokenizer: padded_size)
        model_config, train_config = configs(tok.padded_size, spec["sizes"])
        # what is left of the time limit after learning the vocabulary and encoding the text
        train_config.time_limit = max(1.0, limit - (time.monotonic() - self.born))
        trainer = Trainer(GPT(model_config, seed=0), train, val, train_config, tokenizer=tok)
        watch = tok.encode(spec["watch_text"][:MAX_WATCH_CHARS])[-spec["sizes"]["block"]:]
        self.watch = np.asarray(watch, dtype=np.int64) if len(watch) else None
        self.every = snapshot_every(train_config.max_steps)
        self.trainer = trainer
        if self.stop_asked.is_set():  # stopped while the data was prepared
            trainer.stop()
            return
        self.send("ready", params=trainer.model.num_parameters(), vocab=tok.vocab_size,
                  about=about, watch=[int(i) for i in watch],
                  tokenizer=tok.to_json_dict() if spec["fresh"] else None)
        trainer.run(self.keep)
        checkpoint.save(trainer.model, tok, self.folder / "model.npz")
        if spec["source"] == "shipped" and not (self.folder / "train.npy").is_file():
            # the server keeps the shipped corpus's ids for the next training
            np.save(self.folder / "train.npy", train, allow_pickle=False)
            np.save(self.folder / "val.npy", val, allow_pickle=False)
        self.send("done")

    def out_of_time(self, limit: float) -> None:
        """The time limit covers the whole job: a text whose vocabulary takes longer to learn
        than the limit (e.g. 20,000 distinct characters) ends here, not minutes later."""
        if self.trainer is None:
            self.send("error", message=f"Preparing your text (learning its vocabulary) took "
                                       f"longer than the time limit of {limit:.0f} s. Try a "
                                       "shorter text or the current model's tokenizer.")
            shutil.rmtree(self.folder, ignore_errors=True)
            os._exit(4)

    def keep(self, record: StepRecord) -> None:
        """After each step: the record, and now and then what the model predicts."""
        if self.stop_asked.is_set():  # a stop that came just before run() began (it clears)
            self.trainer.stop()
        self.send("step", record=record_to_json(record))
        if self.watch is not None and (record.step == 1 or record.step % self.every == 0):
            snap = prediction_snapshot(self.trainer.model, self.watch, record.step, record.loss)
            self.send("snapshot", snapshot=snapshot_to_json(snap))

    def listen(self, stdin) -> None:
        """The parent's lines: "stop" stops after the current step (at once before training
        starts: nothing to keep yet). End of file means the server is gone (the kernel closes
        the pipe of a dead process): nobody will read the result, so delete it and exit now."""
        for line in stdin:
            if line.strip() == "stop":
                self.stop_asked.set()
                if self.trainer is None:
                    os._exit(0)
                self.trainer.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
        os._exit(3)


def lowest_priority() -> None:
    """The class's page runs get the cores first; the training uses what they leave idle.
    Linux's SCHED_IDLE runs the process only on an otherwise idle core (a nice of 10 still
    took ~1/10 of a busy core); elsewhere, the lowest nice."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(NICENESS)


def main(argv: list[str]) -> int:
    lowest_priority()
    # stdout carries only the JSON lines: a stray print from a library goes to stderr instead
    protocol, sys.stdout = sys.stdout, sys.stderr
    worker = Worker(Path(argv[0]), protocol)
    threading.Thread(target=worker.listen, args=(sys.stdin,), daemon=True).start()
    try:
        worker.run()
    except Exception as err:  # noqa: BLE001 - told to the parent, which shows it
        worker.send("error", message=str(err) if isinstance(err, TooShort)
                    else f"{type(err).__name__}: {err}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
