"""The command line of the trainer: train a tokenizer and a model, print progress, save
checkpoints, resume.

    python -m tinygpt.train --corpus shakespeare --out models/shakespeare.npz --steps 3000

(`python -m tinygpt.train.cli` is the same.) Beside the checkpoint x.npz it writes x.optim.npz
(the optimiser's state, for --resume), x.ids.npz (the encoded corpus) and x.log.jsonl (one
JSON line per step, read by scripts/loss_plot.py). Ctrl-C finishes the current step and saves.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import signal
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from tinygpt.checkpoint import files as checkpoint
from tinygpt.network.config import MLPS, NORMS, POSITIONS
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.train.corpus import load_corpus, split_held_out
from tinygpt.train.trainer import (
    StepRecord,
    TrainConfig,
    Trainer,
    evaluate_text,
    load_trainer_state,
    save_trainer_state,
)


def sidecar(out: Path, suffix: str) -> Path:
    """models/x.npz -> models/x.<suffix>: the files that travel with a checkpoint."""
    return out.with_name(out.name.removesuffix(".npz") + "." + suffix)


def _read_corpus(corpus: str) -> tuple[str, str]:
    """(train text, validation text). "shakespeare" = the shipped plays; else a .txt path."""
    if corpus == "shakespeare":
        return load_corpus("train"), load_corpus("val")
    return split_held_out(Path(corpus).read_text(encoding="utf-8"))  # last 10% held out


def _tokenizer_fingerprint(tok) -> str:
    return hashlib.sha256(json.dumps(tok.to_json_dict()).encode()).hexdigest()[:16]


def _encoded_ids(tok, train_text: str, val_text: str, out: Path) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of both splits, cached beside the checkpoint (encoding takes a while)."""
    cache = sidecar(out, "ids.npz")
    fingerprint = _tokenizer_fingerprint(tok)
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as f:
            if str(f["fingerprint"]) == fingerprint:
                return f["train"], f["val"]
    print("encoding the corpus ...", flush=True)
    train = np.array(tok.encode(train_text), dtype=np.int32)
    val = np.array(tok.encode(val_text), dtype=np.int32)
    np.savez(cache, train=train, val=val, fingerprint=np.array(fingerprint))
    return train, val


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def add_model_size_args(group) -> None:
    """The options that size a model, with the default model's sizes (also the training
    benchmark's, bench/train_speed.py: it times the model this command trains)."""
    group.add_argument("--vocab-size", type=int, default=4096)
    group.add_argument("--n-layer", type=int, default=4)
    group.add_argument("--n-head", type=int, default=4)
    group.add_argument("--n-embd", type=int, default=256)


# The parts an architecture chooses; "gpt2" is GPT-2's choice, "llama" Llama's (no biases either).
ARCHITECTURES = {
    "gpt2": dict(norm="layernorm", position="learned", mlp="gelu", bias=True),
    "llama": dict(norm="rmsnorm", position="rope", mlp="swiglu", bias=False),
}


def add_architecture_args(group) -> None:
    """--arch picks a family; each part can then be changed on its own."""
    group.add_argument("--arch", choices=sorted(ARCHITECTURES), default="gpt2",
                       help="gpt2: LayerNorm, learned positions, GELU, biases; "
                            "llama: RMSNorm, rotary positions, SwiGLU, no biases")
    group.add_argument("--norm", choices=NORMS, help="overrides --arch")
    group.add_argument("--position", choices=POSITIONS, help="overrides --arch")
    group.add_argument("--mlp", choices=MLPS, help="overrides --arch")
    group.add_argument("--bias", action=argparse.BooleanOptionalAction, default=None,
                       help="biases on the attention and feed-forward projections")
    group.add_argument("--n-kv-head", type=_at_least_one,
                       help="key/value heads (grouped-query attention); default n_head")
    group.add_argument("--n-inner", type=_at_least_one,
                       help="feed-forward width; default 4 * n_embd")
    group.add_argument("--rope-theta", type=float, default=10000.0)


def architecture_fields(arch: str, **overrides) -> dict:
    """GPTConfig fields of a family ("gpt2" or "llama"): norm, position, mlp and the three bias
    switches; `overrides` (norm=..., bias=...) change single parts, None keeps the family's."""
    parts = dict(ARCHITECTURES[arch])
    parts.update({k: v for k, v in overrides.items() if v is not None})
    bias = parts.pop("bias")
    return dict(parts, attn_bias=bias, proj_bias=bias, mlp_bias=bias)


