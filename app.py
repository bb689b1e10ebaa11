"""The app's entry point, and its home page: the forward pass at a glance, with live shapes and
the next-token guess.

`streamlit run app.py` runs this file first on every rerun: it applies the process-wide
settings (once per process), plugs in the hosting wing when it is installed (tinygpt_app.host:
a class server, the live class's hooks on every page; without it, one user) and hands over to
the page the URL names, through st.navigation built from tinygpt_app.kit.navigation.
Each file in pages/ also runs on its own.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from tinygpt.network.config import GPTConfig
from tinygpt.readouts import top_k
from tinygpt.readouts.parts import parts_of
from tinygpt_app import settings
from tinygpt_app.charts import sampling as charts
from tinygpt_app.compute import caches
from tinygpt_app.compute.model_cards import NO_CARD, headline, read_card
from tinygpt_app.compute.models import available_models
from tinygpt_app.host import host, load_wing
from tinygpt_app.kit import alt_text, navigation, widgets
from tinygpt_app.kit.frame import fair_turn, page
from tinygpt_app.kit.labels import shape, token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState
from tinygpt_app.kit.widgets import chips, columns, explain, show_chart
from tinygpt_app.sections.guess_first import guess_first

HERE = Path(__file__).resolve().parent
TOP_K = 10
INTRO = ("A small GPT written from scratch in NumPy. Type a prompt in the sidebar: every number "
         "on these pages is computed by the model for *your* text.")

NORM_PAGE = "pages/3_LayerNorm.py"


def stages(config: GPTConfig) -> list[tuple[str, str | None, str]]:
    """(stage, page that shows it, what happens there), named for this model's parts (an
    RMSNorm model says RMSNorm; a rotary model adds no position row). Shapes: stage_shapes."""
    parts = parts_of(config)
    positions = ("the row for its position is added" if parts.position_table else
                 "no position row is added: positions enter inside attention, as rotations "
                 "of the queries and keys")
    return [
        ("Prompt", None, "the text you typed in the sidebar"),
        ("Tokens", "pages/2_Tokens_and_embeddings.py",
         "byte-level BPE cuts the text into pieces from a fixed vocabulary; each piece has an id"),
        ("Embeddings", "pages/2_Tokens_and_embeddings.py",
         f"each id picks a row of the token-embedding matrix; {positions}"),
        ("Transformer blocks", "pages/4_Attention.py",
         f"each block: {parts.norm} → attention (tokens share information) → add; "
         f"{parts.norm} → {parts.mlp} (each token alone) → add"),
        (f"Final {parts.norm}", NORM_PAGE, parts.norm_does),
        ("Output layer", "pages/6_Logits.py",
         "a matrix product turns each d-dimensional vector into one score per vocabulary token"
         + (" (W_out is the token-embedding matrix, transposed)" if config.tie_weights else "")),
        ("Logits", "pages/6_Logits.py",
         "raw scores: higher means the model favours that token"),
        ("Softmax", "pages/7_Softmax_and_sampling.py",
         "scores become probabilities: positive and summing to 1"),
        ("Next token", "pages/8_Decoding.py",
         "pick one (the most likely, or sample) and append it to the prompt to go on"),
    ]


def more_pages(config: GPTConfig) -> list[tuple[str, str]]:
    return [
        (NORM_PAGE, f"{parts_of(config).norm}, step by step"),
        ("pages/5_Residual_stream.py", "The residual stream and the logit lens"),
        ("pages/10_What_if.py", "What if? Break the model on purpose"),
        ("pages/11_Interventions.py",
         "Interventions: patch, ablate and steer the model"),
        ("pages/12_Training.py", "How the model was trained"),
        ("pages/13_Architectures.py",
         "Architectures: GPT-2-style and Llama-style side by side"),
    ]


def stage_shapes(state: AppState) -> list[str]:
    """The live shape of what each stage hands to the next one, in the order of stages()."""
    n, d, v, L, H = state.n, state.d, state.v, state.n_layer, state.n_head
    kv = state.config.kv_heads
    heads = f"{H} heads each" if kv == H else f"{H} query heads, {kv} key/value heads each"
    return [
        f"{len(state.prompt):,} characters",
        f"n = {n} ids",
        f"n × d = {n} × {d}",
        f"{L} blocks, {heads} · n × d = {n} × {d} in and out",
        f"n × d = {n} × {d}",
        f"W_out: d × v = {d} × {v:,}",
        f"n × v = {n} × {v:,}",
        f"n × v = {n} × {v:,}, each row sums to 1",
        "1 token per position (the last one continues the text)",
    ]


def page_link(path: str | None, label: str) -> None:
    """A link to a stage's page, or plain text if that page does not exist (yet)."""
    if path and (HERE / path).is_file():
        st.page_link(path, label=label, icon=":material/arrow_forward:")
    else:
        st.markdown(f"**{label}**")


