"""The KV cache section of the Decoding page: for the greedy run the page shows, which keys
and values each step computes and which it reads back, the bytes the cache holds, and the work
saved against recomputing the whole sequence. Every number is tinygpt.kv_cache_reuse's."""

from __future__ import annotations

import streamlit as st

from tinygpt.decoding.generation import GenerationResult
from tinygpt.readouts.kv_reuse import KVCacheReuse, kv_cache_reuse, work_saved
from tinygpt_app.charts import kv_cache as charts
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.state import AppState
from tinygpt_app.kit.widgets import explain, series_table, show_chart


def _kb(nbytes: int) -> str:
    return f"{nbytes / 1024:,.1f} kB"


def draw_reuse(reuse: KVCacheReuse) -> None:
    steps = range(len(reuse.computed))
    fig = charts.reuse_per_step(
        reuse.computed, reuse.reused,
        f"Keys and values at each of the {len(reuse.computed)} steps: new vs reused "
        f"(n = {reuse.prompt_length}, per layer)")
    table = series_table({"computed": reuse.computed, "reused": reuse.reused,
                          "cache length": reuse.cache_length}, steps, "step")
    show_chart(fig, "kv_reuse", table, key="decoding.kv_reuse",
               alt=alt_text.lines({"computed": reuse.computed, "reused": reuse.reused},
                                  [f"step {i}" for i in steps], "Keys and values per step"))


def draw_bytes(reuse: KVCacheReuse) -> None:
    fig = charts.bytes_held(
        reuse.bytes_held, reuse.bytes_allocated,
        f"Bytes the cache holds (dotted: {_kb(reuse.bytes_allocated)} allocated: the prompt "
        f"read {_kb(reuse.bytes_prompt_read)} + its row {_kb(reuse.bytes_per_row)})")
    show_chart(fig, "kv_bytes", series_table({"bytes held": reuse.bytes_held},
                                             range(len(reuse.bytes_held)), "step"),
               key="decoding.kv_bytes",
               alt=alt_text.lines({"bytes held": reuse.bytes_held},
                                  [f"step {i}" for i in range(len(reuse.bytes_held))],
                                  "The cache's size", ",.0f"))


def draw_work(reuse: KVCacheReuse) -> None:
    saved = work_saved(reuse)
    c = st.columns(3)
    c[0].metric("Multiply-adds with the cache", f"{saved.cached:,}")
    c[1].metric("Recomputing every step", f"{saved.recompute:,}")
    c[2].metric("Work saved: times less", f"{saved.ratio:.2f}×")
    fig = charts.work_per_step(reuse.multiply_adds_cached, reuse.multiply_adds_recompute,
                               "Multiply-adds at each step: cached vs recomputed")
    table = series_table({"with cache": reuse.multiply_adds_cached,
                          "recompute": reuse.multiply_adds_recompute},
                         range(len(reuse.multiply_adds_cached)), "step")
    show_chart(fig, "kv_work", table, key="decoding.kv_work",
               alt=alt_text.lines({"with the cache": reuse.multiply_adds_cached,
                                   "recomputing": reuse.multiply_adds_recompute},
                                  list(table.index), "Multiply-adds per step", ",.0f"))


def draw_kv_cache(state: AppState, greedy: GenerationResult, asked: int | None = None) -> None:
    """The section for the page's greedy run (its prompt and its new tokens); `asked`: the new
    tokens the runs were asked for (their cache rows have room for that many)."""
    new_tokens = len(greedy.tokens)
    prompt_length = len(greedy.all_ids) - new_tokens
    st.header("The KV cache: what each step reuses")
    explain(
        "Attention needs the keys and values of every earlier token. They never change once "
        "computed, so the generator keeps them in a **KV cache**: step 0 computes them for the "
        "whole prompt; every later step feeds in only the token just chosen, computes its key "
        "and value in each layer, and reads all the others back. Without the cache each step "
        "would run the whole sequence again.",
        r"s \ge 1:\ 1\ \text{new},\ n + s - 1\ \text{reused}")  # short: fits a phone
    if new_tokens == 0:
        st.info("The greedy run made no tokens, so there is no cache to show.")
        return
    reuse = kv_cache_reuse(state.model, prompt_length, new_tokens,
                           asked=max(asked or 0, new_tokens))
    st.caption(f"The greedy run above: {len(reuse.computed)} steps after {prompt_length} "
               f"prompt tokens; one position's key and value take "
               f"{reuse.bytes_per_position:,} bytes in each of {reuse.n_layer} layers. The "
               f"prompt is read once ({reuse.bytes_prompt_read:,} bytes of keys and values); "
               f"each run's row then has room for the prompt and the tokens asked for "
               f"({reuse.bytes_per_row:,} bytes). Step 0 reads out the prompt's last "
               f"position only: the next token's scores.")
    draw_reuse(reuse)
    draw_bytes(reuse)
    draw_work(reuse)