def model_config(args, vocab_size: int) -> GPTConfig:
    """The GPTConfig the command-line options describe."""
    parts = architecture_fields(args.arch, **{k: getattr(args, k) for k in
                                              ("norm", "position", "mlp", "bias")})
    return GPTConfig(vocab_size=vocab_size, n_ctx=args.n_ctx, n_embd=args.n_embd,
                     n_head=args.n_head, n_layer=args.n_layer, n_kv_head=args.n_kv_head,
                     n_inner=args.n_inner, rope_theta=args.rope_theta, **parts)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tinygpt.train", description="Train a tinygpt model in NumPy."
    )
    p.add_argument("--corpus", default="shakespeare", help="'shakespeare' or a path to a .txt")
    p.add_argument("--out", required=True, help="checkpoint path, e.g. models/shakespeare.npz")
    p.add_argument("--resume", action="store_true", help="continue from --out and its .optim.npz")
    p.add_argument("--tokenizer", help="reuse a tokenizer instead of training one: a saved "
                   ".json, or a checkpoint .npz (its tokenizer)")
    model = p.add_argument_group("model (ignored with --resume)")
    add_model_size_args(model)
    model.add_argument("--n-ctx", type=int, default=256)
    model.add_argument("--model-seed", type=int, default=0)
    add_architecture_args(model)
    train = p.add_argument_group("training (with --resume, only those given change)")
    defaults = TrainConfig()
    for name, flag, kind in [
        ("batch_size", "--batch-size", int), ("block_size", "--block-size", int),
        ("max_steps", "--steps", int), ("lr", "--lr", float), ("min_lr", "--min-lr", float),
        ("warmup", "--warmup", int), ("weight_decay", "--weight-decay", float),
        ("grad_clip", "--grad-clip", float), ("eval_interval", "--eval-interval", int),
        ("eval_batches", "--eval-batches", int), ("sample_interval", "--sample-interval", int),
        ("seed", "--seed", int), ("time_limit", "--time-limit", float),
    ]:
        train.add_argument(flag, dest=name, type=kind, default=None,
                           help=f"default {getattr(defaults, name)}")
    p.add_argument("--save-interval", type=int, default=250, help="steps between checkpoints")
    p.add_argument("--threads", type=_at_least_one,
                   help="BLAS threads (1 is fastest on a busy machine)")
    return p


def _blas_threads(threads: int | None):
    """BLAS threads for this run, set in this process (threadpoolctl), or as they are.

    On a shared 2-core machine, two BLAS threads that keep waiting for each other can be
    ten times slower than one.
    """
    if not threads:
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def _train_config(args, saved: dict | None) -> TrainConfig:
    base = TrainConfig.from_dict(saved) if saved else TrainConfig()
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig)
             if getattr(args, f.name, None) is not None}
    if "lr" in given and "min_lr" not in given and not saved:
        given["min_lr"] = given["lr"] / 10
    return TrainConfig.from_dict({**base.to_dict(), **given})


