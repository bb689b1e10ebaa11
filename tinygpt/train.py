"""Training a GPT in NumPy: batches, AdamW, learning-rate schedule, a Trainer, and a CLI.

One optimisation step:
    x, y   = get_batch(...)                      # (B, T) windows of the text, y = x shifted by one
    loss, grads = model.loss_and_grads(x, y)     # forward, cross-entropy, backward
    clip_grad_norm(grads, 1.0)                   # no single step may be huge
    optimizer.step(grads, lr_schedule(step))     # AdamW moves every parameter a little

Command line (trains the tokenizer too, prints progress, saves checkpoints, resumes):
    python -m tinygpt.train --corpus shakespeare --out models/shakespeare.npz --steps 3000

Everything random comes from `np.random.default_rng(seed)` (never global seeding), and the
batch of step n depends only on (seed, n): the same seed gives the same run, and a resumed
run continues exactly where the interrupted one stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from tinygpt.model import GPT, GPTConfig, cross_entropy, softmax

__all__ = [
    "AdamW",
    "StepRecord",
    "TrainConfig",
    "Trainer",
    "clip_grad_norm",
    "cross_entropy",
    "evaluate_text",
    "get_batch",
    "lr_schedule",
    "token_nll",
]


# ----------------------------------------------------------------------------- optimiser


class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter), as in torch.optim.AdamW.

    For each parameter p with gradient g, at step t = 1, 2, ...:
        p <- p * (1 - lr * weight_decay)           only for matrices (ndim >= 2)
        m <- beta1 * m + (1 - beta1) * g           running mean of the gradient
        v <- beta2 * v + (1 - beta2) * g**2        running mean of its square
        p <- p - lr * m_hat / (sqrt(v_hat) + eps)  m_hat, v_hat: m, v with the bias corrected

    Biases and LayerNorm gammas/betas (vectors) are not decayed: shrinking them toward 0
    does not make the model simpler, it only fights the fit. The embedding matrices decay.
    The parameters are updated in place, so the model sees every step.
    """

    def __init__(
        self,
        params: dict[str, np.ndarray],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = params
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0  # steps taken so far

    @staticmethod
    def decays(p: np.ndarray) -> bool:
        """Weight decay applies to matrices only, not to biases or LayerNorm parameters."""
        return p.ndim >= 2

    def step(self, grads: dict[str, np.ndarray], lr: float | None = None) -> None:
        lr = self.lr if lr is None else lr
        self.t += 1
        bias1 = 1.0 - self.beta1**self.t  # m starts at 0, so early means are too small
        bias2 = 1.0 - self.beta2**self.t
        for name, p in self.params.items():
            g = grads[name]
            m, v = self.m[name], self.v[name]
            if self.weight_decay and self.decays(p):
                p *= 1.0 - lr * self.weight_decay
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * (g * g)
            denom = np.sqrt(v)
            denom /= math.sqrt(bias2)
            denom += self.eps
            p -= (lr / bias1) * (m / denom)

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {f"m.{name}": a for name, a in self.m.items()}
        state.update({f"v.{name}": a for name, a in self.v.items()})
        state["t"] = np.array(self.t)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for name, p in self.params.items():
            for kind, store in (("m", self.m), ("v", self.v)):
                a = np.asarray(state[f"{kind}.{name}"])
                if a.shape != p.shape:
                    raise ValueError(f"optimiser state {kind}.{name}: shape {a.shape} != {p.shape}")
                store[name] = a.astype(p.dtype, copy=True)
        self.t = int(state["t"])


def clip_grad_norm(grads: dict[str, np.ndarray], max_norm: float) -> float:
    """Scale all gradients (in place) so their joint L2 norm is at most max_norm.

    Returns the norm before clipping (worth plotting: spikes mean trouble).
    """
    norm = math.sqrt(sum(float(np.vdot(g, g)) for g in grads.values()))
    if max_norm > 0 and norm > max_norm:
        scale = max_norm / (norm + 1e-6)  # same formula as torch.nn.utils.clip_grad_norm_
        for g in grads.values():
            g *= scale
    return norm


def lr_schedule(step: int, max_lr: float, warmup: int, total: int, min_lr: float) -> float:
    """Learning rate for `step` (0-based): linear warm-up to max_lr, then cosine down to min_lr.

    Warm-up: Adam's variance estimates are poor for the first steps, so start small.
    """
    if step < warmup:
        return max_lr * (step + 1) / warmup
    if step >= total:
        return min_lr
    progress = (step - warmup) / max(total - warmup, 1)  # 0 -> 1
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)


