"""Cost of the "why this token?" tools, as multiples of one plain forward timed in the same run.

A GPT-2-small-shaped random model (12 layers, 12 heads, 768 dims, vocab 50257), a prompt of
n = 200 tokens, the prediction at its last position. Timed (median of several interleaved
runs after warm-up, BLAS threads set with threadpoolctl):
  plain forward        model.forward(ids)                       the reference, 1.0
  traced forward       model.run_with_trace(ids)
  attribution          logit_attribution(model, ids, p, token)   (runs its own traced forward)
  attribution, traced  the same with the trace passed in         (the extra work only)
  difference, neurons  logit_difference_attribution / neuron_effects with the trace passed in
  surprise             surprise(model, ids)
  occlusion            occlusion(model, ids, p): one batched forward of n prompts of n - 1
                       tokens; also against n plain forwards of n - 1 tokens (its budget)
Targets: attribution <= ~1 traced forward; the traced-in tools a small fraction of a forward;
occlusion <= n forwards of n - 1 tokens.

    python bench/explain.py                      # writes bench/results/other/explain.json
    python bench/explain.py --tokens 64 --runs 3 # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from tinygpt import (  # noqa: E402  # noqa: E402
    GPT,
    GPTConfig,
    kv_cache_reuse,
    logit_attribution,
    logit_difference_attribution,
    neuron_effects,
    occlusion,
    surprise,
)

GPT2_SMALL = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs of the fast tools")
    parser.add_argument("--occlusion-runs", type=int, default=3, help="timed occlusion runs")
    parser.add_argument("--tokens", type=int, default=200, help="prompt length n")
    parser.add_argument("--out",
                        default=str(ROOT / "bench" / "results" / "other" / "explain.json"))
    return parser.parse_args()


def interleaved_medians(fns: dict, runs: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds of each function, timed in alternating rounds (a shared machine's load
    changes during the run: every contender sees the same conditions)."""
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


def fast_tools(model: GPT, ids: np.ndarray, runs: int) -> dict[str, float]:
    p = len(ids) - 1
    _, trace = model.run_with_trace(ids)
    top, second = np.argsort(-trace["logits"][p])[:2].tolist()
    fns = {
        "plain forward": lambda: model.forward(ids),
        "traced forward": lambda: model.run_with_trace(ids),
        "attribution": lambda: logit_attribution(model, ids, p, top),
        "attribution, trace given": lambda: logit_attribution(model, ids, p, top, trace=trace),
        "difference, trace given": lambda: logit_difference_attribution(
            model, ids, p, top, second, trace=trace
        ),
        "neurons of one layer, trace given": lambda: neuron_effects(
            model, ids, p, model.config.n_layer - 1, top, trace=trace
        ),
        "surprise": lambda: surprise(model, ids),
        "kv_cache_reuse (256 new tokens)": lambda: kv_cache_reuse(model, len(ids), 256),
    }
    return interleaved_medians(fns, runs)


def occlusion_times(model: GPT, ids: np.ndarray, runs: int) -> dict[str, float]:
    """occlusion at the last position, and one plain forward of a shortened prompt (n-1)."""
    shortened = ids[:-1]
    fns = {
        "occlusion": lambda: occlusion(model, ids, len(ids) - 1),
        "plain forward, n - 1 tokens": lambda: model.forward(shortened),
    }
    return interleaved_medians(fns, runs, warmup=0)


def main() -> None:
    args = parse_args()
    load_before = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    with threadpool_limits(limits=args.threads):
        model = GPT(GPT2_SMALL, seed=0)
        ids = np.random.default_rng(0).integers(0, GPT2_SMALL.vocab_size, args.tokens)
        seconds = fast_tools(model, ids, args.runs)
        seconds.update(occlusion_times(model, ids, args.occlusion_runs))
    plain = seconds["plain forward"]
    ratios = {name: s / plain for name, s in seconds.items()}
    n = len(ids)
    ratios["occlusion / (n plain forwards of n - 1 tokens)"] = seconds["occlusion"] / (
        n * seconds["plain forward, n - 1 tokens"]
    )
    load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(f"GPT-2-small-shaped random model, n = {n} tokens, {args.threads} BLAS thread(s); "
          f"median of {args.runs} runs ({args.occlusion_runs} for occlusion); "
          f"1-min load average {load[0]} before, {load[1]} after, on {os.cpu_count()} cores")
    for name, s in seconds.items():
        print(f"    {name:40s} {s * 1e3:10.2f} ms   {ratios[name]:8.3f} x plain forward")
    key = "occlusion / (n plain forwards of n - 1 tokens)"
    print(f"    {key:40s} {ratios[key]:10.3f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "model": GPT2_SMALL.to_dict(),
        "tokens": n,
        "threads": args.threads,
        "runs": args.runs,
        "occlusion_runs": args.occlusion_runs,
        "load_average_before_after": load,
        "cpu_count": os.cpu_count(),
        "seconds": seconds,
        "ratio_to_plain_forward": ratios,
    }
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written: {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main()
