"""The activation-patching grid's cost, in forwards of the prompt (issue 47).

What: tinygpt.readouts.activation_patching on a GPT-2-small-shaped model (12 layers, 768 dims,
12 heads, vocab 50,257, random weights) for a clean and a corrupted prompt of T = 16 tokens,
each site (resid_pre, attn_out, mlp_out), against n_layer x T plain forwards of the prompt
(model.forward(ids): what patching every cell by a forward of its own costs).
How: one thread (its own process, threads set before NumPy loads, threadpoolctl pinned).
Rounds alternate: in each, the plain forward is timed (median of 5, after a warm-up), then each
site's grid once; a round's ratio is grid / (n_layer x T x forward), and the row's ratio is the
median of the rounds' ratios (the machine is shared: neighbouring blocks see the same load).
Target: at most 0.6x. Results: bench/results/interventions.json.

    python bench/interventions.py                  # 1 thread, 5 rounds
    python bench/interventions.py --runs 2 --results-dir /tmp/smoke
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench import common  # noqa: E402

TARGET = "<= 0.6x"
T = 16


def parse_args():
    p = common.parser(__doc__, threads="1", runs=5, warmup=1)
    return p.parse_args()


def measure(args) -> list[dict]:
    import numpy as np

    from tinygpt import readouts as ti
    from tinygpt.network.model import GPT, GPTConfig

    common.limit_threads(int(args.threads))
    config = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)
    model = GPT(config, seed=0)
    rng = np.random.default_rng(0)
    clean = rng.integers(0, config.vocab_size, T)
    corrupt = clean.copy()
    corrupt[3:6] = rng.integers(0, config.vocab_size, 3)  # a few tokens differ, as in a pair
    cells = config.n_layer * T
    print(f"GPT-2 small shape: {common.shape(config)}, T={T}, {cells} cells", flush=True)
    for _ in range(args.warmup):
        model.forward(clean)
        ti.activation_patching(model, clean, corrupt, 11)
    forwards, grids = [], {site: [] for site in ti.SITES}
    for _ in range(args.runs):
        forwards.append(common.timed(lambda: model.forward(clean), 5, 1).median)
        for site in ti.SITES:
            common.settle(0.2)
            grids[site].append(common.timed(
                lambda s=site: ti.activation_patching(model, clean, corrupt, 11, s), 1, 0
            ).values[0])
    reference = common.Measure(tuple(cells * f for f in forwards))
    rows = [common.row(f"forward, GPT-2 small shape, T={T}",
                       common.Measure(tuple(forwards)).in_ms(),
                       note="model.forward(ids): the unit of the grid's cost")]
    for site, times in grids.items():
        ratios = [g / (cells * f) for g, f in zip(times, forwards, strict=True)]
        rows.append(common.row(
            f"patching grid, {site}, GPT-2 small shape, T={T}", common.Measure(tuple(times)),
            reference, f"{cells} forwards of the prompt (n_layer x T), timed in each round",
            TARGET, paired_ratios=ratios,
            note="the corrupted run shared below the patched layer, positions batched"))
    return rows


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
