"""The residual stream: how long each token's vector gets, what each sublayer adds, and what
the model would predict if it had to stop after each block (the logit lens)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt.readouts.parts import norm_symbol
from tinygpt_app.charts import residual as charts
from tinygpt_app.compute import caches, readout_cache
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import LENS_K, LENS_STAGES, NORM_TOKENS, NORM_VIEW
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import explain, grid_table, lens_table, show_chart
from tinygpt_app.sections.neurons import draw_neurons

PARTS = ["1 · Lengths", "2 · Writes", "3 · Logit lens", "4 · Neurons"]
LENS_MAX_POSITIONS = 24  # columns of the lens grid (each cell shows a token, so keep it small)


def draw_norms(state: AppState, norms, stages: list[str]) -> None:
    st.header("1 · How long is each token's vector?")
    view = control(st.radio, "Show", "residual.norm_view", NORM_VIEW, horizontal=True)
    if view.startswith("heatmap"):
        chosen = list(range(state.n))
        fig = charts.norms_heatmap(
            norms, stages, state.labels,
            f"Residual norm ‖x‖ per token: {len(stages)} stages × n = {state.n} tokens "
            f"(each x has d = {state.d})")
    else:
        chosen = control(st.multiselect, "Tokens", "residual.norm_tokens", NORM_TOKENS,
                         default=[state.position], hi=state.n - 1, options=range(state.n),
                         format_func=lambda t: state.labels[t]) or [state.position]
        fig = charts.norm_lines(norms, stages, state.labels, chosen,
                                f"‖x‖ of {len(chosen)} token(s) as the stream passes each "
                                "sublayer")
    show_chart(fig, "residual_norms", grid_table(norms[:, chosen], stages,
                                                 [state.labels[t] for t in chosen],
                                                 "stage", "token"), key="residual.norms",
               alt=alt_text.grid(norms[:, chosen], stages, [state.labels[t] for t in chosen],
                                 "Length ‖x‖ of the residual stream"))
    explain(
        "Each value is the Euclidean length of one token's vector after one stage. "
        "Because every sublayer *adds*, the length usually grows as the stream goes "
        f"down the model; the {state.parts.norm} in front of each sublayer means "
        "the sublayers themselves never see that growing size.",
        r"\lVert x_t \rVert = \sqrt{\textstyle\sum_{i=1}^{d} x_{t,i}^2}",
    )


def draw_writes(state: AppState, norms, stages: list[str],
                writes) -> None:
    st.header("2 · What does each sublayer write?")
    subs = [label for label, _ in ti.sublayer_stages(state.n_layer)]
    fig = charts.sublayer_writes(
        writes, subs, state.labels,
        f"What each sublayer writes: ‖Δx‖, {len(subs)} sublayers × n = {state.n} tokens "
        f"(Δx has d = {state.d})")
    show_chart(fig, "sublayer_writes", grid_table(writes, subs, state.labels, "sublayer", "token"),
               key="residual.writes",
               alt=alt_text.grid(writes, subs, state.labels, "Length ‖Δx‖ of each write"))
    explain(
        "The length of the vector each attention and feed-forward sublayer adds to each "
        "token. A bright cell is a sublayer that changed that token a lot; a dark one "
        "left it almost as it was.",
        (rf"\Delta x_t = \mathrm{{sublayer}}({norm_symbol(state.config, '')}(x_t))",
         r"\lVert \Delta x_t \rVert"),
    )
    t = state.position
    st.markdown(f"Numbers for the inspected token **{plain(state.labels[t])}**:")
    added = ["— (where it starts)", *(f"{w:.4g}" for w in writes[:, t])]
    st.dataframe(pd.DataFrame({"after stage": stages, "‖x‖": norms[:, t],
                               "‖Δx‖ added by this stage": added}),
                 hide_index=True, width="stretch")


def lens_window(state: AppState, sublayers: bool) -> list[int]:
    """A window of positions ending at the inspected one, so the grid stays readable, and no
    wider than a click may afford on a large vocabulary (readout_cache.lens_width)."""
    width = readout_cache.lens_width(state, LENS_MAX_POSITIONS, sublayers)
    return ti.position_window(state.n, state.position, width)


def draw_lens(state: AppState, trace) -> None:
    st.header("3 · Logit lens: what would the model say after each block?")
    col1, col2 = st.columns(2)
    after = control(col1.radio, "Read the stream", "residual.lens_stages", LENS_STAGES,
                    horizontal=True)
    k = control(col2.slider, "Tokens listed per cell (hover / table)", "residual.lens_k",
                LENS_K, min_value=LENS_K.lo, max_value=LENS_K.hi)
    positions = lens_window(state, after.endswith("sublayer"))
    if len(positions) < state.n:
        st.caption(f"Showing positions {positions[0]}–{positions[-1]} of {state.n} "
                   "(move the inspected position in the sidebar to slide the window).")
    lens = readout_cache.logit_lens(state, trace, positions, k,
                                    sublayers=after.endswith("sublayer"))
    top = [[token_label(state.tokenizer, i) for i in row] for row in lens.ids[:, :, 0]]
    shown = [state.labels[t] for t in positions]
    S, m = len(lens.labels), len(positions)
    fig = charts.logit_lens(
        lens.probs[:, :, 0], top, lens.labels, shown,
        f"Logit lens: top next token read after each stage ({S} stages × {m} positions, "
        f"over v = {state.v} tokens)")
    show_chart(fig, "logit_lens", lens_table(lens.probs[:, :, 0], top, lens.labels, shown),
               key="residual.lens",
               alt=alt_text.lens(lens.probs[:, :, 0], top, lens.labels, shown))
    parts = state.parts
    explain(
        "We pretend the model stops early: take the stream after a block, apply the "
        f"final {parts.norm} (with that vector's own {parts.norm_stats}) and the output layer, "
        "and read the most likely next token. The cell shows that token; its colour is "
        "its probability. The last column is the model's real prediction.",
        r"\text{lens}^{(\ell)}_t = \mathrm{softmax}\big("
        + norm_symbol(state.config, "f") + r"(x^{(\ell)}_t)\,W_{\text{out}}\big)",
    )
    lens_at_position(state, lens, positions.index(state.position), k)


def lens_at_position(state: AppState, lens, col: int, k: int) -> None:
    """The lens's top k guesses at the inspected token, stage by stage, as a table."""
    rows = []
    for s, label in enumerate(lens.labels):
        guesses = ", ".join(f"“{token_label(state.tokenizer, i)}” {p:.3g}"  # not repr: "\\n"
                            for i, p in zip(lens.ids[s, col], lens.probs[s, col], strict=True))
        rows.append({"after": label, f"top {k} (probability)": guesses,
                     "entropy (bits)": float(lens.entropy[s, col])})
    st.markdown(f"The lens at the inspected token **{plain(state.labels[state.position])}**:")
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


