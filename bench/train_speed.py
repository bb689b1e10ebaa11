"""Training speed: tinygpt (NumPy, hand-written backward) beside PyTorch on the CPU.

What: training steps (forward, backward, gradient clipping, AdamW) of the same model in both
libraries: same config (default: the shipped model's shape, 4 layers, 256 dims, 4 heads, vocab
4096), same initial weights, the same batches (default 16 x 128 tokens), AdamW with the same
settings; tokens per second for each, and the first step's loss in both (they must agree).
How: each thread count in its own process (threads set before NumPy and PyTorch load); each
library trains in its own block: --warmup steps, then --runs timed steps, median and spread of
the per-step rates. Results: bench/results/train_speed.json.
Targets (issue 14): at least 0.9x PyTorch's tokens/s with 1 thread, 0.7x with 2 threads.

    python bench/train_speed.py                          # 1 and 2 threads, 10 timed steps
    python bench/train_speed.py --threads 1 --runs 3 --results-dir /tmp/smoke
    python bench/train_speed.py --n-layer 6 --n-embd 384 --block-size 256
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench import common  # noqa: E402
from tinygpt.network.model import GPT, GPTConfig  # noqa: E402
from tinygpt.train.cli import add_model_size_args  # noqa: E402
from tinygpt.train.trainer import AdamW, clip_grad_norm, get_batch  # noqa: E402

TARGETS = {1: ">= 0.9x", 2: ">= 0.7x"}
ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)


def parse_args():
    p = common.parser(__doc__, runs=10, warmup=2)
    add_model_size_args(p)  # the sizes `python -m tinygpt.train` trains by default
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--block-size", type=int, default=128)
    return p.parse_args()


def time_steps(step, batches: list, args) -> tuple[common.Measure, list[float]]:
    """Seconds per step over the batches in order (the first --warmup steps untimed), and the
    loss of every step."""
    batch_iter = iter(batches)
    losses: list[float] = []
    seconds = common.timed(lambda: losses.append(step(*next(batch_iter))), args.runs, args.warmup)
    return seconds, losses


def tinygpt_step(model: GPT, opt: AdamW):
    def step(x: np.ndarray, y: np.ndarray) -> float:
        loss, grads = model.loss_and_grads(x, y)
        clip_grad_norm(grads, 1.0)
        opt.step(grads, ADAMW["lr"])
        return loss

    return step


def torch_step(model: GPT, torch):
    """A step of the same GPT written with torch.nn, weights copied from `model` now."""
    tmodel = torch_model(model)
    opt = torch.optim.AdamW(tmodel.parameters(), **ADAMW)

    def step(x: np.ndarray, y: np.ndarray) -> float:
        loss = tmodel(torch.from_numpy(x), torch.from_numpy(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 1.0)
        opt.step()
        return loss.item()

    return step


BLOCK_NAMES = {  # torch.nn name in a block -> tinygpt parameter name
    "ln1.weight": "ln1.gamma", "ln1.bias": "ln1.beta",
    "qkv.weight": "attn.W_qkv", "qkv.bias": "attn.b_qkv",
    "proj.weight": "attn.W_proj", "proj.bias": "attn.b_proj",
    "ln2.weight": "ln2.gamma", "ln2.bias": "ln2.beta",
    "fc1.weight": "ffn.W1", "fc1.bias": "ffn.b1",
    "fc2.weight": "ffn.W2", "fc2.bias": "ffn.b2",
}  # fmt: skip
TOP_NAMES = {"wte": "embedding.embeddings", "wpe": "embedding.position_embeddings",
             "ln_f.weight": "ln_f.gamma", "ln_f.bias": "ln_f.beta"}


def torch_state(model: GPT, torch) -> dict:
    """tinygpt's parameters under torch.nn names (copies; Linear weights transposed: tinygpt
    stores W as (in, out), torch as (out, in))."""
    params = model.parameters()
    names = dict(TOP_NAMES)
    for i in range(model.config.n_layer):
        names.update({f"blocks.{i}.{t}": f"blocks.{i}.{ours}" for t, ours in BLOCK_NAMES.items()})
    state = {}
    for torch_name, ours in names.items():
        linear_weight = ours.split(".")[-1] in ("W_qkv", "W_proj", "W1", "W2")
        value = params[ours].T if linear_weight else params[ours]
        state[torch_name] = torch.from_numpy(np.array(value))  # a copy: tinygpt trains in place
    return state


def torch_model(model: GPT):
    """The same GPT written with torch.nn, weights copied from the tinygpt model."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    cfg = model.config
    if not cfg.tie_weights or cfg.output_bias:
        raise ValueError("the PyTorch reference is written for a tied model without output bias")

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            C = cfg.n_embd
            self.ln1 = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
            self.ln2 = nn.LayerNorm(C, eps=cfg.layer_norm_eps)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.fc1 = nn.Linear(C, 4 * C)
            self.fc2 = nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, C = x.shape
            H = cfg.n_head
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=approximate))

    class TorchGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Parameter(torch.empty(cfg.vocab_size, cfg.n_embd))
            self.wpe = nn.Parameter(torch.empty(cfg.n_ctx, cfg.n_embd))
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_eps)

        def forward(self, ids, targets):
            x = self.wte[ids] + self.wpe[: ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.T  # tied output layer
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    tmodel = TorchGPT()
    tmodel.load_state_dict(torch_state(model, torch))  # strict: every weight, copied
    return tmodel


def measure(args) -> list[dict]:
    import torch

    threads = int(args.threads)
    common.limit_threads(threads, torch)
    config = GPTConfig(vocab_size=args.vocab_size, n_ctx=args.block_size, n_embd=args.n_embd,
                       n_head=args.n_head, n_layer=args.n_layer)
    model = GPT(config, seed=0)
    rng = np.random.default_rng(0)
    data = rng.integers(0, config.vocab_size, size=200_000)
    batches = [get_batch(data, args.batch_size, args.block_size, rng)
               for _ in range(args.warmup + args.runs)]
    tokens = args.batch_size * args.block_size
    print(f"{common.shape(config)}; batch {args.batch_size} x {args.block_size}", flush=True)

    reference = torch_step(model, torch)  # copies the weights before tinygpt trains them
    theirs, their_losses = time_steps(reference, batches, args)
    common.settle()
    opt = AdamW(model.parameters(), **ADAMW)
    ours, our_losses = time_steps(tinygpt_step(model, opt), batches, args)
    name = (f"training, {args.n_layer} layers x {args.n_embd} dims, "
            f"batch {args.batch_size} x {args.block_size}")
    note = f"first-step loss {our_losses[0]:.5f} vs {their_losses[0]:.5f}"
    return [common.row(name, ours.rate(tokens), theirs.rate(tokens),
                       "PyTorch, same model, weights and batches", TARGETS.get(threads),
                       note=note)]


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
