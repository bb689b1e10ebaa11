"""Home page: the forward pass at a glance, with live shapes and the next-token guess."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

import ui
from tinygpt.readouts import top_k

HERE = Path(__file__).resolve().parent
TOP_K = 10

# (stage, page that shows it, what happens there) - shapes are filled in from the live prompt
STAGES = [
    ("Prompt", None, "the text you typed in the sidebar"),
    ("Tokens", "pages/1_Tokens_and_embeddings.py",
     "byte-level BPE cuts the text into pieces from a fixed vocabulary; each piece has an id"),
    ("Embeddings", "pages/1_Tokens_and_embeddings.py",
     "each id picks a row of the token-embedding matrix; the row for its position is added"),
    ("Transformer blocks", "pages/3_Attention.py",
     "each block: LayerNorm → attention (tokens share information) → add; "
     "LayerNorm → feed-forward (each token alone) → add"),
    ("Final LayerNorm", "pages/2_LayerNorm.py",
     "every token's vector is rescaled to mean 0 and variance 1, then scaled and shifted"),
    ("Output layer", "pages/5_Logits.py",
     "a matrix product turns each d-dimensional vector into one score per vocabulary token"),
    ("Logits", "pages/5_Logits.py", "raw scores: higher means the model favours that token"),
    ("Softmax", "pages/6_Softmax_and_sampling.py",
     "scores become probabilities: positive and summing to 1"),
    ("Next token", "pages/7_Decoding.py",
     "pick one (the most likely, or sample) and append it to the prompt to go on"),
]
MORE_PAGES = [
    ("pages/2_LayerNorm.py", "LayerNorm, step by step"),
    ("pages/4_Residual_stream.py", "The residual stream and the logit lens"),
    ("pages/8_What_if.py", "What if? Break the model on purpose"),
    ("pages/9_Training.py", "How the model was trained"),
]


def stage_shapes(state: ui.AppState) -> dict[str, str]:
    """The live shape of what each stage hands to the next one."""
    n, d, v, L, H = state.n, state.d, state.v, state.n_layer, state.n_head
    return {
        "Prompt": f"{len(state.prompt):,} characters",
        "Tokens": f"n = {n} ids",
        "Embeddings": f"n × d = {n} × {d}",
        "Transformer blocks": f"{L} blocks, {H} heads each · n × d = {n} × {d} in and out",
        "Final LayerNorm": f"n × d = {n} × {d}",
        "Output layer": f"W_out: d × v = {d} × {v:,}",
        "Logits": f"n × v = {n} × {v:,}",
        "Softmax": f"n × v = {n} × {v:,}, each row sums to 1",
        "Next token": "1 token per position (the last one continues the text)",
    }


def page_link(path: str | None, label: str) -> None:
    """A link to a stage's page, or plain text if that page does not exist (yet)."""
    if path and (HERE / path).is_file():
        st.page_link(path, label=label, icon=":material/arrow_forward:")
    else:
        st.markdown(f"**{label}**")


def draw_pipeline(state: ui.AppState) -> None:
    st.subheader("The pipeline")
    st.caption(ui.dims_text(state))
    shapes = stage_shapes(state)
    for i, (stage, path, what) in enumerate(STAGES):
        with st.container(border=True):
            left, right = st.columns([1, 1], vertical_alignment="center")
            with left:
                page_link(path, f"{i + 1}. {stage}")
            right.markdown(f"**{shapes[stage]}**")
            st.caption(what)


def draw_prediction(state: ui.AppState) -> None:
    logits, trace = ui.get_trace(state)
    pos = state.position
    ids, probs = top_k(logits[pos], TOP_K)  # softmax of the model's own logits row
    shown = [ui.token_text(state.tokenizer, i) for i in ids]
    bar_labels = [f"{text}  (id {int(i)})" for text, i in zip(shown, ids, strict=True)]
    st.subheader("What the model guesses next")
    st.markdown(f"After position **{state.labels[pos]}** (choose another position in the "
                f"sidebar), the model's {TOP_K} most likely next tokens:")
    table = pd.DataFrame({
        "token": shown,
        "id": ids,
        "logit": logits[pos, ids].astype(float),
        "probability": probs.astype(float),
    })
    fig = ui.prob_bar(bar_labels, probs,
                      ui.shape(f"Top {TOP_K} of the softmax of logits[{pos}]", v=state.v))
    ui.show_chart(fig, f"next_token_top{TOP_K}", table)
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"probability": st.column_config.NumberColumn(format="%.4f"),
                                "logit": st.column_config.NumberColumn(format="%.3f")})
    ui.explain("Softmax turns the row of logits z (one score per vocabulary token) into "
               "probabilities: exponentiate each score, then divide by the total.",
               r"p_i = \frac{e^{z_i}}{\sum_{j=1}^{v} e^{z_j}}")


def main() -> None:
    ui.page_setup("tinygpt: how a GPT guesses the next token")
    with ui.guard():
        st.markdown("A small GPT written from scratch in NumPy. Type a prompt in the sidebar: "
                    "every number on these pages is computed by the model for *your* text.")
        state = ui.sidebar()
        if state is None or not state.ready:
            return
        st.markdown(ui.chips_html([(text.split(":", 1)[1], f"id {int(t)}")
                                   for text, t in zip(state.labels, state.ids, strict=True)],
                                  highlight=state.position), unsafe_allow_html=True)
        pipeline, prediction = st.columns([3, 2], gap="large")
        with pipeline:
            draw_pipeline(state)
        with prediction:
            draw_prediction(state)
        st.subheader("More")
        for path, label in MORE_PAGES:
            if (HERE / path).is_file():
                st.page_link(path, label=label, icon=":material/arrow_forward:")


main()