# ----------------------------------------------------------------------------- data


def get_batch(
    data: np.ndarray, batch_size: int, block_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """batch_size random windows of the token stream: inputs x and targets y = x shifted by one.

    data (N,) ints -> x, y (batch_size, block_size) int64.
    """
    if len(data) < block_size + 1:
        raise ValueError(f"need at least {block_size + 1} tokens, got {len(data)}")
    starts = rng.integers(0, len(data) - block_size, size=batch_size)  # (B,)
    idx = starts[:, None] + np.arange(block_size)  # (B, T)
    return data[idx].astype(np.int64), data[idx + 1].astype(np.int64)


def token_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """-log p(target) at every position, in nats. logits (..., V), targets (...) -> (...)."""
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=-1))
    picked = np.take_along_axis(shifted, targets[..., None], axis=-1)[..., 0]
    return log_z - picked


def evaluate_text(model: GPT, tok, text: str, block_size: int, batch_size: int = 16) -> dict:
    """Cross-entropy of the model on a whole text, per token and per character.

    The text is cut into windows of block_size tokens; every token is predicted once, from
    the tokens before it in its window. The first token is predicted from "<|endoftext|>"
    when the tokenizer has it (so every character counts), otherwise it is skipped.
    nats_per_char = total nats / characters: comparable between different tokenizers.
    """
    block_size = min(block_size, model.config.n_ctx)
    ids = list(tok.encode(text))
    chars = len(text)
    eos = getattr(tok, "eos_token_id", None)
    if eos is not None:
        ids = [eos] + ids
    else:
        chars -= len(tok.decode(ids[:1]))
    seq = np.array(ids, dtype=np.int64)
    n_pred = len(seq) - 1
    n_windows = max(math.ceil(n_pred / block_size), 0)
    # (W, T) windows; the last one is padded, and padded targets are masked out
    x = np.zeros((n_windows, block_size), dtype=np.int64)
    y = np.full((n_windows, block_size), -1, dtype=np.int64)
    for w in range(n_windows):
        chunk = seq[w * block_size : (w + 1) * block_size + 1]
        x[w, : len(chunk) - 1] = chunk[:-1]
        y[w, : len(chunk) - 1] = chunk[1:]
    total = 0.0
    for b in range(0, n_windows, batch_size):
        xb, yb = x[b : b + batch_size], y[b : b + batch_size]
        keep = yb != -1
        nll = token_nll(model.forward(xb), np.where(keep, yb, 0))  # (b, T)
        total += float(nll[keep].sum())
    return {
        "nats_per_token": total / max(n_pred, 1),
        "nats_per_char": total / max(chars, 1),
        "tokens": int(n_pred),
        "chars": int(chars),
    }


# ----------------------------------------------------------------------------- sampling


def sample_text(
    model: GPT,
    tok,
    prompt_ids: list[int],
    max_new_tokens: int = 60,
    temperature: float = 0.8,
    seed: int = 0,
) -> str:
    """Decoded continuation of prompt_ids (temperature sampling; greedy when temperature 0).

    Uses tinygpt.decoding.generate when that module is present, else a small loop here.
    """
    max_new_tokens = min(max_new_tokens, model.config.n_ctx - len(prompt_ids))
    if max_new_tokens <= 0:
        return ""
    try:
        from tinygpt.decoding import generate
    except ImportError:  # decoding.py is optional for training
        new_ids = _sample_loop(model, prompt_ids, max_new_tokens, temperature, seed)
    else:
        result = generate(
            model,
            np.asarray(prompt_ids),
            max_new_tokens=max_new_tokens,
            strategy="sample" if temperature > 0 else "greedy",
            temperature=temperature if temperature > 0 else 1.0,
            seed=seed,
            record_steps=False,
        )
        new_ids = result.tokens
    return tok.decode([int(i) for i in new_ids])


def _sample_loop(
    model: GPT, prompt_ids: list[int], max_new_tokens: int, temperature: float, seed: int
) -> list[int]:
    rng = np.random.default_rng(seed)
    cache = model.new_cache(1)
    logits = model.forward_cached(np.array([prompt_ids]), cache)[0, -1]  # (V,)
    out: list[int] = []
    for _ in range(max_new_tokens):
        if temperature <= 0:
            next_id = int(np.argmax(logits))
        else:
            p = softmax(logits.astype(np.float64) / temperature)
            next_id = int(rng.choice(len(p), p=p))
        out.append(next_id)
        if len(out) == max_new_tokens:
            break
        logits = model.forward_cached(np.array([[next_id]]), cache)[0, -1]
    return out


