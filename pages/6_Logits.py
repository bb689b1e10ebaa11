"""Logits: one score per vocabulary token at every position; the shift by one that training
scores; weight tying (a logit is a dot product with an embedding row); the rank bottleneck."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt_app.charts import common
from tinygpt_app.charts import logits as charts
from tinygpt_app.compute import caches, readout_cache
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import LOGITS_K, TYING_TOKEN
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import explain, grid_table, series_table, show_chart
from tinygpt_app.sections.explain import draw_surprise

PARTS = ["1 · The logits", "2 · Shift by one", "3 · Weight tying", "4 · The rank bottleneck",
         "Surprise map"]


def row_labels(state: AppState) -> list[str]:
    """Row t: the token it sees → the token it should predict ('?' after the last)."""
    text = [token_label(state.tokenizer, i) for i in state.ids]
    return [f"{t}:{text[t]} → {text[t + 1] if t + 1 < state.n else '?'}" for t in range(state.n)]


def draw_heatmap(state: AppState, logits, rows: list[str]) -> None:
    n, v, t = state.n, state.v, state.position
    st.header(f"1 · The logits: {n} × {v:,}")
    max_columns = min(common.MAX_HEATMAP_COLUMNS, common.MAX_HEATMAP_CELLS // n)  # read at
    if v <= max_columns:  # run time: the tests lower them
        columns = list(range(v))
        st.caption(f"All {v:,} vocabulary tokens are columns.")
    else:
        k = control(st.slider, "Columns: each position's top k tokens", "logits.top_k",
                    LOGITS_K, min_value=LOGITS_K.lo, max_value=LOGITS_K.hi)
        top = readout_cache.top_tokens(state, logits).ids  # (n, TOP_K), once per prompt
        columns = ti.top_columns(top, k, max_columns=max_columns)
        st.caption(f"The vocabulary has {v:,} tokens, more columns than a screen can show; "
                   f"the columns are the {len(columns)} tokens that are in some position's "
                   f"top {k}. The chart below it shows one whole row.")
    col_labels = [token_label(state.tokenizer, i, show_id=True) for i in columns]
    shown = logits[:, columns]  # (n, m)
    which = ("the whole vocabulary" if len(columns) == v
             else f"{len(columns)} of the v = {v} tokens")
    fig = charts.logits_heatmap(shown, col_labels, rows, f"Logits: n = {n} positions × {which}")
    show_chart(fig, "logits", grid_table(shown, rows, col_labels, "row t: sees → next", "token"),
               key="logits.heatmap", alt=alt_text.grid(shown, rows, col_labels, "Logits"))
    explain("Row t is what the model computed at position t, **after seeing tokens 0..t**: "
            "its guess for token t+1 (written after the arrow; the last row's next token is "
            "not known yet, hence '?'). Red is a high score, blue a low one.")
    top_ids = readout_cache.top_tokens(state, logits).ids[t, :8]
    marks = [(int(i), token_label(state.tokenizer, i)) for i in top_ids]
    show_chart(charts.logit_row(logits[t], marks, f"Row {t}: all v = {v} logits, by token id"),
               f"logits_row{t}", series_table({"logit": logits[t]}, range(v), "token id"),
               key="logits.row",
               alt=alt_text.top_items([label for _, label in marks], logits[t][top_ids],
                                      f"Row {t}'s highest logits, of {v:,}"))


def draw_shift(state: AppState, logits, rows: list[str]) -> None:
    st.header("2 · Shift by one: each row is scored on the next token")
    n, ids = state.n, state.ids
    if n < 2:
        st.info("Type at least two tokens to compare each guess with the token that follows.")
        return
    text = [token_label(state.tokenizer, i) for i in ids]
    shift = readout_cache.top_tokens(state, logits).shift  # once per prompt
    hits, p_next, n_hits, loss = shift.hits, shift.probs, shift.n_hits, shift.loss
    guess = [token_label(state.tokenizer, i) for i in shift.guesses]
    table = pd.DataFrame({
        "position": range(n - 1), "sees": text[:-1], "should predict": text[1:],
        "top guess": guess, "p(real next)": p_next, "hit": ["✓" if h else "✗" for h in hits],
    })
    title = (f"Shift by one: row t is scored on token t+1 — {n_hits} of {n - 1} hits "
             "(plain blue = the top guess was right, striped orange = wrong)")
    show_chart(charts.shift_hits(p_next, hits, rows[:-1], guess, title), "shift_by_one", table,
               key="logits.shift",
               alt=f"{n_hits} of {n - 1} top guesses were right (striped bars: wrong). "
                   + alt_text.bars(rows[:-1], p_next, "p(the real next token)"))
    explain(
        "Training compares row t with token t+1 of the same text, so one sequence "
        f"of n = {n} tokens gives n − 1 = {n - 1} lessons at once. A hit means the "
        "highest logit was the real next token. The loss is the average surprise.",
        r"\text{loss} = -\frac{1}{n-1}\sum_{t=0}^{n-2} \log p(x_{t+1}\mid x_{\le t})"
        rf" = {loss:.3f}",
    )
    with st.expander(f"Table: {n_hits} hits out of {n - 1}"):
        st.dataframe(table, hide_index=True, width="stretch")


def tying_intro(state: AppState) -> None:
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


def draw_tying(state: AppState, logits, trace) -> None:
    st.header("3 · Weight tying: a logit is a dot product with an embedding row")
    tying_intro(state)
    t, d, ids = state.position, state.d, state.ids
    options = [int(i) for i in readout_cache.top_tokens(state, logits).ids[t, :10]]
    if t + 1 < state.n and int(ids[t + 1]) not in options:
        options.append(int(ids[t + 1]))
    token = control(st.selectbox,
                    f"Token whose logit at position {plain(state.labels[t])} we rebuild",
                    "logits.tying_token", TYING_TOKEN, default=options[0], choices=options,
                    format_func=lambda i: token_label(state.tokenizer, i, show_id=True))
    check = ti.tying_check(state.model, trace, t, int(token))
    row_tex = rf"E_{{{token}}}" if check.tied else rf"W_{{\text{{out}}}}[:,{token}]"
    st.latex(rf"\text{{logit}}_{{{t},\,{token}}} = h_{{{t}}}\cdot {row_tex}"
             rf" = \sum_{{i=1}}^{{{d}}} h_{{i}}\,e_{{i}}"
             + (rf" + b_{{{token}}}" if state.model.output.b_out is not None else "")
             + rf" = {check.rebuilt:.4f}")
    shown = min(d, 8)
    st.dataframe(pd.DataFrame({
        "i": range(shown), "h_i (final hidden state)": check.hidden[:shown],
        f"e_i ({'E[token]' if check.tied else 'W_out[:, token]'})": check.column[:shown],
        "h_i · e_i": check.products[:shown],
    }), hide_index=True, width="stretch")
    st.markdown(
        f"First {shown} of the d = {d} terms. Their full sum is **{check.dot:.6f}**"
        + (f", plus the bias {check.bias:.6f}" if check.bias else "")
        + f"; the model's own logit in the trace is **{check.logit:.6f}** "
        f"(difference {check.difference:.1e}, float32 rounding).")
    title = (f"logit({token_label(state.tokenizer, token)}) = Σ over d = {d} dimensions of "
             f"h_i · E[token]_i = {check.dot:.4f}")
    show_chart(charts.tying_products(check.products, title),
               f"logit_terms_position{t}_token{token}",
               series_table({"h_i": check.hidden, "e_i": check.column,
                             "h_i · e_i": check.products}, range(d), "dimension i"),
               key="logits.tying",
               alt=alt_text.bars([f"dimension {i}" for i in range(d)], check.products,
                                 f"The {d} terms h_i · e_i, which add up to {check.dot:.4f}"))


def draw_rank(state: AppState) -> None:
    st.header("4 · The rank bottleneck")
    d, v = state.d, state.v
    s = caches.singular_values(state)
    show_chart(charts.singular_values(s, f"Singular values of W_out (d × v = {d} × {v}): "
                                         f"only d = {d} of them"),
               "singular_values_W_out", series_table({"σ": s}, range(1, d + 1),
                                                     "index (largest first)"),
               key="logits.singular_values",
               alt=alt_text.spread(s, f"The {d} singular values of W_out"))
    explain(
        f"W_out maps d = {d} numbers to v = {v:,} logits, so it has at most d = {d} "
        "singular values: every row of logits the model can ever produce lies in a "
        f"subspace of only {d} dimensions (shifted by b_out if the model has one) inside "
        f"the {v:,}-dimensional space of all score rows. A fast drop in the curve means "
        "even fewer directions really matter.",
        (r"W_{\text{out}} = U\,\Sigma\,V^\top",
         rf"\operatorname{{rank}}(W_{{\text{{out}}}}) \le \min(d, v) = {min(d, v)}"),
    )


with page("Logits", sizes=True) as state:
    logits, trace = caches.get_trace(state)
    parts = state.parts
    explain(
        "The output layer turns each position's final hidden state h (d numbers, after the "
        f"final {parts.norm}) into v scores, one for every token in the vocabulary: the "
        "**logits**. A higher logit means the model finds that token more likely to come "
        f"next; softmax turns a row of logits into probabilities. This model's output layer is "
        f"{parts.tying}.",
        (parts.output_formula,
         rf"({state.n}\times{state.d})\cdot({state.d}\times{state.v})"
         rf" \to ({state.n}\times{state.v})"),
    )
    rows = row_labels(state)
    heatmap, shift, tying, rank, surprise = st.tabs(PARTS)  # one part at a time (issue 49)
    with heatmap:
        draw_heatmap(state, logits, rows)
    with shift:
        draw_shift(state, logits, rows)
    with tying:
        draw_tying(state, logits, trace)
    with rank:
        draw_rank(state)
    with surprise:
        draw_surprise(state, "logits")