def _format_time(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class _Progress:
    """One carriage-return progress line; validation losses and samples on lines of their own."""

    def __init__(self, trainer: Trainer, log_path: Path) -> None:
        self.trainer = trainer
        self.log = log_path.open("a", encoding="utf-8")
        self.session_start = time.perf_counter()
        self.session_steps = 0
        self.smoothed_tps = None

    def seconds_left(self, step: int) -> float:
        """Estimated from this session's pace, and never past the time limit."""
        c = self.trainer.config
        spent = time.perf_counter() - self.session_start
        left = (c.max_steps - step) * spent / self.session_steps
        return left if c.time_limit is None else min(left, c.time_limit - spent)

    def __call__(self, rec: StepRecord) -> None:
        self.log.write(json.dumps(rec.to_dict()) + "\n")
        self.log.flush()
        self.session_steps += 1
        tps = rec.tokens_per_sec
        old = self.smoothed_tps
        self.smoothed_tps = tps if old is None else 0.9 * old + 0.1 * tps
        max_steps = self.trainer.config.max_steps
        filled = int(24 * rec.step / max_steps)
        bar = "#" * filled + "." * (24 - filled)
        line = (f"\r[{bar}] step {rec.step}/{max_steps}  loss {rec.loss:.3f}  "
                f"lr {rec.lr:.2e}  {self.smoothed_tps:,.0f} tok/s  "
                f"{_format_time(self.seconds_left(rec.step))} left")
        print(line, end="", flush=True)
        if rec.val_loss is not None:
            print(f"\n  val loss {rec.val_loss:.4f} nats/token", flush=True)
        if rec.sample is not None:
            print("  sample: " + rec.sample.replace("\n", "\n          "), flush=True)


@dataclass
class _Run:
    """One command-line run: where it writes, and what it trains."""

    args: argparse.Namespace
    out: Path  # the checkpoint
    model: GPT
    tok: BPETokenizer
    trainer: Trainer
    val_text: str

    @property
    def optim_path(self) -> Path:
        return sidecar(self.out, "optim.npz")


def _load_tokenizer(path: Path) -> BPETokenizer:
    """A tokenizer .json, or the tokenizer inside a checkpoint (to share a vocabulary)."""
    if path.suffix == ".npz":
        return checkpoint.load(path)[1]
    return BPETokenizer.load(path)


def _open_model(args, out: Path, train_text: str) -> tuple[GPT, BPETokenizer, dict | None]:
    """(model, tokenizer, saved train config): from the checkpoint with --resume, else new."""
    if args.resume:
        model, tok = checkpoint.load(out)
        return model, tok, model.metadata.get("train_config")
    if args.tokenizer:
        tok = _load_tokenizer(Path(args.tokenizer))
    else:
        print(f"training a {args.vocab_size}-token BPE tokenizer ...", flush=True)
        tok = BPETokenizer.train(train_text, args.vocab_size)
    config = model_config(args, tok.vocab_size)
    sidecar(out, "log.jsonl").write_text("")  # a fresh run starts a fresh log
    return GPT(config, seed=args.model_seed), tok, None


def _checkpoint_metadata(run: _Run, final: bool) -> dict:
    """The training info saved in the checkpoint (it becomes `model.metadata` when loaded)."""
    trainer = run.trainer
    metadata = {
        "train_config": trainer.config.to_dict(),
        "step": trainer.step_count,
        "elapsed_seconds": trainer.elapsed,
        "corpus": run.args.corpus,
        "train_tokens": int(len(trainer.train_ids)),
    }
    if trainer.history:
        metadata["train_loss"] = trainer.history[-1].loss
    val = [r.val_loss for r in trainer.history if r.val_loss is not None]
    if val:
        metadata["val_loss"] = val[-1]
    if final:  # the whole held-out text, in nats per token and per character
        result = evaluate_text(run.model, run.tok, run.val_text, trainer.config.block_size)
        metadata["validation"] = result
        print(f"\nheld-out text: {result['nats_per_token']:.4f} nats/token, "
              f"{result['nats_per_char']:.4f} nats/char", flush=True)
    return metadata


def _save(run: _Run, final: bool = False) -> None:
    """Parameters and optimiser state are written together, so resume is exact."""
    checkpoint.save(run.model, run.tok, run.out, metadata=_checkpoint_metadata(run, final))
    save_trainer_state(run.trainer, run.optim_path)


def _train(run: _Run) -> int:
    """Run the trainer with progress and checkpoints. Ctrl-C: finish the step, save, exit;
    a second Ctrl-C stops at once."""
    progress = _Progress(run.trainer, sidecar(run.out, "log.jsonl"))

    def checkpointing(rec: StepRecord) -> None:
        progress(rec)
        if run.args.save_interval > 0 and rec.step % run.args.save_interval == 0:
            _save(run)

    def on_interrupt(signum, frame) -> None:
        print("\ninterrupted: saving after this step ...", flush=True)
        run.trainer.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        run.trainer.run(checkpointing)
    except KeyboardInterrupt:
        # a second Ctrl-C may land half-way through an update: keep the last saved checkpoint
        print(f"\nstopped without saving; {run.out} holds the last checkpoint", flush=True)
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
        progress.log.close()
    _save(run, final=not run.trainer.stop_requested)
    print(f"\nsaved {run.out} at step {run.trainer.step_count} "
          f"({_format_time(run.trainer.elapsed)} of training)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m tinygpt.train ...` and `tinygpt-train ...`: the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    with _blas_threads(args.threads):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    optim_path = sidecar(out, "optim.npz")
    if args.resume and (not out.is_file() or not optim_path.is_file()):
        print(f"cannot resume: {out} or {optim_path} is missing", file=sys.stderr)
        return 2
    train_text, val_text = _read_corpus(args.corpus)
    model, tok, saved_config = _open_model(args, out, train_text)
    train_ids, val_ids = _encoded_ids(tok, train_text, val_text, out)
    config = _train_config(args, saved_config)
    trainer = Trainer(model, train_ids, val_ids, config, tokenizer=tok)
    if args.resume:
        state = load_trainer_state(optim_path)
        trainer.load_state_dict(state)
        print(f"resuming {out} at step {trainer.step_count}", flush=True)
    print(f"{model.num_parameters():,} parameters, {len(train_ids):,} training tokens, "
          f"{config.batch_size * config.block_size:,} tokens per step", flush=True)
    return _train(_Run(args, out, model, tok, trainer, val_text))


if __name__ == "__main__":
    sys.exit(main())
