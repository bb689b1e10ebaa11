"""Attention: which earlier tokens each token looks at, per layer and head, and why."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt.readouts import attention_with_mask, query_key_check
from tinygpt_app.charts import attention as charts
from tinygpt_app.charts.common import MAX_HEATMAP_CELLS, first_row_within_budget
from tinygpt_app.compute import caches
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import ATTENTION_VIEW, HEAD, KEY_TOKEN, LAYER
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import shape
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control, start_from
from tinygpt_app.kit.widgets import explain, grid_table, number_table, series_table, show_chart
from tinygpt_app.sections.explain import draw_all_heads
from tinygpt_app.sections.grouped_heads import draw_grouped_heads
from tinygpt_app.sections.rotary import draw_rotary

VIEWS = {  # choice -> (file name, title, explanation, formula)
    "weights (after softmax)": (
        "weights", "Attention weights",
        "Row i is the query token. Its weights say how much of each key token's value vector "
        "it takes: they are positive and each row sums to 1. **Grey crossed cells are masked**: a "
        "token may not look at tokens that come after it (that would be cheating when "
        "predicting the next one). A dark cell is a small weight, not a masked one.",
        (r"\mathrm{weights} = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{h_s}} + M\right)",
         r"M_{ij} = \begin{cases}0 & j \le i\\ -\infty & j > i\end{cases}")),
    "scores before the mask": (
        "scores", "Scores before the mask",
        "The raw scores: every query dotted with every key, divided by √hs so they do not "
        "grow with the head size. Nothing is hidden yet: the upper triangle holds scores "
        "for future tokens, which the mask is about to remove.",
        r"\mathrm{scores}_{ij} = \frac{q_i \cdot k_j}{\sqrt{h_s}}"),
    "scores after the mask": (
        "scores_masked", "Scores after the mask",
        "The same scores after adding the mask: future positions become −∞ (grey), so "
        "softmax gives them exactly 0 weight.",
        r"\mathrm{scores}_{ij} + M_{ij}"),
}


PARTS = ["The map", "One score by hand", "What the head hands on", "Every head",
         "Rotary positions", "Shared keys and values"]
MODERN = {"Rotary positions": lambda config: config.position == "rope",  # the parts some
          "Shared keys and values": lambda config: config.group_size > 1}  # models have


def draw_map(state: AppState, trace, layer: int, head: int) -> None:
    n, hs = state.n, state.head_size
    view = control(st.radio, "Show", "attention.view", ATTENTION_VIEW, default=next(iter(VIEWS)),
                   choices=list(VIEWS), horizontal=True)
    name, title, text, formula = VIEWS[view]
    explain(text, formula)
    # the map and its grey mask layer both count: keep the page under the cell budget
    start = first_row_within_budget(n, 2 * n, MAX_HEATMAP_CELLS * 3 // 4)
    labels = state.labels[start:]
    if name == "weights":
        z = attention_with_mask(trace, layer, head)[start:]
    else:
        z = trace[f"blocks.{layer}.attn.{name}"][head][start:]
    fig = charts.attention_map(
        z, state.labels, f"{title}, block {layer}, head {head}  (n × n = {n} × {n})",
        colorbar_title="weight" if name == "weights" else "score",
        diverging=name != "weights", y_labels=labels)
    show_chart(fig, f"attention_{name}_layer{layer}_head{head}",
               grid_table(z, labels, state.labels, "query", "key"), key="attention.map",
               alt=alt_text.attention(z, labels, state.labels, max(state.position - start, -1),
                                      "weight" if name == "weights" else "score"))
    note = f" Only the last {n - start} query rows are drawn." if start else ""
    st.caption(f"n = {n} tokens, head size hs = {hs}. Grey with a cross (×) = masked (a later "
               f"token); the hover says so too.{note}")


def draw_query_key(state: AppState, trace, layer: int, head: int) -> int:
    """The score of the inspected query and a chosen key, rebuilt; returns the key chosen."""
    st.header("One score, by hand: query · key")
    query = state.position
    keys = [int(j) for j in ti.visible_keys(trace, layer, head, query)]
    st.markdown(f"The query is the inspected position **{plain(state.labels[query])}** "
                "(change it in the sidebar). Pick a key it is allowed to look at:")
    # a new layer, head or query starts from the query itself (the last key it may see)
    start_from("attention.key", keys[-1], origin=(layer, head, query, state.n), spec=KEY_TOKEN)
    key = control(st.selectbox, "Key token", "attention.key", KEY_TOKEN, default=keys[-1],
                  choices=keys, format_func=lambda j: state.labels[j])
    check = query_key_check(trace, layer, head, query, key)
    hs = state.head_size
    explain(
        f"The query vector q (what token {query} is looking for) and the key vector k (what "
        f"token {key} offers) each have hs = {hs} numbers. Multiply them dimension by dimension, "
        "add the products up, and divide by √hs: that is exactly the score in the map.",
        r"\mathrm{score} = \frac{1}{\sqrt{h_s}}\sum_{j=1}^{h_s} q_j\,k_j",
    )
    if state.config.position == "rope":
        st.markdown("Here q and k are the vectors **after their turns** (rotary positions, "
                    "its own tab): the score is made of those.")
    series = {"q (query)": check.q, "k (key)": check.k, "q × k": check.products}
    fig = charts.query_key_bars(
        series,
        shape(f"q[{query}], k[{key}] and their product, block {layer} head {head}", hs=hs))
    show_chart(fig, f"query{query}_key{key}_layer{layer}_head{head}",
               series_table(series, range(hs), "dimension in the head"), key="attention.qk",
               alt=alt_text.lines(series, [f"dimension {j}" for j in range(hs)],
                                  f"q of {state.labels[query]}, k of {state.labels[key]} "
                                  "and their product"))
    table = pd.DataFrame({
        "step": ["Σ q_j k_j", f"÷ √{hs}", "score in the trace", "difference"],
        "value": [check.dot, check.scaled, check.score, check.difference],
    })
    number_table(table, "%+.6f", hide_index=True)
    weight = float(trace[f"blocks.{layer}.attn.weights"][head, query, key])
    st.markdown(f"After softmax over the row this score becomes the weight **{weight:.4f}**.")
    return key


def draw_head_output(state: AppState, trace, layer: int, head: int) -> None:
    st.header("What the head hands on")
    n, hs = state.n, state.head_size
    explain(
        "Each token's output from this head is a weighted average of the value vectors of the "
        "tokens it may see, with the weights of the map. The heads' outputs are then placed "
        f"side by side ({state.n_head} × {hs} = {state.d} numbers per token) and mixed by one more "
        "matrix before being added to the residual stream.",
        r"\mathrm{head}_i = \sum_{j \le i} \mathrm{weights}_{ij}\, v_j",
    )
    z, dims = trace[f"blocks.{layer}.attn.heads"][head], [str(j) for j in range(hs)]  # (n, hs)
    fig = charts.head_output_heatmap(
        z, shape(f"Output of head {head}, block {layer}", n=n, hs=hs), state.labels, dims)
    show_chart(fig, f"head_output_layer{layer}_head{head}",
               grid_table(z, state.labels, dims, "position: token", "dimension in the head"),
               key="attention.head_output",
               alt=alt_text.grid(z, state.labels, [f"dimension {j}" for j in dims],
                                 f"Output of head {head}, block {layer}"))


with page("Attention") as state:
    _, trace = caches.get_trace(state)
    left, right = st.columns(2)
    # in the link (?layer=&head=): "open block 3 head 1" from the Why this token? page
    layer = control(left.selectbox, "Block", "attention.layer", LAYER,
                    hi=state.n_layer - 1, options=range(state.n_layer))
    head = control(right.selectbox, "Head", "attention.head", HEAD,
                   hi=state.n_head - 1, options=range(state.n_head))
    # one part at a time (issue 49: on a Llama model the page was ~8,000 px long); a part this
    # model does not have is one line under the tabs, not a tab
    parts = [p for p in PARTS if p not in MODERN or MODERN[p](state.config)]
    tabs = dict(zip(parts, st.tabs(parts), strict=True))
    with tabs["The map"]:
        draw_map(state, trace, layer, head)
    with tabs["One score by hand"]:
        key = draw_query_key(state, trace, layer, head)
    with tabs["What the head hands on"]:
        draw_head_output(state, trace, layer, head)
    with tabs["Every head"]:
        draw_all_heads(state, trace)
    with tabs.get("Rotary positions") or st.container():
        draw_rotary(state, trace, layer, head, key)
    with tabs.get("Shared keys and values") or st.container():
        draw_grouped_heads(state, head)