with page("Residual stream", sizes=True) as state:
    explain(
        "Every token carries one vector of d numbers through the whole model: the "
        f"**residual stream**. No block replaces it. Attention and the {state.parts.mlp} "
        f"each read a normalised copy ({state.parts.norm}) and *add* their result back, so the "
        "stream after a block is the sum of everything written into it so far.",
        (r"x^{(\ell)}_{\text{mid}} = x^{(\ell)} + \mathrm{Attn}\big("
         + norm_symbol(state.config, "1") + r"(x^{(\ell)})\big)",
         r"x^{(\ell+1)} = x^{(\ell)}_{\text{mid}} + \mathrm{FFN}\big("
         + norm_symbol(state.config, "2") + r"(x^{(\ell)}_{\text{mid}})\big)"),
    )
    logits, trace = caches.get_trace(state)
    norms = ti.residual_norms(trace, state.n_layer)  # (1 + 2L, n)
    stages = [label for label, _ in ti.residual_stages(state.n_layer)]
    lengths, writes, lens, neurons = st.tabs(PARTS)  # one part at a time (issue 49)
    with lengths:
        draw_norms(state, norms, stages)
    with writes:
        draw_writes(state, norms, stages, ti.sublayer_write_norms(trace, state.n_layer))
    with lens:
        draw_lens(state, trace)
    with neurons:
        draw_neurons(state, logits, trace)
