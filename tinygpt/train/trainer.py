"""Training a GPT in NumPy: batches, AdamW, the learning-rate schedule, and a Trainer.

One optimisation step:
    x, y   = get_batch(...)                      # (B, T) windows of the text, y = x shifted by one
    loss, grads = model.loss_and_grads(x, y)     # forward, cross-entropy, backward
    clip_grad_norm(grads, 1.0)                   # no single step may be huge
    optimizer.step(grads, lr_schedule(step))     # AdamW moves every parameter a little

Command line (tinygpt/train/cli.py: trains the tokenizer too, prints progress, saves
checkpoints, resumes):
    python -m tinygpt.train --corpus shakespeare --out models/shakespeare.npz --steps 3000

Everything random comes from `np.random.default_rng(seed)` (never global seeding), and the
batch of step n depends only on (seed, n): the same seed gives the same run, and a resumed
run continues exactly where the interrupted one stopped.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from tinygpt.decoding.generation import generate
from tinygpt.network.functional import token_nll
from tinygpt.network.model import GPT

__all__ = [
    "AdamW",
    "LossCurves",
    "StepRecord",
    "TrainConfig",
    "Trainer",
    "clip_grad_norm",
    "evaluate_text",
    "get_batch",
    "load_trainer_state",
    "loss_curves",
    "lr_schedule",
    "save_trainer_state",
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
    """Decoded continuation of prompt_ids (temperature sampling; greedy when temperature 0)."""
    max_new_tokens = min(max_new_tokens, model.config.n_ctx - len(prompt_ids))
    if max_new_tokens <= 0:
        return ""
    result = generate(
        model,
        np.asarray(prompt_ids),
        max_new_tokens=max_new_tokens,
        strategy="sample" if temperature > 0 else "greedy",
        temperature=temperature if temperature > 0 else 1.0,
        seed=seed,
        record_steps=False,
    )
    return tok.decode([int(i) for i in result.tokens])


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

    @property
    def stop_requested(self) -> bool:
        """True once stop() was called (until the next run())."""
        return self._stop.is_set()

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


@dataclass(frozen=True)
class LossCurves:
    """A run's losses as arrays, for plotting (nats per token)."""

    steps: np.ndarray  # (n,) every recorded step
    train_loss: np.ndarray  # (n,) the loss of that step's batch
    val_steps: np.ndarray  # (m,) the steps with a validation estimate
    val_loss: np.ndarray  # (m,)

    @property
    def change(self) -> float:
        """The latest training loss minus the first: below zero as the model learns."""
        return float(self.train_loss[-1] - self.train_loss[0])


def loss_curves(history: list[StepRecord]) -> LossCurves:
    """The training and validation curves of a list of StepRecords (e.g. `Trainer.history`)."""
    val = [r for r in history if r.val_loss is not None]
    return LossCurves(
        steps=np.array([r.step for r in history], dtype=np.int64),
        train_loss=np.array([r.loss for r in history], dtype=np.float64),
        val_steps=np.array([r.step for r in val], dtype=np.int64),
        val_loss=np.array([r.val_loss for r in val], dtype=np.float64),
    )
