"""The residual stream: how long each token's vector gets, what each sublayer adds, and what
the model would predict if it had to stop after each block (the logit lens)."""

import numpy as np
import pandas as pd
import streamlit as st

import ui
from tinygpt import readouts as ti

LENS_MAX_POSITIONS = 24  # columns of the lens grid (each cell shows a token, so keep it small)

ui.page_setup("Residual stream")
with ui.guard():
    state = ui.sidebar()
    if state is not None and state.ready:
        logits, trace = ui.get_trace(state)
        L = state.n_layer
        st.caption(ui.dims_text(state))
        ui.explain(
            "Every token carries one vector of d numbers through the whole model: the "
            "**residual stream**. No block replaces it. Attention and the feed-forward "
            "network each read a normalised copy and *add* their result back, so the stream "
            "after a block is the sum of everything written into it so far.",
            r"x^{(\ell)}_{\text{mid}} = x^{(\ell)}"
            r" + \mathrm{Attn}\big(\mathrm{LN}_1(x^{(\ell)})\big),\qquad"
            r" x^{(\ell+1)} = x^{(\ell)}_{\text{mid}}"
            r" + \mathrm{FFN}\big(\mathrm{LN}_2(x^{(\ell)}_{\text{mid}})\big)",
        )

        # ---- 1. the length of each token's vector after every sublayer
        st.subheader("1 · How long is each token's vector?")
        norms = ti.residual_norms(trace, L)  # (1 + 2L, n)
        stages = [label for label, _ in ti.residual_stages(L)]
        view = st.radio(
            "Show", ["heatmap: stages × tokens", "lines: chosen tokens"], horizontal=True,
            key="p4_norm_view",
        )
        if view.startswith("heatmap"):
            chosen = list(range(state.n))
            fig = ui.residual_norms_figure(norms, stages, state.labels, state.d)
        else:
            chosen = st.multiselect(
                "Tokens", list(range(state.n)), default=[state.position],
                format_func=lambda t: state.labels[t], key="p4_norm_tokens",
            ) or [state.position]
            fig = ui.residual_norm_lines_figure(norms, stages, state.labels, chosen)
        ui.show_chart(fig, "residual_norms", ui.grid_table(
            norms[:, chosen], stages, [state.labels[t] for t in chosen], "stage", "token"))
        ui.explain(
            "Each value is the Euclidean length of one token's vector after one stage. "
            "Because every sublayer *adds*, the length usually grows as the stream goes "
            "down the model; the LayerNorm in front of each sublayer means the sublayers "
            "themselves never see that growing size.",
            r"\lVert x_t \rVert = \sqrt{\textstyle\sum_{i=1}^{d} x_{t,i}^2}",
        )

        # ---- 2. what each sublayer writes
        st.subheader("2 · What does each sublayer write?")
        writes = ti.sublayer_write_norms(trace, L)  # (2L, n)
        sub_labels = [label for label, _ in ti.sublayer_stages(L)]
        ui.show_chart(ui.sublayer_writes_figure(writes, sub_labels, state.labels, state.d),
                      "sublayer_writes",
                      ui.grid_table(writes, sub_labels, state.labels, "sublayer", "token"))
        ui.explain(
            "The length of the vector each attention and feed-forward sublayer adds to each "
            "token. A bright cell is a sublayer that changed that token a lot; a dark one "
            "left it almost as it was.",
            r"\Delta x_t = \mathrm{sublayer}(\mathrm{LN}(x_t)),\qquad \lVert \Delta x_t \rVert",
        )
        t = state.position
        table = pd.DataFrame(
            {
                "after stage": stages,
                "‖x‖": norms[:, t],
                "‖Δx‖ added by this stage": [np.nan, *writes[:, t]],
            }
        )
        st.markdown(f"Numbers for the inspected token **{state.labels[t]}**:")
        st.dataframe(table, hide_index=True, width="stretch")

        # ---- 3. the logit lens
        st.subheader("3 · Logit lens: what would the model say after each block?")
        col1, col2 = st.columns(2)
        after = col1.radio(
            "Read the stream", ["after each block", "after each sublayer"], horizontal=True,
            key="p4_lens_stages",
        )
        k = col2.slider("Tokens listed per cell (hover / table)", 1, 5, 3, key="p4_lens_k")
        # a window of positions ending at the inspected one, so the grid stays readable
        end = max(state.position + 1, min(state.n, LENS_MAX_POSITIONS))
        positions = list(range(max(0, end - LENS_MAX_POSITIONS), end))
        if len(positions) < state.n:
            st.caption(
                f"Showing positions {positions[0]}–{positions[-1]} of {state.n} "
                "(move the inspected position in the sidebar to slide the window)."
            )
        lens = ti.logit_lens(state.model, trace, k=k, sublayers=after.endswith("sublayer"),
                             positions=positions)
        top_text = [
            [ui.token_text(state.tokenizer, i) for i in row] for row in lens.ids[:, :, 0]
        ]
        ui.show_chart(
            ui.logit_lens_figure(lens.probs[:, :, 0], top_text, lens.labels, state.labels,
                                 positions, state.v),
            "logit_lens",
            ui.lens_table(lens.probs[:, :, 0], top_text, lens.labels,
                          [state.labels[t] for t in positions]),
        )
        ui.explain(
            "We pretend the model stops early: take the stream after a block, apply the "
            "final LayerNorm (with that vector's own mean and variance) and the output layer, "
            "and read the most likely next token. The cell shows that token; its colour is "
            "its probability. The last row is the model's real prediction.",
            r"\text{lens}^{(\ell)}_t = \mathrm{softmax}\big(\mathrm{LN}_f(x^{(\ell)}_t)\,"
            r"W_{\text{out}}\big)",
        )
        col = positions.index(t)
        rows = []
        for s, label in enumerate(lens.labels):
            guesses = ", ".join(
                f"{ui.token_text(state.tokenizer, i)!r} {p:.3g}"
                for i, p in zip(lens.ids[s, col], lens.probs[s, col], strict=True)
            )
            rows.append({"after": label, f"top {k} (probability)": guesses,
                         "entropy (bits)": float(lens.entropy[s, col])})
        st.markdown(f"The lens at the inspected token **{state.labels[t]}**:")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