def draw_pipeline(state: AppState) -> None:
    st.header("The pipeline")
    st.caption(state.sizes())
    shapes = stage_shapes(state)
    for i, (stage, path, what) in enumerate(stages(state.config)):
        with st.container(border=True):
            left, right = st.columns([1, 1], vertical_alignment="center")
            with left:
                page_link(path, f"{i + 1}. {stage}")
            right.markdown(f"**{shapes[i]}**")
            st.caption(what)


def draw_prediction(state: AppState) -> None:
    st.header("What the model guesses next")
    if not guess_first(state):  # the toggle is on and no guess yet: the answer waits
        return
    logits, _ = caches.get_trace(state)
    pos = state.position
    ids, probs = top_k(logits[pos], TOP_K)  # softmax of the model's own logits row
    shown = [token_label(state.tokenizer, i) for i in ids]
    st.markdown(f"After position **{plain(state.labels[pos])}** (choose another position in the "
                f"sidebar), the model's {TOP_K} most likely next tokens:")
    table = pd.DataFrame({
        "token": shown,
        "id": ids,
        "logit": logits[pos, ids].astype(float),
        "probability": probs.astype(float),
    })
    fig = charts.top_probabilities([token_label(state.tokenizer, i, show_id=True) for i in ids],
                                   probs, shape(f"Top {TOP_K} of the softmax of logits[{pos}]",
                                                v=state.v))
    show_chart(fig, f"next_token_top{TOP_K}", table, key="home.next_token",
               alt=alt_text.top_items(shown, probs, f"Most likely after {state.labels[pos]}"))
    st.page_link("pages/14_Why_this_token.py",
                 label="Why this token? Take the top guess apart",
                 icon=":material/psychology_alt:")
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"probability": st.column_config.NumberColumn(format="%.4f"),
                                "logit": st.column_config.NumberColumn(format="%.3f")})
    explain("Softmax turns the row of logits z (one score per vocabulary token) into "
            "probabilities: exponentiate each score, then divide by the total.",
            r"p_i = \frac{e^{z_i}}{\sum_{j=1}^{v} e^{z_j}}")


MAX_CARDS_SHOWN = 6  # the models folder's cards drawn on Home


def draw_this_model(state: AppState) -> None:
    """One line near the top: what the model in use is and what it cannot know (its card)."""
    card = read_card(state.model_id)
    if card is None:
        st.caption(NO_CARD)
    else:
        st.caption(plain(f"This model: {headline(card)}."
                         + (f" It cannot know {card.cannot_know}." if card.cannot_know else "")))


def draw_models(state: AppState) -> None:
    """Every model of the models folder as its card says (a model trained here has none)."""
    st.header("The models")
    listed = available_models()
    for model_id in listed[:MAX_CARDS_SHOWN]:
        card = read_card(model_id)
        with st.container(border=True):
            title = ((card.name if card and card.name else model_id)
                     + (" (in use)" if model_id == state.model_id else ""))
            if card is None:
                st.markdown(f"**{plain(title)}**")
            widgets.model_card(card, title=title)  # no card: one line saying so
    if len(listed) > MAX_CARDS_SHOWN:
        st.caption(f"The first {MAX_CARDS_SHOWN} of {len(listed)} models.")
    st.caption("Each model's facts come from its card file beside it in the models folder "
               "(models/<name>.card.json); choose a model in the sidebar.")


def home() -> None:
    with page("tinygpt: how a GPT guesses the next token", intro=INTRO) as state:
        chips([(token_label(state.tokenizer, t), f"id {int(t)}") for t in state.ids],
              highlight=state.position)
        # short: a page link does not wrap, and a phone cut the longer one at its edge
        page_link("pages/1_Lesson.py", "New here? The guided lesson, in ten steps")
        draw_this_model(state)
        pipeline, prediction = columns([3, 2], gap="large")
        with pipeline:
            draw_pipeline(state)
        with prediction:
            draw_prediction(state)
        st.header("More")
        for path, label in more_pages(state.config):
            if (HERE / path).is_file():
                st.page_link(path, label=label, icon=":material/arrow_forward:")
        draw_models(state)


def main() -> None:
    """Apply the process settings, plug in the hosting wing, then run the page the URL asks for."""
    settings.configure_process()
    load_wing()  # once per process; without the wing, the app serves one user
    host().configure_process()
    host().streamlit.check()  # once per process: logs each feature a Streamlit upgrade broke
    # Streamlit's own menu is hidden: with sections it draws <div>s inside its <ul> (axe-core
    # "list" and "listitem", serious, on every page); the sidebar draws the same sections as
    # plain links instead (frame.page_menu).
    # The whole run takes its turn, from here: what every page does before its body (the menu,
    # the sidebar, the browser token, the live class's hooks) costs too, and a script opening
    # sessions by the hundred would otherwise run all of that beside the class's runs, outside
    # the line (issue 26: the students' page runs took 4x their CPU time to finish).
    with fair_turn():
        navigation.navigate(home)


main()
