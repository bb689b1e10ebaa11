"""Attention: which earlier tokens each token looks at, per layer and head, and why."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import ui
from tinygpt.readouts import attention_with_mask, query_key_check

VIEWS = ("weights (after softmax)", "scores before the mask", "scores after the mask")


def draw_map(state: ui.AppState, trace, layer: int, head: int) -> None:
    n, hs = state.n, state.head_size
    p = f"blocks.{layer}.attn"
    view = st.radio("Show", VIEWS, horizontal=True, key="attn_view")
    where = f"layer {layer}, head {head}  (n × n = {n} × {n})"
    # the map and its grey mask layer both count: keep the page under the cell budget
    start = ui.first_row_within_budget(n, 2 * n, ui.MAX_HEATMAP_CELLS * 3 // 4)
    rows, labels = slice(start, None), state.labels[start:]
    if view == VIEWS[0]:
        ui.explain(
            "Row i is the query token. Its weights say how much of each key token's value vector "
            "it takes: they are positive and each row sums to 1. **Grey cells are masked**: a "
            "token may not look at tokens that come after it (that would be cheating when "
            "predicting the next one). A dark cell is a small weight, not a masked one.",
            r"\mathrm{weights} = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{h_s}} + M\right),"
            r"\quad M_{ij} = \begin{cases}0 & j \le i\\ -\infty & j > i\end{cases}",
        )
        name, z = "weights", attention_with_mask(trace, layer, head)[rows]
        fig = ui.attention_heatmap(z, state.labels, f"Attention weights, {where}",
                                   y_labels=labels)
    elif view == VIEWS[1]:
        ui.explain(
            "The raw scores: every query dotted with every key, divided by √hs so they do not "
            "grow with the head size. Nothing is hidden yet: the upper triangle holds scores "
            "for future tokens, which the mask is about to remove.",
            r"\mathrm{scores}_{ij} = \frac{q_i \cdot k_j}{\sqrt{h_s}}",
        )
        name, z = "scores", trace[f"{p}.scores"][head][rows]
        fig = ui.attention_heatmap(z, state.labels, f"Scores before the mask, {where}",
                                   colorbar_title="score", diverging=True,
                                   y_labels=labels)
    else:
        ui.explain(
            "The same scores after adding the mask: future positions become −∞ (grey), so "
            "softmax gives them exactly 0 weight.",
            r"\mathrm{scores}_{ij} + M_{ij}",
        )
        name, z = "scores_masked", trace[f"{p}.scores_masked"][head][rows]
        fig = ui.attention_heatmap(z, state.labels, f"Scores after the mask, {where}",
                                   colorbar_title="score", diverging=True,
                                   y_labels=labels)
    ui.show_chart(fig, f"attention_{name}_layer{layer}_head{head}",
                  ui.grid_table(z, labels, state.labels, "query", "key"))
    note = f" Only the last {n - start} query rows are drawn." if start else ""
    st.caption(f"n = {n} tokens, head size hs = {hs}. Grey = masked (a later token).{note}")


def draw_query_key(state: ui.AppState, trace, layer: int, head: int) -> None:
    st.subheader("One score, by hand: query · key")
    query = state.position
    masked = np.isneginf(trace[f"blocks.{layer}.attn.scores_masked"][head, query])
    keys = [j for j in range(state.n) if not masked[j]]
    st.markdown(f"The query is the inspected position **{state.labels[query]}** (change it in "
                "the sidebar). Pick a key it is allowed to look at:")
    key = st.selectbox("Key token", keys, index=len(keys) - 1, format_func=lambda j:
                       state.labels[j], key=f"attn_key_{layer}_{head}_{query}_{state.n}")
    check = query_key_check(trace, layer, head, query, key)
    hs = state.head_size
    ui.explain(
        f"The query vector q (what token {query} is looking for) and the key vector k (what "
        f"token {key} offers) each have hs = {hs} numbers. Multiply them dimension by dimension, "
        "add the products up, and divide by √hs: that is exactly the score in the map above.",
        r"\mathrm{score} = \frac{1}{\sqrt{h_s}}\sum_{j=1}^{h_s} q_j\,k_j",
    )
    series = {"q (query)": check.q, "k (key)": check.k, "q × k": check.products}
    fig = ui.grouped_bars(
        series,
        ui.shape(f"q[{query}], k[{key}] and their product, layer {layer} head {head}", hs=hs),
        x_title="dimension in the head")
    ui.show_chart(fig, f"query{query}_key{key}_layer{layer}_head{head}",
                  ui.series_table(series, range(hs), "dimension in the head"))
    table = pd.DataFrame({
        "step": ["Σ q_j k_j", f"÷ √{hs}", "score in the trace", "difference"],
        "value": [check.dot, check.scaled, check.score, check.scaled - check.score],
    })
    ui.number_table(table, "%+.6f", hide_index=True)
    weight = float(trace[f"blocks.{layer}.attn.weights"][head, query, key])
    st.markdown(f"After softmax over the row this score becomes the weight **{weight:.4f}**.")


def draw_head_output(state: ui.AppState, trace, layer: int, head: int) -> None:
    st.subheader("What the head hands on")
    n, hs = state.n, state.head_size
    ui.explain(
        "Each token's output from this head is a weighted average of the value vectors of the "
        "tokens it may see, with the weights above. The heads' outputs are then placed side by "
        f"side ({state.n_head} × {hs} = {state.d} numbers per token) and mixed by one more "
        "matrix before being added to the residual stream.",
        r"\mathrm{head}_i = \sum_{j \le i} \mathrm{weights}_{ij}\, v_j",
    )
    z, dims = trace[f"blocks.{layer}.attn.heads"][head], [str(j) for j in range(hs)]  # (n, hs)
    fig = ui.heatmap(z, ui.shape(f"Output of head {head}, layer {layer}", n=n, hs=hs),
                     y_labels=state.labels, x_labels=dims, x_title="dimension in the head",
                     y_title="position: token")
    ui.show_chart(fig, f"head_output_layer{layer}_head{head}",
                  ui.grid_table(z, state.labels, dims, "position: token", "dimension in the head"))


def main() -> None:
    ui.page_setup("Attention")
    with ui.guard():
        state = ui.sidebar()
        if state is None or not state.ready:
            return
        _, trace = ui.get_trace(state)
        left, right = st.columns(2)
        layer = left.selectbox("Layer", range(state.n_layer), key="attn_layer")
        head = right.selectbox("Head", range(state.n_head), key="attn_head")
        draw_map(state, trace, layer, head)
        draw_query_key(state, trace, layer, head)
        draw_head_output(state, trace, layer, head)


main()