# ----------------------------------------------------------------------------- trainer


@dataclass
class TrainConfig:
    batch_size: int = 16
    block_size: int = 128
    max_steps: int = 1000
    lr: float = 2e-3  # peak learning rate, reached after warm-up
    min_lr: float = 2e-4  # where the cosine ends
    warmup: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0  # 0 turns clipping off
    eval_interval: int = 100  # steps between validation-loss estimates (0 = never)
    eval_batches: int = 8
    sample_interval: int = 200  # steps between samples, when a tokenizer is given (0 = never)
    seed: int = 0
    time_limit: float | None = None  # seconds for one run() call; None = no limit
    beta1: float = 0.9
    beta2: float = 0.95

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class StepRecord:
    """What one optimisation step did (val_loss / sample only at their intervals)."""

    step: int  # steps done after this one (1, 2, ...)
    loss: float  # training loss of this step's batch (nats per token)
    lr: float
    grad_norm: float  # before clipping
    tokens_per_sec: float
    elapsed: float  # seconds of training so far (all sessions)
    val_loss: float | None = None
    sample: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class Trainer:
    """Drives training one step at a time; the app can call step() itself, or run() in a thread.

    model is trained in place (its own copy: loss_and_grads writes the layers' caches).
    train_ids / val_ids are 1-D token streams. history collects every StepRecord.
    """

    def __init__(
        self,
        model: GPT,
        train_ids: np.ndarray,
        val_ids: np.ndarray,
        config: TrainConfig,
        tokenizer=None,
    ) -> None:
        self.model = model
        self.train_ids = np.asarray(train_ids, dtype=np.int64)
        self.val_ids = np.asarray(val_ids, dtype=np.int64)
        self.config = config
        self.tokenizer = tokenizer
        if config.block_size > model.config.n_ctx:
            raise ValueError(
                f"block_size {config.block_size} is longer than the model's n_ctx "
                f"{model.config.n_ctx}"
            )
        self.optimizer = AdamW(
            model.parameters(),
            lr=config.lr,
            betas=(config.beta1, config.beta2),
            weight_decay=config.weight_decay,
        )
        self.step_count = 0
        self.elapsed = 0.0  # seconds spent in step(), summed over sessions
        self.history: list[StepRecord] = []
        self._stop = threading.Event()
        self._val_batches = self._make_val_batches()

    # ---- data

    def batch(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        """The training batch of a given step: depends only on (seed, step)."""
        rng = np.random.default_rng([self.config.seed, 0, step])
        return get_batch(self.train_ids, self.config.batch_size, self.config.block_size, rng)

    def _make_val_batches(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Fixed validation batches, so estimates at different steps are comparable."""
        c = self.config
        block = min(c.block_size, len(self.val_ids) - 1)
        if c.eval_batches <= 0 or block < 1:
            return []
        rng = np.random.default_rng([c.seed, 1])
        return [get_batch(self.val_ids, c.batch_size, block, rng) for _ in range(c.eval_batches)]

    # ---- steps

    def lr_at(self, step: int) -> float:
        c = self.config
        return lr_schedule(step, c.lr, c.warmup, c.max_steps, c.min_lr)

    @property
    def done(self) -> bool:
        return self.step_count >= self.config.max_steps

    def step(self) -> StepRecord:
        """One optimisation step (+ validation loss / sample when their interval comes)."""
        c = self.config
        t0 = time.perf_counter()
        lr = self.lr_at(self.step_count)
        x, y = self.batch(self.step_count)
        loss, grads = self.model.loss_and_grads(x, y)
        grad_norm = clip_grad_norm(grads, c.grad_clip)
        self.optimizer.step(grads, lr)
        self.step_count += 1
        dt = time.perf_counter() - t0
        self.elapsed += dt
        record = StepRecord(
            step=self.step_count,
            loss=float(loss),
            lr=lr,
            grad_norm=grad_norm,
            tokens_per_sec=x.size / max(dt, 1e-9),
            elapsed=self.elapsed,
        )
        if self._due(c.eval_interval):
            record.val_loss = self.estimate_val_loss()
        if self.tokenizer is not None and self._due(c.sample_interval):
            record.sample = self.sample()
        self.history.append(record)
        return record

    def _due(self, interval: int) -> bool:
        return interval > 0 and (self.step_count % interval == 0 or self.done)

    def run(self, callback: Callable[[StepRecord], None] | None = None) -> list[StepRecord]:
        """Step until max_steps, the time limit, or stop(). Returns the history."""
        self._stop.clear()
        start = time.perf_counter()
        limit = self.config.time_limit
        while not self.done and not self._stop.is_set():
            if limit is not None and time.perf_counter() - start >= limit:
                break
            record = self.step()
            if callback is not None:
                callback(record)
        return self.history

    def stop(self) -> None:
        """Ask run() to finish after the current step (safe to call from any thread)."""
        self._stop.set()

    # ---- evaluation

    def estimate_val_loss(self) -> float:
        """Mean cross-entropy (nats per token) over the fixed validation batches."""
        if not self._val_batches:
            return float("nan")
        losses = [float(token_nll(self.model.forward(x), y).mean()) for x, y in self._val_batches]
        return float(np.mean(losses))

    def sample(self, max_new_tokens: int = 60, temperature: float = 0.8) -> str:
        """A short continuation from "<|endoftext|>" (or the first validation token)."""
        eos = getattr(self.tokenizer, "eos_token_id", None)
        prompt = [eos] if eos is not None else [int(self.val_ids[0])]
        return sample_text(self.model, self.tokenizer, prompt, max_new_tokens, temperature,
                           seed=self.config.seed + self.step_count)

    # ---- state (everything besides the model's parameters)

    def state_dict(self) -> dict[str, np.ndarray]:
        state = {f"optimizer.{k}": v for k, v in self.optimizer.state_dict().items()}
        state["step"] = np.array(self.step_count)
        state["elapsed"] = np.array(self.elapsed)
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        prefix = "optimizer."
        self.optimizer.load_state_dict(
            {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        )
        self.step_count = int(state["step"])
        self.elapsed = float(state["elapsed"])


def save_trainer_state(trainer: Trainer, path: str | Path) -> None:
    """Optimiser moments, step counter and time to `path` (.npz), written atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **trainer.state_dict())
    tmp.replace(path)


def load_trainer_state(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


# ----------------------------------------------------------------------------- command line


def sidecar(out: Path, suffix: str) -> Path:
    """models/x.npz -> models/x.<suffix>: the files that travel with a checkpoint."""
    return out.with_name(out.name.removesuffix(".npz") + "." + suffix)


def _read_corpus(corpus: str) -> tuple[str, str]:
    """(train text, validation text). "shakespeare" = the shipped plays; else a .txt path."""
    if corpus == "shakespeare":
        from tinygpt.corpus import load_corpus

        return load_corpus("train"), load_corpus("val")
    text = Path(corpus).read_text(encoding="utf-8")
    cut = int(len(text) * 0.9)  # last 10% held out
    return text[:cut], text[cut:]


def _tokenizer_fingerprint(tok) -> str:
    import hashlib

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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tinygpt.train", description="Train a tinygpt model in NumPy."
    )
    p.add_argument("--corpus", default="shakespeare", help="'shakespeare' or a path to a .txt")
    p.add_argument("--out", required=True, help="checkpoint path, e.g. models/shakespeare.npz")
    p.add_argument("--resume", action="store_true", help="continue from --out and its .optim.npz")
    p.add_argument("--tokenizer", help="reuse a saved tokenizer .json instead of training one")
    model = p.add_argument_group("model (ignored with --resume)")
    model.add_argument("--vocab-size", type=int, default=4096)
    model.add_argument("--n-layer", type=int, default=4)
    model.add_argument("--n-head", type=int, default=4)
    model.add_argument("--n-embd", type=int, default=256)
    model.add_argument("--n-ctx", type=int, default=256)
    model.add_argument("--model-seed", type=int, default=0)
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
    p.add_argument("--threads", type=int, help="BLAS threads (1 is fastest on a busy machine)")
    return p


def _restart_with_threads(threads: int, argv: list[str]) -> None:
    """BLAS reads its thread count when NumPy loads, so set it and start this program again.

    On a shared 2-core machine, two BLAS threads that keep waiting for each other can be
    ten times slower than one.
    """
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    if all(os.environ.get(name) == str(threads) for name in names):
        return
    for name in names:
        os.environ[name] = str(threads)
    root = str(Path(__file__).resolve().parent.parent)  # so `-m tinygpt.train` is found again
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "tinygpt.train", *argv])


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

    def __call__(self, rec: StepRecord) -> None:
        t = self.trainer
        self.log.write(json.dumps(rec.to_dict()) + "\n")
        self.log.flush()
        self.session_steps += 1
        tps = rec.tokens_per_sec
        old = self.smoothed_tps
        self.smoothed_tps = tps if old is None else 0.9 * old + 0.1 * tps
        per_step = (time.perf_counter() - self.session_start) / self.session_steps
        left = (t.config.max_steps - rec.step) * per_step
        if t.config.time_limit is not None:
            left = min(left, t.config.time_limit - (time.perf_counter() - self.session_start))
        width = 24
        filled = int(width * rec.step / t.config.max_steps)
        bar = "#" * filled + "." * (width - filled)
        line = (f"\r[{bar}] step {rec.step}/{t.config.max_steps}  loss {rec.loss:.3f}  "
                f"lr {rec.lr:.2e}  {self.smoothed_tps:,.0f} tok/s  {_format_time(left)} left")
        print(line, end="", flush=True)
        if rec.val_loss is not None:
            print(f"\n  val loss {rec.val_loss:.4f} nats/token", flush=True)
        if rec.sample is not None:
            print("  sample: " + rec.sample.replace("\n", "\n          "), flush=True)


