"""Generation speed: tinygpt with and without the KV cache, and beside transformers' generate.

Measured in the same run, greedy decoding, 256 new tokens from an 8-token prompt:
  1. the small model (models/shakespeare.npz if it exists, else a random model of its shape):
     tinygpt with the KV cache vs tinygpt recomputing the whole sequence every step
     (target: cache >= 5x recompute);
  2. a GPT-2-small-shaped random model (124M parameters), the same weights in both libraries:
     tinygpt (cached) vs transformers' GPT2LMHeadModel.generate on the CPU
     (target: tinygpt >= 0.8x transformers);
  3. beam search (3 beams, 64 new tokens): on the small model with the KV cache vs recomputing,
     and on the GPT-2-small-shaped model vs transformers' beam search, same weights.

    python bench/generate.py
    python bench/generate.py --new-tokens 64 --no-gpt2    # quick
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from tinygpt.decoding import generate  # noqa: E402
from tinygpt.model import GPT, GPTConfig  # noqa: E402


def small_model() -> tuple[GPT, str]:
    path = ROOT / "models" / "shakespeare.npz"
    if path.exists():
        from tinygpt import load

        model, _ = load(path)
        return model, str(path.relative_to(ROOT))
    config = GPTConfig(vocab_size=4096, n_ctx=512, n_embd=256, n_head=8, n_layer=4)
    return GPT(config, seed=0), "random model (shakespeare.npz not found)"


def timed_generate(model: GPT, prompt: np.ndarray, n_new: int, **settings):
    """(seconds, GenerationResult) of one tinygpt generate call."""
    t0 = time.perf_counter()
    result = generate(model, prompt, n_new, record_steps=False, **settings)
    return time.perf_counter() - t0, result


def tokens_per_second(model: GPT, prompt: np.ndarray, n_new: int, use_cache: bool):
    seconds, result = timed_generate(model, prompt, n_new, use_cache=use_cache)
    return len(result.tokens) / seconds, result


def bench_cache(n_new: int) -> None:
    model, source = small_model()
    c = model.config
    prompt = np.arange(8) % c.vocab_size
    n_new = min(n_new, c.n_ctx - len(prompt))
    print(f"[1] {source}: {c.n_layer} layers, {c.n_embd} dims, vocab {c.vocab_size}, ")
    print(f"    ctx {c.n_ctx}; greedy, {len(prompt)}-token prompt, {n_new} new tokens")
    generate(model, prompt, 4, record_steps=False)  # warm-up
    cached, a = tokens_per_second(model, prompt, n_new, use_cache=True)
    recompute, b = tokens_per_second(model, prompt, n_new, use_cache=False)
    same = a.tokens.tolist() == b.tokens.tolist()
    print(f"    KV cache   {cached:9.1f} tokens/s")
    print(f"    recompute  {recompute:9.1f} tokens/s   (same tokens: {same})")
    print(f"    ratio cache / recompute = {cached / recompute:.1f}x   (target >= 5x)")
    bench_beam_cache(model, prompt)


def bench_beam_cache(model: GPT, prompt: np.ndarray, n_new: int = 64, beams: int = 3) -> None:
    beam = dict(strategy="beam", num_beams=beams)
    timed_generate(model, prompt, 4, **beam)  # warm-up
    cached, a = timed_generate(model, prompt, n_new, use_cache=True, **beam)
    recompute, b = timed_generate(model, prompt, n_new, use_cache=False, **beam)
    same = a.tokens.tolist() == b.tokens.tolist()
    print(f"[1b] same model, beam search with {beams} beams, {len(a.tokens)} new tokens")
    print(f"    KV cache   {1000 * cached:8.1f} ms")
    print(f"    recompute  {1000 * recompute:8.1f} ms   (same tokens: {same})")
    print(f"    ratio recompute / cache = {recompute / cached:.1f}x")


def bench_gpt2(n_new: int) -> None:
    try:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        print("[2] skipped: torch / transformers not installed")
        return
    from tinygpt.checkpoint import gpt2_config, gpt2_parameters

    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config()).eval()  # GPT-2 small shape, random weights
    config = gpt2_config(hf.config.to_dict())
    state = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
    model = GPT(config)
    model.load_parameters(gpt2_parameters(state, config))
    prompt = np.arange(8) * 1000
    n_new = min(n_new, config.n_ctx - len(prompt))
    print(f"[2] GPT-2 small shape (random, {model.num_parameters() / 1e6:.0f}M parameters), ")
    print(f"    greedy, {len(prompt)}-token prompt, {n_new} new tokens, torch threads ", end="")
    print(torch.get_num_threads())

    ids = torch.tensor(prompt[None, :])

    def hf_generate(n: int, num_beams: int = 1):
        with torch.no_grad():
            return hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                num_beams=num_beams,
                max_new_tokens=n,
                min_new_tokens=n,  # random weights: never stop early on the EOS id
                pad_token_id=0,
            )

    hf_generate(4)  # warm-up
    generate(model, prompt, 4, record_steps=False)
    t0 = time.perf_counter()
    theirs = hf_generate(n_new)[0, len(prompt) :].tolist()
    hf_speed = len(theirs) / (time.perf_counter() - t0)
    ours_speed, result = tokens_per_second(model, prompt, n_new, use_cache=True)
    agree = np.mean(np.array(theirs) == result.tokens) if len(theirs) == n_new else float("nan")
    print(f"    tinygpt (KV cache)  {ours_speed:8.1f} tokens/s")
    print(f"    transformers        {hf_speed:8.1f} tokens/s")
    print(f"    ratio tinygpt / transformers = {ours_speed / hf_speed:.2f}x   (target >= 0.8x)")
    print(f"    same token at {agree:.0%} of positions (random weights: near-ties can flip)")

    beams, n_beam = 3, min(64, n_new)

    hf_generate(4, beams)  # warm-up
    t0 = time.perf_counter()
    hf_generate(n_beam, beams)
    theirs_s = time.perf_counter() - t0
    ours_s, _ = timed_generate(model, prompt, n_beam, strategy="beam", num_beams=beams)
    print(f"[3] GPT-2 small shape, beam search with {beams} beams, {n_beam} new tokens")
    print(f"    tinygpt (KV cache)  {1000 * ours_s:8.1f} ms")
    print(f"    transformers        {1000 * theirs_s:8.1f} ms")
    print(f"    ratio tinygpt / transformers time = {ours_s / theirs_s:.2f}x   (lower is faster)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--no-gpt2", action="store_true", help="skip the GPT-2 small comparison")
    args = parser.parse_args()
    bench_cache(args.new_tokens)
    if not args.no_gpt2:
        bench_gpt2(args.new_tokens)


if __name__ == "__main__":
    main()
