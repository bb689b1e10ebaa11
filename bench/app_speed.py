"""Server-side time of the app for a control change, on the default model.

Two measurements, medians over several repeats:
1. AppTest reruns of every page after a control change: moving the position slider (the trace
   comes from the cache) and typing a new prompt (a new forward pass). This is the work the
   server does for a click: run the page script, the forward pass if needed, build the figures.
2. Without Streamlit: one uncached forward pass with trace plus every figure of the residual
   stream, logits and what-if pages, built by the same tinygpt_app.charts / tinygpt.readouts
   functions.

The app's process settings (one BLAS thread, the GIL switch interval) are applied first, as
app.py does.

A bare `model.forward` of the same prompt, timed in the same run, is printed as the reference.
Target: median at most 100 ms per control change.

    python bench/app_speed.py                 # the default model (models/shakespeare.npz)
    python bench/app_speed.py --runs 15       # writes bench/results/app_speed.json
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

TARGET_MS = 100.0
PROMPT = ("ROMEO:\nBut soft, what light through yonder window breaks? It is the east, "
          "and Juliet is the sun. Arise, fair sun, and kill the envious moon, ")


def choose_models_dir() -> str:
    """The models folder the app would use; the test fixture if it holds no model yet."""
    if "TINYGPT_MODELS_DIR" not in os.environ and not any((ROOT / "models").glob("*.npz")):
        os.environ["TINYGPT_MODELS_DIR"] = str(ROOT / "tests" / "fixtures")
        os.environ["TINYGPT_DEFAULT_MODEL"] = "tiny.npz"
        return "the test fixture tiny.npz (no model in models/ yet)"
    from tinygpt_app.compute.models import default_model_id, models_dir

    return f"{default_model_id()} in {models_dir()}"


def time_pages(repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    """page -> (seconds of each position change, seconds of each prompt change)."""
    from streamlit.testing.v1 import AppTest

    results = {}
    pages = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pages").rglob("*.py"))
    for page in ["app.py", *pages]:
        at = AppTest.from_file(str(ROOT / page), default_timeout=120)
        at.query_params["prompt"] = PROMPT
        at.run()
        if at.exception or not at.sidebar.select_slider:
            print(f"  {page}: skipped (no position slider or an exception)")
            continue
        slider = at.sidebar.select_slider[0]
        n = len(slider.options)
        pos_times, prompt_times = [], []
        for i in range(repeats):
            slider = at.sidebar.select_slider[0]
            t0 = time.perf_counter()
            slider.set_value((i * 7) % n).run()
            pos_times.append(time.perf_counter() - t0)
        for i in range(repeats):
            t0 = time.perf_counter()
            at.sidebar.text_area[0].input(f"{PROMPT} take {i}").run()  # new ids: cache miss
            prompt_times.append(time.perf_counter() - t0)
        results[page] = (pos_times, prompt_times)
    return results


def time_figures(model, ids: np.ndarray, token_text, repeats: int) -> tuple[list, list]:
    """(seconds of forward+trace+figures of pages 4/5/8, seconds of a bare forward), per run;
    each timed in its own block."""
    from tinygpt import readouts as ti
    from tinygpt.network.model import Interventions
    from tinygpt_app.charts import attention, residual
    from tinygpt_app.charts import logits as logit_charts
    from tinygpt_app.charts.common import MAX_HEATMAP_CELLS

    labels = [f"{i}:{token_text(t)}" for i, t in enumerate(ids)]
    L, v, t = model.config.n_layer, model.config.vocab_size, len(ids) - 1

    def everything() -> None:
        logits, trace = model.run_with_trace(ids)
        stages = [s for s, _ in ti.residual_stages(L)]
        residual.norms_heatmap(ti.residual_norms(trace, L), stages, labels, "x").to_json()
        subs = [s for s, _ in ti.sublayer_stages(L)]
        residual.sublayer_writes(ti.sublayer_write_norms(trace, L), subs, labels, "x").to_json()
        pos = list(range(max(0, t - 23), t + 1))
        lens = ti.logit_lens(model, trace, k=3, positions=pos)
        text = [[token_text(i) for i in row] for row in lens.ids[:, :, 0]]
        residual.logit_lens(lens.probs[:, :, 0], text, lens.labels, [labels[p] for p in pos],
                            "x").to_json()
        cols = np.arange(v) if len(ids) * v <= MAX_HEATMAP_CELLS else ti.vocab_columns(
            logits, 10, MAX_HEATMAP_CELLS // len(ids))
        logit_charts.logits_heatmap(logits[:, cols], [str(c) for c in cols], labels,
                                    "x").to_json()
        logit_charts.logit_row(logits[t], [], "x").to_json()
        hits = ti.next_token_hits(logits, ids)
        logit_charts.shift_hits(np.exp(ti.target_logprobs(logits, ids)), hits, labels[:-1],
                                labels[:-1], "x").to_json()
        check = ti.tying_check(model, trace, t, int(np.argmax(logits[t])))
        logit_charts.tying_products(check.products, "x").to_json()
        _, trace2 = model.run_with_trace(ids, Interventions(no_causal_mask=True))
        attention.attention_map(ti.attention_with_mask(trace2, 0, 0), labels, "x").to_json()

    everything()  # warm-up
    full = list(common.timed(everything, repeats, warmup=0).values)
    common.settle()
    bare = list(common.timed(lambda: model.forward(ids), repeats, warmup=1).values)
    return full, bare


def figure_row(name: str, model, ids: np.ndarray, token_text, repeats: int) -> dict:
    full, bare = time_figures(model, ids, token_text, repeats)
    cfg = model.config
    return common.row(
        f"forward + trace + every figure of pages 4, 5 and 8, {name} (n = {len(ids)}, "
        f"d = {cfg.n_embd}, v = {cfg.vocab_size:,}, {cfg.n_layer} layers)",
        common.Measure(tuple(full)).in_ms(), common.Measure(tuple(bare)).in_ms(),
        "one bare model.forward of the same ids")


def measure(args) -> list[dict]:
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    which = choose_models_dir()
    print(f"model: {which}; prompt of {len(PROMPT)} characters; {args.runs} runs", flush=True)

    from tinygpt.checkpoint.files import load
    from tinygpt.network.model import GPT, GPTConfig
    from tinygpt_app import settings
    from tinygpt_app.compute.models import default_model_id, resolve_model_path
    from tinygpt_app.kit.labels import token_label

    settings.configure_process()  # as app.py does, before anything is timed
    model, tok = load(resolve_model_path(default_model_id()))
    ids = np.array(tok.encode(PROMPT)[-model.config.n_ctx:])
    rows = [figure_row("the shipped model", model, ids, lambda i: token_label(tok, i),
                       args.runs)]
    if model.config.n_ctx < GPTConfig().n_ctx:  # also a random default-size model, full context
        big = GPT(GPTConfig(), seed=0)
        ids_big = np.random.default_rng(0).integers(0, big.config.vocab_size, big.config.n_ctx)
        rows.append(figure_row("the default GPTConfig, random weights", big, ids_big, str,
                               args.runs))
    pages = time_pages(args.runs)
    everything_pos = [t for pos, _ in pages.values() for t in pos]
    everything_prompt = [t for _, new in pages.values() for t in new]
    target = f"<= {TARGET_MS:.0f} ms"
    for page, (pos, new) in pages.items():
        name = Path(page).stem.split("_", 1)[-1].replace("_", " ") if page != "app.py" else "Home"
        rows.append(common.row(f"a click on {name}: move the position",
                               common.Measure(tuple(pos)).in_ms(), target=target))
        rows.append(common.row(f"a click on {name}: a new prompt",
                               common.Measure(tuple(new)).in_ms(), target=target))
    if pages:
        rows.append(common.row("a click, every page: move the position",
                               common.Measure(tuple(everything_pos)).in_ms(), target=target))
        rows.append(common.row("a click, every page: a new prompt",
                               common.Measure(tuple(everything_prompt)).in_ms(), target=target))
    return rows


def parse_args():
    return common.parser(__doc__, threads="1", runs=9, warmup=1).parse_args()


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
