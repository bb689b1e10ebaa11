"""The Grouped-query attention section of the Attention page: which query heads share which
key/value head, drawn, and the KV cache's bytes per token for this model against the same
model with one key/value head per query head. Numbers from tinygpt.readouts.modern.grouped_heads
(the bytes through tinygpt.readouts.kv_reuse, as the Decoding page's KV-cache view)."""

from __future__ import annotations

import streamlit as st

from tinygpt.readouts.modern.grouped_heads import head_groups
from tinygpt_app.charts.modern import grouped_heads as charts
from tinygpt_app.kit.state import AppState
from tinygpt_app.kit.widgets import explain, part_elsewhere, series_table, show_chart


def draw_grouped_heads(state: AppState, head: int) -> None:
    """The whole section; `head`: the query head chosen at the top of the page."""
    groups = head_groups(state.model)
    H, KV, G = groups.n_head, groups.kv_heads, groups.group_size
    if G == 1:
        part_elsewhere("Grouped-query attention",
                       f"each of its {H} heads has keys and values of its own, as in GPT-2",
                       lambda p: 0 < p.get("n_kv_head", 0) < p.get("n_head", 0), state.model_id)
        return
    st.header("Grouped-query attention: heads that share keys and values")
    explain(
        f"This model has {H} query heads but only {KV} key/value heads: every {G} query heads "
        "read the **same** keys and values, each with a query of its own. Each head still "
        "looks where it wants (its own weights); what is shared is what it can look at. The "
        "KV cache, which keeps every past token's keys and values, shrinks by the same factor.",
        r"\begin{gathered}\text{query head } h \text{ reads key/value head } \lfloor h / G "
        rf"\rfloor\\ G = {H} / {KV} = {G}\end{{gathered}}")  # stacked: a phone's 390 px
    kv = int(groups.kv_head_of[head])
    sharing = [int(h) for h in groups.queries_of(kv)]
    show_chart(charts.sharing(groups.kv_head_of,
                              f"{H} query heads, {KV} key/value heads: head {head} reads kv{kv}"),
               "grouped_heads", series_table({"key/value head": groups.kv_head_of}, range(H),
                                             "query head"),
               key="attention.gqa_sharing",
               alt=(f"{H} query heads share {KV} key/value heads, {G} each: query heads "
                    + "; ".join(f"{', '.join(map(str, groups.queries_of(g)))} read kv{g}"
                                for g in range(KV)) + "."))
    others = [str(h) for h in sharing if h != head]
    st.caption(f"Head {head} shares its keys and values with head{'s' if len(others) > 1 else ''}"
               f" {', '.join(others)}.")
    labels = [f"this model ({KV} key/value heads)", f"one per query head ({H})"]
    values = [groups.bytes_per_token, groups.bytes_per_token_one_kv_per_query]
    show_chart(charts.bytes_per_token(labels, values, "KV cache: bytes per token"),
               "kv_bytes_per_token", series_table({"bytes per token": values}, labels, "layout"),
               key="attention.gqa_bytes",
               alt=(f"KV cache bytes per token: this model {values[0]:,}, with one key/value "
                    f"head per query head {values[1]:,}: {groups.saving:g} times more."))
    tokens = state.config.n_ctx
    st.caption(f"Keys and values of {state.n_layer} blocks, {KV} heads of {state.head_size} "
               f"numbers, {state.model.dtype.itemsize} bytes each. At the full context of "
               f"{tokens:,} tokens: {groups.bytes_per_token * tokens / 2**20:,.1f} MiB instead "
               f"of {groups.bytes_per_token_one_kv_per_query * tokens / 2**20:,.1f} MiB, for "
               "one sequence.")
