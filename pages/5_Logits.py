"""Logits: one score per vocabulary token at every position; the shift by one that training
scores; weight tying (a logit is a dot product with an embedding row); the rank bottleneck."""

import numpy as np
import pandas as pd
import streamlit as st

import ui
from tinygpt import readouts as ti

ui.page_setup("Logits")
with ui.guard():
    state = ui.sidebar()
    if state is not None and state.ready:
        logits, trace = ui.get_trace(state)
        tok, ids, n, v, d, t = state.tokenizer, state.ids, state.n, state.v, state.d, state.position

        def text(i: int) -> str:
            return ui.token_text(tok, i)

        st.caption(ui.dims_text(state))
        ui.explain(
            "The output layer turns each position's final hidden state h (d numbers) into "
            "v scores, one for every token in the vocabulary: the **logits**. A higher logit "
            "means the model finds that token more likely to come next; softmax turns a row "
            "of logits into probabilities.",
            r"\text{logits} = \mathrm{LN}_f(x)\, W_{\text{out}}"
            rf",\qquad ({n}\times{d})\cdot({d}\times{v}) \to ({n}\times{v})",
        )

        # ---- 1. the n x v heatmap
        st.subheader(f"1 · The logits: {n} × {v:,}")
        row_labels = [f"{s}:{text(ids[s])} → {'?' if s + 1 == n else text(ids[s + 1])}"
                      for s in range(n)]
        if n * v <= ui.MAX_HEATMAP_CELLS:
            columns = np.arange(v)
            st.caption(f"All {v:,} vocabulary tokens are columns.")
        else:
            k = st.slider("Columns: each position's top k tokens", 1, 50, 10, key="p5_topk")
            columns = ti.vocab_columns(logits, k, max_columns=ui.MAX_HEATMAP_CELLS // n)
            st.caption(
                f"The vocabulary has {v:,} tokens, too many columns to draw for {n} rows; "
                f"the columns are the {len(columns)} tokens that are in some position's "
                f"top {k}. The chart below it shows one whole row."
            )
        col_labels = [f"{i}:{text(i)}" for i in columns]
        shown = logits[:, columns]  # (n, m)
        ui.show_chart(ui.logits_heatmap_figure(shown, col_labels, row_labels, v), "logits",
                      ui.grid_table(shown, row_labels, col_labels, "row t: sees → next", "token"))
        ui.explain(
            "Row t is what the model computed at position t, **after seeing tokens 0..t**: "
            "its guess for token t+1 (written after the arrow; the last row's next token is "
            "not known yet, hence '?'). Red is a high score, blue a low one."
        )
        top_ids, _ = ti.top_k(logits[t], 8)
        ui.show_chart(ui.logit_row_figure(logits[t], [(int(i), text(i)) for i in top_ids], t),
                      f"logits_row{t}", ui.series_table({"logit": logits[t]}, range(v), "token id"))

        # ---- 2. shift by one
        st.subheader("2 · Shift by one: each row is scored on the next token")
        if n < 2:
            st.info("Type at least two tokens to compare each guess with the token that follows.")
        else:
            hits = ti.next_token_hits(logits, ids)  # (n-1,)
            logp = ti.target_logprobs(logits, ids)  # (n-1,)
            guess = np.argmax(logits[:-1], axis=-1)
            table = pd.DataFrame({
                "position": np.arange(n - 1),
                "sees": [text(i) for i in ids[:-1]],
                "should predict": [text(i) for i in ids[1:]],
                "top guess": [text(i) for i in guess],
                "p(real next)": np.exp(logp),
                "hit": ["✓" if h else "✗" for h in hits],
            })
            ui.show_chart(ui.shift_hits_figure(np.exp(logp), hits, row_labels[:-1],
                                               table["top guess"].tolist()),
                          "shift_by_one", table)
            ui.explain(
                "Training compares row t with token t+1 of the same text, so one sequence "
                f"of n = {n} tokens gives n − 1 = {n - 1} lessons at once. A hit means the "
                "highest logit was the real next token. The loss is the average surprise.",
                r"\text{loss} = -\frac{1}{n-1}\sum_{t=0}^{n-2} \log p(x_{t+1}\mid x_{\le t})"
                rf" = {-float(np.mean(logp)):.3f}",
            )
            with st.expander(f"Table: {int(hits.sum())} hits out of {n - 1}"):
                st.dataframe(table, hide_index=True, width="stretch")

        # ---- 3. weight tying
        st.subheader("3 · Weight tying: a logit is a dot product with an embedding row")
        tied = ti.weights_are_tied(state.model)
        W_out, E = state.model.output.W_out, state.model.embedding.embeddings
        st.markdown(
            f"`W_out` has shape {W_out.shape[0]} × {W_out.shape[1]:,} and the embedding matrix "
            f"`E` has shape {E.shape[0]:,} × {E.shape[1]}. "
            + ("`np.shares_memory(W_out, E)` is **True**: they are the **same array** "
               "(W_out is E transposed), so the model reads tokens out with the very vectors "
               "it used to read them in." if tied else
               "They are **separate arrays**: this model learned its output matrix on its own.")
        )
        options = [int(i) for i in ti.top_k(logits[t], 10)[0]]
        if t + 1 < n and int(ids[t + 1]) not in options:
            options.append(int(ids[t + 1]))
        token = st.selectbox(
            f"Token whose logit at position {state.labels[t]} we rebuild", options,
            format_func=lambda i: f"{i}: {text(i)}", key="p5_tie_token",
        )
        check = ti.tying_check(state.model, trace, t, int(token))
        row_name = "E[token]" if tied else "W_out[:, token]"
        row_tex = rf"E_{{{token}}}" if tied else rf"W_{{\text{{out}}}}[:,{token}]"
        st.latex(
            rf"\text{{logit}}_{{{t},\,{token}}} = h_{{{t}}}\cdot {row_tex}"
            rf" = \sum_{{i=1}}^{{{d}}} h_{{i}}\,e_{{i}}"
            + (rf" + b_{{{token}}}" if state.model.output.b_out is not None else "")
            + rf" = {check.dot + check.bias:.4f}"
        )
        shown = min(d, 8)
        table = pd.DataFrame({
            "i": np.arange(shown),
            "h_i (final hidden state)": check.hidden[:shown],
            f"e_i ({row_name})": check.column[:shown],
            "h_i · e_i": check.products[:shown],
        })
        st.dataframe(table, hide_index=True, width="stretch")
        st.markdown(
            f"First {shown} of the d = {d} terms. Their full sum is **{check.dot:.6f}**"
            + (f", plus the bias {check.bias:.6f}" if check.bias else "")
            + f"; the model's own logit in the trace is **{check.logit:.6f}** "
            f"(difference {abs(check.dot + check.bias - check.logit):.1e}, float32 rounding)."
        )
        ui.show_chart(ui.tying_products_figure(check.products, check.dot, text(token)),
                      f"logit_terms_position{t}_token{token}",
                      ui.series_table({"h_i": check.hidden, "e_i": check.column,
                                       "h_i · e_i": check.products}, range(d), "dimension i"))

        # ---- 4. rank bottleneck
        st.subheader("4 · The rank bottleneck")
        s = ui.singular_values(state)
        ui.show_chart(ui.singular_values_figure(s, v), "singular_values_W_out",
                      ui.series_table({"σ": s}, range(1, d + 1), "index (largest first)"))
        ui.explain(
            f"W_out maps d = {d} numbers to v = {v:,} logits, so it has at most d = {d} "
            "singular values: every row of logits the model can ever produce lies in a "
            f"subspace of only {d} dimensions (shifted by b_out if the model has one) inside "
            f"the {v:,}-dimensional space of all score rows. A fast drop in the curve means "
            "even fewer directions really matter.",
            r"W_{\text{out}} = U\,\Sigma\,V^\top,\qquad \operatorname{rank}(W_{\text{out}})"
            rf" \le \min(d, v) = {min(d, v)}",
        )
