"""Generation speed: tinygpt with and without the KV cache, and beside transformers' generate.

What:
  1. the shipped model (models/shakespeare.npz; a random model of its shape if absent),
     8-token prompt: greedy with the KV cache vs recomputing the whole sequence every step
     (--new-tokens, default 256, cut to the context), and beam search (3 beams, 64 tokens)
     with the cache vs recomputing;
  2. a GPT-2-small-shaped random model, the same weights in both libraries (save_pretrained,
     then tinygpt.load): greedy, --new-tokens tokens, tinygpt vs transformers' generate; beam
     search, 3 beams, 64 tokens, tinygpt vs transformers' beam search.
How: each thread count in its own process (threads set before NumPy and PyTorch load); each
library, and cache vs recompute, timed in its own block: warm-up, then --runs whole
generations, median and spread. Results: bench/results/generate.json.
Targets, at 1 and 2 threads: cache >= 5x recompute (tokens/s); greedy GPT-2 small stays ahead
of transformers (>= 1.0x its tokens/s); beam search at most 1.0x transformers' time.

    python bench/generate.py                                    # 1 and 2 threads, 5 runs
    python bench/generate.py --threads 1 --runs 3 --new-tokens 32 --results-dir /tmp/smoke
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench import common  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt.network.model import GPT, GPTConfig  # noqa: E402

BEAMS, BEAM_TOKENS = 3, 64
PROMPT_LENGTH = 8


def parse_args():
    p = common.parser(__doc__, runs=5, warmup=1)
    p.add_argument("--new-tokens", type=int, default=256, help="greedy tokens (default 256)")
    p.add_argument("--no-gpt2", action="store_true", help="only the shipped model")
    return p.parse_args()


def shipped_model() -> tuple[GPT, str]:
    path = ROOT / "models" / "shakespeare.npz"
    if path.exists():
        from tinygpt import load

        return load(path)[0], "shipped model"
    config = GPTConfig(vocab_size=4096, n_ctx=512, n_embd=256, n_head=4, n_layer=4)
    return GPT(config, seed=0), "random model of the shipped shape"


def ours(model: GPT, prompt: np.ndarray, n_new: int, args, **settings):
    """(Measure of seconds, tokens of the last run) for tinygpt's generate."""
    last = {}

    def run():
        last["tokens"] = generate(model, prompt, n_new, record_steps=False, **settings).tokens

    seconds = common.timed(run, args.runs, args.warmup)
    common.settle()
    return seconds, np.asarray(last["tokens"]).tolist()


def same(a: list, b: list) -> str:
    if len(a) != len(b):
        return f"{len(a)} vs {len(b)} tokens"
    return f"same token at {np.mean(np.array(a) == np.array(b)):.0%} of positions"


def bench_cache(args) -> list[dict]:
    model, source = shipped_model()
    prompt = np.arange(PROMPT_LENGTH) % model.config.vocab_size
    n_new = min(args.new_tokens, model.config.n_ctx - PROMPT_LENGTH)
    print(f"{source}: {common.shape(model.config)}", flush=True)
    cached, a = ours(model, prompt, n_new, args, use_cache=True)
    recompute, b = ours(model, prompt, n_new, args, use_cache=False)
    rows = [common.row(f"greedy {n_new} tokens, {source}", cached.rate(len(a)),
                       recompute.rate(len(b)), "tinygpt recomputing the whole sequence each step",
                       ">= 5x", note=same(a, b))]
    beam = dict(strategy="beam", num_beams=BEAMS)
    cached, a = ours(model, prompt, BEAM_TOKENS, args, use_cache=True, **beam)
    recompute, b = ours(model, prompt, BEAM_TOKENS, args, use_cache=False, **beam)
    rows.append(common.row(f"beam search, {BEAMS} beams, {BEAM_TOKENS} tokens, {source}",
                           cached.in_ms(), recompute.in_ms(),
                           "tinygpt recomputing the whole sequence each step", note=same(a, b)))
    return rows


def theirs(hf, prompt: np.ndarray, n_new: int, args, torch, num_beams: int = 1):
    """(Measure of seconds, new tokens of the last run) for transformers' generate."""
    ids = torch.tensor(prompt[None, :])
    last = {}

    def run():
        with torch.no_grad():
            out = hf.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False,
                num_beams=num_beams, max_new_tokens=n_new,
                min_new_tokens=n_new,  # random weights: never stop early on the EOS id
                pad_token_id=0,
            )  # fmt: skip
        last["tokens"] = out[0, len(prompt):].tolist()

    seconds = common.timed(run, args.runs, args.warmup)
    common.settle()
    return seconds, last["tokens"]


def bench_gpt2(args) -> list[dict]:
    import torch
    import transformers

    prompt = np.arange(PROMPT_LENGTH) * 1000
    config = transformers.GPT2Config()
    n_new = min(args.new_tokens, config.n_positions - PROMPT_LENGTH)
    with tempfile.TemporaryDirectory() as tmp:
        hf, model = common.gpt2_pair(config, Path(tmp))
        print(f"GPT-2 small: {common.shape(config)}", flush=True)
        how = f"({common.attention_kind(hf)} attention), same weights"
        their_s, b = theirs(hf, prompt, n_new, args, torch)
        our_s, a = ours(model, prompt, n_new, args)
        rows = [common.row(f"greedy {n_new} tokens, GPT-2 small", our_s.rate(len(a)),
                           their_s.rate(len(b)), f"transformers generate {how}", ">= 1.0x",
                           note=same(a, b) + " (random weights: near-ties can flip)")]
        their_s, b = theirs(hf, prompt, BEAM_TOKENS, args, torch, BEAMS)
        our_s, a = ours(model, prompt, BEAM_TOKENS, args, strategy="beam", num_beams=BEAMS)
        rows.append(common.row(f"beam search, {BEAMS} beams, {BEAM_TOKENS} tokens, GPT-2 small",
                               our_s.in_ms(), their_s.in_ms(), f"transformers beam search {how}",
                               "<= 1.0x", note=same(a, b)))
    return rows


def measure(args) -> list[dict]:
    torch = None
    if not args.no_gpt2:
        import torch
    common.limit_threads(int(args.threads), torch)
    rows = bench_cache(args)
    return rows if args.no_gpt2 else rows + bench_gpt2(args)


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
