"""Sections of the explain work that live on existing pages: the surprise map (Logits page)
and every head at a glance (Attention page). Each is one call from its page; they only read
and draw (the numbers come from tinygpt.readouts.explain and tinygpt.readouts.surprise)."""

from __future__ import annotations

import streamlit as st

from tinygpt.readouts.explain import glance_from_maps, surprise_summary
from tinygpt_app.charts import explain as charts
from tinygpt_app.charts import sampling as sampling_charts
from tinygpt_app.charts.common import MAX_HEATMAP_CELLS
from tinygpt_app.compute import explain_caches, readout_cache
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import set_widget, widget_value
from tinygpt_app.kit.state import AppState, set_control
from tinygpt_app.kit.widgets import chips, explain, grid_table, series_table, show_chart

HEADS_CELLS = MAX_HEATMAP_CELLS // 4  # the small multiples share the page with the big map


def draw_surprise(state: AppState, page: str) -> None:
    """The prompt coloured by how surprised the model was by each token (−log p)."""
    st.header("Surprise map: which tokens did the model not see coming?")
    nats = explain_caches.surprise_for(state)
    summary = surprise_summary(nats)
    if summary is None:
        st.info("One token has nothing before it to be predicted from: type a longer prompt.")
        return
    words = [token_label(state.tokenizer, t) for t in state.ids]
    explain(
        "For each token of the prompt, the probability the model gave it one step before, "
        "as a surprise −log p: 0 when the model was sure of it, large when it did not expect it. "
        f"The mean over the prompt, **{summary.mean:.3f} nats**, is exactly the cross-entropy "
        "loss: the number the Training page plots (there over the training text, here over "
        f"your prompt). The biggest surprise: **{plain(words[summary.worst + 1])}** "
        f"({summary.worst_value:.2f} nats, p = {summary.worst_prob:.4f}).",
        (r"\text{surprise}_t = -\log p(x_{t+1} \mid x_{\le t})",
         r"\text{loss} = \frac{1}{n-1}\sum_t \text{surprise}_t"))
    colours = ["#ffffff", *charts.heat_colours(nats, diverging=False)]
    captions = ["first", *[f"{v:.2f}" for v in nats]]
    chips(list(zip(words, captions, strict=True)), colours=colours)
    st.caption("Darker orange: more surprising. The first token has no prediction.")
    labels = state.labels[1:]
    fig = charts.surprise_bars(labels, nats, summary.mean,
                               f"Surprise of each token (mean {summary.mean:.3f} nats = loss)")
    show_chart(fig, "surprise", series_table({"surprise (nats)": nats}, labels,
                                             "position: token that came"),
               key=f"{page}.surprise",
               alt=alt_text.bars(labels, nats, f"Surprise in nats (mean {summary.mean:.3f})"))


def _open_head(key: str) -> None:
    layer, head = widget_value(key)
    set_control("attention.layer", layer)
    set_control("attention.head", head)


def draw_all_heads(state: AppState, trace) -> None:
    """Every layer x head as small multiples (BertViz's model view); pick one to open it."""
    st.header("All heads at a glance")
    maps = readout_cache.attention_maps(state, trace)  # (L, H, n, n), once per trace
    glance = glance_from_maps(maps, state.position, HEADS_CELLS)
    if glance.full:
        explain(f"All {state.n_layer * state.n_head} heads side by side: block by row, head by "
                "column, each the same n × n map as above (grey: masked). Heads that look at the "
                "previous token draw a diagonal line; heads that look at the first token, a "
                "column on the left.")
        title = f"Attention weights of every head (n × n = {state.n} × {state.n} each)"
    else:
        explain(f"With {state.n} tokens, {state.n_layer * state.n_head} full maps would be too "
                f"many cells to draw, so each head shows only the row of the inspected position "
                f"**{plain(state.labels[state.position])}**: where that token looks.")
        title = f"Where {state.labels[state.position]} looks, in every head"
    rows = [state.labels[i] for i in glance.rows]
    fig = charts.heads_small_multiples(glance.maps, state.labels, rows, title)
    L, H, R, _ = glance.maps.shape
    table = grid_table(glance.maps.reshape(L * H * R, -1),
                       [f"block {i} head {h} · {rows[r]}" for i in range(L) for h in range(H)
                        for r in range(R)],
                       state.labels, rows="head · query", columns="key")
    show_chart(fig, "attention_all_heads", table, key="attention.all_heads",
               alt=alt_text.grid(table.to_numpy(), list(table.index), state.labels,
                                 "Attention weights in every head"))
    choices = [(i, h) for i in range(state.n_layer) for h in range(state.n_head)]
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    left.selectbox("Head to open", choices, key="attention.open",
                   format_func=lambda c: f"block {c[0]} head {c[1]}")
    right.button("Open it above", key="attention.open_button", on_click=_open_head,
                 args=("attention.open",), icon=":material/arrow_upward:")


def draw_checkpoints(job) -> None:
    """The checkpoint scrubber: a slider over the snapshots of a training run, showing what the
    model predicted after the sidebar's prompt at that step."""
    snapshots = job.snapshots()
    if not snapshots:
        return
    st.subheader("The prediction as the model learns")
    steps = [snap.step for snap in snapshots]
    st.caption(f"After the prompt in the sidebar (its last {len(job.watch)} tokens), at "
               f"{len(steps)} moments of the run: step 1 and every {job.snapshot_every} steps.")
    if len(steps) == 1:
        step = steps[0]
    else:
        if widget_value("training.checkpoint") not in steps:
            set_widget("training.checkpoint", steps[-1])
        step = st.select_slider("Checkpoint (step)", options=steps, key="training.checkpoint")
    snap = snapshots[steps.index(step)]
    names = [token_label(job.tokenizer, t, show_id=True) for t in snap.tokens]
    fig = sampling_charts.top_probabilities(
        names, snap.probs, f"Top {len(names)} next tokens at step {snap.step} "
        f"(batch loss {snap.loss:.3f})")
    show_chart(fig, f"checkpoint_step{snap.step}",
               series_table({"probability": snap.probs}, names, "token"),
               key="training.checkpoint_chart",
               alt=alt_text.top_items(names, snap.probs, f"Most likely at step {snap.step}"))