def main(argv: list[str] | None = None) -> int:
    from tinygpt import checkpoint
    from tinygpt.tokenizer import BPETokenizer

    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.threads:
        _restart_with_threads(args.threads, argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    optim_path = sidecar(out, "optim.npz")
    log_path = sidecar(out, "log.jsonl")
    train_text, val_text = _read_corpus(args.corpus)

    state = None
    if args.resume:
        if not out.is_file() or not optim_path.is_file():
            print(f"cannot resume: {out} or {optim_path} is missing", file=sys.stderr)
            return 2
        model, tok = checkpoint.load(out)
        saved_config = model.metadata.get("train_config")
        state = load_trainer_state(optim_path)
        print(f"resuming {out} at step {int(state['step'])}", flush=True)
    else:
        saved_config = None
        if args.tokenizer:
            tok = BPETokenizer.load(args.tokenizer)
        else:
            print(f"training a {args.vocab_size}-token BPE tokenizer ...", flush=True)
            tok = BPETokenizer.train(train_text, args.vocab_size)
        config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=args.n_ctx, n_embd=args.n_embd,
                           n_head=args.n_head, n_layer=args.n_layer)
        model = GPT(config, seed=args.model_seed)
        log_path.write_text("")  # a fresh run starts a fresh log

    train_ids, val_ids = _encoded_ids(tok, train_text, val_text, out)
    config = _train_config(args, saved_config)
    trainer = Trainer(model, train_ids, val_ids, config, tokenizer=tok)
    if state is not None:
        trainer.load_state_dict(state)
    print(f"{model.num_parameters():,} parameters, {len(train_ids):,} training tokens, "
          f"{config.batch_size * config.block_size:,} tokens per step", flush=True)

    def save(final: bool = False) -> None:
        metadata = {
            "train_config": config.to_dict(),
            "step": trainer.step_count,
            "elapsed_seconds": trainer.elapsed,
            "corpus": args.corpus,
            "train_tokens": int(len(train_ids)),
        }
        if trainer.history:
            metadata["train_loss"] = trainer.history[-1].loss
        val = [r.val_loss for r in trainer.history if r.val_loss is not None]
        if val:
            metadata["val_loss"] = val[-1]
        if final:  # the whole held-out text, in nats per token and per character
            metadata["validation"] = evaluate_text(model, tok, val_text, config.block_size)
            print(f"\nheld-out text: {metadata['validation']['nats_per_token']:.4f} nats/token, "
                  f"{metadata['validation']['nats_per_char']:.4f} nats/char", flush=True)
        # parameters and optimiser state are written together, so resume is exact
        checkpoint.save(model, tok, out, metadata=metadata)
        save_trainer_state(trainer, optim_path)

    progress = _Progress(trainer, log_path)

    def checkpointing(rec: StepRecord) -> None:
        progress(rec)
        if args.save_interval > 0 and rec.step % args.save_interval == 0:
            save()

    # Ctrl-C: finish the current step, save, exit. A second Ctrl-C stops at once.
    def on_interrupt(signum, frame) -> None:
        print("\ninterrupted: saving after this step ...", flush=True)
        trainer.stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        trainer.run(checkpointing)
    except KeyboardInterrupt:
        # a second Ctrl-C may land half-way through an update: keep the last saved checkpoint
        print(f"\nstopped without saving; {out} holds the last checkpoint", flush=True)
        return 130
    finally:
        signal.signal(signal.SIGINT, previous)
        progress.log.close()
    save(final=not trainer._stop.is_set())
    print(f"\nsaved {out} at step {trainer.step_count} "
          f"({_format_time(trainer.elapsed)} of training)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
