"""Forward-pass speed: tinygpt (plain and traced) beside PyTorch on the same weights.

Measured in the same run, one sequence of T=64 tokens, median of several runs after warm-up:
  1. a small model (the shipped model's shape: 4 layers, 256 dims, 4 heads, vocab 4096);
  2. a GPT-2-small-shaped random model (124M parameters).
Each model is a random transformers.GPT2LMHeadModel, written with save_pretrained and read
back with tinygpt.load (the load time of GPT-2 small is printed too; target < 10 s).
Targets: tinygpt <= 1.5x PyTorch for GPT-2 small; traced <= 1.5x plain.

    python bench/forward.py
    python bench/forward.py --threads 2 --runs 10   # default: 1 thread, 15 runs
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import string
import sys
import tempfile
import time
from pathlib import Path


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--threads", type=int, default=1, help="BLAS and torch threads (1: steadier when shared)"
    )
    parser.add_argument("--runs", type=int, default=15, help="timed runs per measurement")
    parser.add_argument("--tokens", type=int, default=64, help="sequence length T")
    parser.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2 small model")
    return parser.parse_args()


ARGS = parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)  # before NumPy loads its BLAS: same threads as torch

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from tinygpt import load  # noqa: E402
from tinygpt.tokenizer import bytes_to_unicode  # noqa: E402


def write_dummy_tokenizer(folder: Path, vocab_size: int) -> None:
    """vocab.json + merges.txt with exactly `vocab_size` tokens (256 bytes, letter strings,
    <|endoftext|>), so tinygpt.load accepts the folder. The tokens themselves do not matter."""
    byte_str = bytes_to_unicode()
    encoder = {byte_str[b]: b for b in range(256)}
    merges = []
    letters = string.ascii_lowercase
    words = ("".join(w) for n in itertools.count(2) for w in itertools.product(letters, repeat=n))
    while len(encoder) < vocab_size - 1:
        word = next(words)  # every prefix of `word` is already a token
        merges.append(f"{word[:-1]} {word[-1]}")
        encoder[word] = len(encoder)
    encoder["<|endoftext|>"] = len(encoder)
    (folder / "vocab.json").write_text(json.dumps(encoder))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")


def interleaved_medians(fns: dict, runs: int, warmup: int = 3) -> dict[str, float]:
    """Median seconds of each function, timed in alternating rounds: when the machine's load
    changes during the run, every contender sees the same conditions."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(t)) for name, t in times.items()}


def bench(name: str, hf_config, torch, transformers, target: str) -> None:
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(hf_config).eval()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        hf.save_pretrained(folder, safe_serialization=True)
        write_dummy_tokenizer(folder, hf_config.vocab_size)
        t0 = time.perf_counter()
        model, _ = load(folder)  # weights memory-mapped from model.safetensors
        load_seconds = time.perf_counter() - t0
        diff, t = time_forwards(model, hf, torch, hf_config.vocab_size)

    print(f"[{name}] {model_summary(hf_config)}, T={ARGS.tokens}")
    print(f"    tinygpt.load          {load_seconds:8.2f} s")
    print(f"    PyTorch forward       {t['torch'] * 1e3:8.2f} ms")
    print(f"    tinygpt forward       {t['plain'] * 1e3:8.2f} ms")
    print(f"    tinygpt traced        {t['traced'] * 1e3:8.2f} ms")
    print(f"    ratio tinygpt / PyTorch  = {t['plain'] / t['torch']:.2f}x   {target}")
    print(f"    ratio traced / plain     = {t['traced'] / t['plain']:.2f}x   (target <= 1.5x)")
    print(f"    max |logits difference|  = {diff:.1e}")


def time_forwards(model, hf, torch, vocab_size: int) -> tuple[float, dict[str, float]]:
    ids = np.random.default_rng(0).integers(0, vocab_size, ARGS.tokens)
    ids_t = torch.from_numpy(ids[None])

    def torch_forward():
        with torch.no_grad():
            return hf(ids_t).logits

    diff = float(np.abs(model.forward(ids) - torch_forward()[0].numpy()).max())
    fns = {
        "torch": torch_forward,
        "plain": lambda: model.forward(ids),
        "traced": lambda: model.run_with_trace(ids),
    }
    return diff, interleaved_medians(fns, ARGS.runs)


def model_summary(c) -> str:
    return (f"{c.n_layer} layers, {c.n_embd} dims, {c.n_head} heads, vocab {c.vocab_size}, "
            f"ctx {c.n_positions}")


def main() -> None:
    try:
        import torch
        import transformers
    except ImportError:
        print("skipped: torch / transformers are needed for the reference")
        return
    torch.set_num_threads(ARGS.threads)
    transformers.logging.set_verbosity_error()
    print(f"threads: torch {torch.get_num_threads()}, NumPy BLAS {ARGS.threads}; "
          f"median of {ARGS.runs} interleaved runs after 3 warm-ups")
    print("(the machine may be shared: other jobs running at the same time slow both sides)")
    small = transformers.GPT2Config(
        n_layer=4, n_head=4, n_embd=256, vocab_size=4096, n_positions=256,
        bos_token_id=4095, eos_token_id=4095,
    )  # fmt: skip
    bench("small", small, torch, transformers, "(no target)")
    if not ARGS.no_gpt2:
        bench("GPT-2 small", transformers.GPT2Config(), torch, transformers, "(target <= 1.5x)")


if __name__ == "__main__":
    main()
