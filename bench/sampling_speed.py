"""Speed of the sampling and decoding pages, on the default model.

1. Moving a sampling slider (page 6): median server-side time of an AppTest rerun after the
   temperature / top-p / top-k / seed change (the whole script: an upper bound on the
   fragment-only rerun the browser gets), and the fragment's own work without Streamlit
   (process_logits, the ranking, the draw, the four figures). Target: median <= 50 ms.
2. Greedy generation of 100 new tokens with the KV cache (page 7). Target: < 1 s.

A bare `model.forward` of the prompt, timed in the same run, is printed as the reference.

    python bench/sampling_speed.py
    python bench/sampling_speed.py --runs 21    # writes bench/results/sampling_speed.json
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere

from bench import common  # noqa: E402

SLIDER_TARGET_MS, GREEDY_TARGET_S = 50.0, 1.0
PROMPT = ("ROMEO:\nBut soft, what light through yonder window breaks? It is the east, "
          "and Juliet is the sun.")


def choose_models_dir() -> str:
    """The repo's models folder if it holds a model, else the test fixture (with a note)."""
    if "TINYGPT_MODELS_DIR" in os.environ:
        return f"from TINYGPT_MODELS_DIR={os.environ['TINYGPT_MODELS_DIR']}"
    if any((ROOT / "models").glob("*.npz")):
        return "the default model"
    os.environ.setdefault("TINYGPT_MODELS_DIR", str(ROOT / "tests" / "fixtures"))
    os.environ.setdefault("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return "the test fixture tiny.npz (no model in models/ yet)"


def time_slider_reruns(repeats: int) -> dict[str, list[float]]:
    """control -> seconds of each AppTest rerun of page 6 after moving it."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / "decoding" / "7_Softmax_and_sampling.py"),
                           default_timeout=120)
    at.query_params["prompt"] = PROMPT
    at.run()
    assert not at.exception, at.exception
    moves = {
        "temperature": lambda i: at.slider(key="sampling.temperature").set_value(
            0.3 + 0.1 * (i % 20)),
        "top_p": lambda i: at.slider(key="sampling.top_p").set_value(0.2 + 0.03 * (i % 25)),
        "top_k": lambda i: at.number_input(key="sampling.top_k").set_value(5 + i % 50),
        "seed": lambda i: at.number_input(key="sampling.seed").set_value(i),
    }
    results = {}
    for name, move in moves.items():
        times = []
        for i in range(repeats):
            widget = move(i)
            t0 = time.perf_counter()
            widget.run()
            times.append(time.perf_counter() - t0)
        assert not at.exception, at.exception
        results[name] = times
    return results


def time_fragment_work(model, tok, ids: np.ndarray, repeats: int) -> list[float]:
    """Seconds of what the fragment computes and draws, without Streamlit, per run."""
    from tinygpt.decoding.generation import (
        pick_token,
        process_logits,
        softmax_with_temperature,
    )
    from tinygpt.readouts import draw_segments, entropy, sorted_distribution
    from tinygpt_app.charts import sampling

    row = model.forward(ids)[-1]  # (v,) the cached logits on the page
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        pr = process_logits(row, 0.5 + 0.05 * i, None, 0.9)
        raw = softmax_with_temperature(row)
        order = sorted_distribution(raw).order
        [float(entropy(p)) for p in (raw, pr.probs, pr.final_probs)]
        shown = order[:50]
        labels = [tok.token_display(int(t)) + f" ({int(t)})" for t in shown]
        sampling.ranked_bars(labels, pr.probs[shown], pr.kept[shown], "t").to_json()
        ranked = sorted_distribution(pr.probs_after_top_k)
        n_kept = int(pr.kept.sum())
        m = min(len(row), 2000, max(50, n_kept + 20))
        sampling.cumulative_curve(ranked.cumulative[:m], 0.9, n_kept, "t").to_json()
        kept = [int(t) for t in order if pr.kept[t]][:20]
        sampling.renormalised([str(t) for t in kept], pr.probs[kept], pr.final_probs[kept],
                              "t").to_json()
        u = float(np.random.default_rng(i).random())
        token, _ = pick_token(pr.final_probs, u)
        seg = draw_segments(pr.final_probs)
        sampling.draw_bar(seg.starts, seg.widths, [str(t) for t in seg.tokens], u, 0,
                          "t").to_json()
        times.append(time.perf_counter() - t0)
    return times


def time_greedy(model, ids: np.ndarray, repeats: int) -> tuple[list, list, int]:
    """(seconds of 100 greedy tokens, seconds of one bare forward of the prompt, tokens), each
    timed in its own block."""
    from tinygpt.decoding.generation import generate

    max_new = min(100, model.config.n_ctx - len(ids))
    result = generate(model, ids, max_new, strategy="greedy", record_steps=False)
    gen = common.timed(lambda: generate(model, ids, max_new, strategy="greedy",
                                        record_steps=False), repeats, warmup=1)
    common.settle()
    fwd = common.timed(lambda: model.forward(ids), repeats, warmup=1)
    return list(gen.values), list(fwd.values), len(result.tokens)


def measure(args) -> list[dict]:
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    which = choose_models_dir()

    from tinygpt_app import settings
    from tinygpt_app.compute.models import default_model_id, load_model

    settings.configure_process()  # the app's thread and switch-interval settings, as app.py
    model_id = default_model_id()
    model, tok = load_model(model_id)
    cfg = model.config
    ids = np.asarray(tok.encode(PROMPT), dtype=np.int64)[-(cfg.n_ctx // 2):]
    print(f"model: {model_id} ({which}); {cfg.n_layer} layers, d = {cfg.n_embd}, "
          f"v = {cfg.vocab_size:,}, n_ctx = {cfg.n_ctx}; prompt of {len(ids)} tokens",
          flush=True)
    slider = f"<= {SLIDER_TARGET_MS:.0f} ms"
    rows = [common.row(f"Softmax and sampling: move {name} (a whole-page AppTest rerun)",
                       common.Measure(tuple(times)).in_ms(), target=slider)
            for name, times in time_slider_reruns(args.runs).items()]
    work = time_fragment_work(model, tok, ids, args.runs)
    rows.append(common.row("Softmax and sampling: the fragment's own work (filters, four "
                           "figures to JSON)", common.Measure(tuple(work)).in_ms(),
                           target=slider))
    gen, fwd, n = time_greedy(model, ids, max(3, args.runs // 3))
    rows.append(common.row(f"greedy, {n} new tokens with the KV cache (shipped model)",
                           common.Measure(tuple(gen)).in_ms(), common.Measure(tuple(fwd)).in_ms(),
                           f"one bare forward of the {len(ids)}-token prompt",
                           note=f"target: under {GREEDY_TARGET_S:.0f} s"))
    return rows


def parse_args():
    return common.parser(__doc__, threads="1", runs=15, warmup=1).parse_args()


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
