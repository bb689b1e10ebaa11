"""Forward-pass speed: tinygpt (plain and traced) beside PyTorch on the same weights.

What: one sequence of T tokens through
  1. a small model of the shipped model's shape (4 layers, 256 dims, 4 heads, vocab 4096), T=64;
  2. a GPT-2-small-shaped random model (12 layers, 768 dims, 12 heads, vocab 50,257), at each
     T of --tokens (default 64 and 1024): tinygpt plain vs PyTorch, tinygpt traced vs plain;
and the time tinygpt.load takes to open GPT-2 small.
How: each model is a random transformers.GPT2LMHeadModel, written with save_pretrained and read
back with tinygpt.load, so both libraries run the same weights (the largest logit difference
is reported). Each thread count runs in its own process (threads set before NumPy and PyTorch
load); in it, each library is timed in its own block: warm-up, then --runs runs, median and
spread. Results: bench/results/forward.json (then python scripts/speed_table.py).
Targets (issue 14), at 1 and 2 threads: GPT-2 small at most 1.1x PyTorch's time at T=64 and
1.25x at T=1024; traced at most 1.2x plain at T=1024; tinygpt.load under 10 s.

    python bench/forward.py                                  # 1 and 2 threads, 15 runs
    python bench/forward.py --threads 1 --runs 3 --tokens 32 --results-dir /tmp/smoke
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench import common  # noqa: E402
from tinygpt import load  # noqa: E402

TARGETS = {64: "<= 1.1x", 1024: "<= 1.25x"}
TRACED_TARGETS = {1024: "<= 1.2x"}


def parse_args():
    p = common.parser(__doc__)
    p.add_argument("--tokens", type=int, nargs="+", default=[64, 1024],
                   help="sequence lengths T for GPT-2 small (default 64 1024)")
    p.add_argument("--no-gpt2", action="store_true", help="only the shipped model's shape")
    return p.parse_args()


def time_forwards(name: str, hf, model, T: int, args, torch, gpt2: bool) -> list[dict]:
    """PyTorch, then tinygpt plain, then (GPT-2 small) tinygpt traced: separate blocks."""
    ids = np.random.default_rng(0).integers(0, model.config.vocab_size, T)
    ids_t = torch.from_numpy(ids[None])

    def torch_forward():
        with torch.no_grad():
            return hf(ids_t).logits

    diff = float(np.abs(model.forward(ids) - torch_forward()[0].numpy()).max())
    runs, warmup = args.runs, args.warmup
    theirs = common.timed(torch_forward, runs, warmup).in_ms()
    common.settle()
    plain = common.timed(lambda: model.forward(ids), runs, warmup).in_ms()
    target = TARGETS.get(T) if gpt2 else None
    reference = (f"PyTorch (transformers GPT2LMHeadModel, {common.attention_kind(hf)} "
                 "attention), same weights")
    rows = [common.row(f"forward, {name}, T={T}", plain, theirs, reference, target,
                       note=f"max |logits difference| {diff:.1e}")]
    if gpt2:
        common.settle()
        trace = common.timed(lambda: model.run_with_trace(ids), runs, warmup).in_ms()
        rows.append(common.row(f"forward with trace, {name}, T={T}", trace, plain,
                               "tinygpt forward without trace", TRACED_TARGETS.get(T)))
    common.settle()
    return rows


def measure(args) -> list[dict]:
    import torch
    import transformers

    common.limit_threads(int(args.threads), torch)
    small = transformers.GPT2Config(
        n_layer=4, n_head=4, n_embd=256, vocab_size=4096, n_positions=256,
        bos_token_id=4095, eos_token_id=4095,
    )  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        hf, model = common.gpt2_pair(small, Path(tmp))
        print(f"shipped shape: {common.shape(small)}", flush=True)
        rows += time_forwards("shipped shape", hf, model, 64, args, torch, gpt2=False)
    if args.no_gpt2:
        return rows
    gpt2 = transformers.GPT2Config()
    with tempfile.TemporaryDirectory() as tmp:
        hf, model = common.gpt2_pair(gpt2, Path(tmp))
        print(f"GPT-2 small: {common.shape(gpt2)}, {model.num_parameters() / 1e6:.0f}M "
              "parameters", flush=True)
        loading = common.timed(lambda: load(tmp), runs=5, warmup=1)
        rows.append(common.row("tinygpt.load, GPT-2 small (124M)", loading, target="< 10 s",
                               note="weights memory-mapped from model.safetensors"))
        for T in args.tokens:
            rows += time_forwards("GPT-2 small", hf, model, T, args, torch, gpt2=True)
    return rows


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
