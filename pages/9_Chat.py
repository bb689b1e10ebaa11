"""What a chat model really reads: the messages typed here, rendered by the model's own chat
template into one text, its tokens with the turn markers marked, and the assistant's answer
written token by token with the probability of each token."""

from __future__ import annotations

import streamlit as st

from tinygpt.decoding.generation import Run
from tinygpt.readouts import chat
from tinygpt.tokenizer.chat_template import ChatTemplateError
from tinygpt_app.compute import caches
from tinygpt_app.kit.controls import NEW
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import CHIP_COLOURS, chips, explain
from tinygpt_app.sections import decoding_runs

INTRO = ("A chat box shows messages. The model never sees them: its chat template writes the "
         "whole conversation out as one text, with special tokens around each turn, and the "
         "model continues that text.")
NO_TEMPLATE = ("This model's files carry no chat template: it was trained on plain text, not "
               "on conversations. Choose a chat model (such as SmolLM2-135M-Instruct) in the "
               "sidebar.")
MAX_MESSAGE = 2_000  # characters a box takes
MAX_CHIPS = 400  # token chips drawn ("the last N of M")
MAX_NEW = 64
SPECIAL_COLOUR = "#ffd166"  # a special token's chip (its caption says "special" too)
BOXES = [  # (role, label, key, default)
    ("system", "System message (optional)", "chat.system", ""),
    ("user", "An earlier question (optional)", "chat.user_before", ""),
    ("assistant", "The assistant's earlier answer (optional)", "chat.assistant_before", ""),
    ("user", "Your message", "chat.user", "What is the capital of France?"),
]


def typed_messages() -> list[dict[str, str]]:
    turns = []
    for role, label, key, default in BOXES:
        text = st.text_area(label, value=default, key=key, max_chars=MAX_MESSAGE,
                            height=90 if key == "chat.user" else 68)
        turns.append((role, text))
    return chat.conversation(turns)


def new_tokens(state: AppState) -> int:
    default = min(MAX_NEW, 2 * decoding_runs.default_new_tokens(state.model))
    return control(st.slider, "New tokens of the answer", "chat.new", NEW, default=default,
                   hi=MAX_NEW, min_value=1, max_value=MAX_NEW, step=1)


def exact_code(text: str) -> None:
    """A text in a code block, every character kept (st.code drops one leading and one trailing
    newline: two are given)."""
    st.code(f"\n{text}\n" if text else " ", language=None, wrap_lines=True)


def draw_text(read: chat.ChatRead) -> None:
    st.header("1. The text the model reads")
    exact_code(read.text)
    ends = len(read.text) - len(read.text.rstrip("\n"))
    st.caption(f"{len(read.text):,} characters, written by the model's chat template from "
               "your messages; it ends with the opening of the assistant's turn"
               + (f" and {ends} newline{'s' * (ends > 1)}." if ends else "."))


def draw_tokens(state: AppState, read: chat.ChatRead) -> None:
    st.header("2. Its tokens")
    tok, ids = state.tokenizer, read.ids[-MAX_CHIPS:]
    special = read.special[-MAX_CHIPS:]
    items = [(token_label(tok, t), ("special · " if s else "") + f"id {t}")
             for t, s in zip(ids, special, strict=True)]
    colours = [SPECIAL_COLOUR if s else CHIP_COLOURS[i % len(CHIP_COLOURS)]
               for i, s in enumerate(special)]
    chips(items, colours=colours)
    shown = len(ids)
    if shown < read.total:
        st.caption(f"The last {shown:,} of {read.total:,} tokens"
                   + (" (the model's context keeps only these)." if read.cut else "."))
    explain(f"**{read.n_special:,}** of the **{len(read.ids):,}** tokens are special "
            "tokens (amber, captioned *special*): single tokens the tokenizer never cuts, "
            "which mark where a turn starts and ends and who speaks. The model learned what "
            "they mean from millions of conversations written this way.")


def draw_answer(state: AppState, read: chat.ChatRead, new: int) -> None:
    st.header("3. The assistant's answer, token by token")
    eos = getattr(state.tokenizer, "eos_token_id", None)
    runs = {"greedy": Run(strategy="greedy", max_new_tokens=new, eos_token_id=eos,
                          record_steps=False)}
    subject = decoding_runs.subject_of(state.model_id, read.ids)
    made = caches.made_generations(state, read.ids, runs)["greedy"]
    if made is None and decoding_runs.writes_on_demand(state.model):
        if "greedy" not in decoding_runs.asked_runs(subject):
            st.button("Write the answer", key="chat.write", type="primary",
                      on_click=decoding_runs.ask, args=(subject, ["greedy"]),
                      help=f"{new} new tokens, each the model's most likely one.")
            st.caption(f"This model has {state.model.num_parameters() / 1e6:,.0f} M "
                       "parameters: its answer is written when you ask for it.")
            return
    holder = st.empty()

    def watch(written) -> None:
        with holder.container():
            exact_code(state.tokenizer.decode([int(t) for t in written["greedy"]]))
            st.caption(f"Writing… {len(written['greedy'])} of {new} new tokens")

    result = made or caches.generations(state, read.ids, runs, watch=watch)["greedy"]
    with holder.container():
        show_answer(state, result[0], new)


def show_answer(state: AppState, result, new: int) -> None:
    tok = state.tokenizer
    exact_code(tok.decode([int(t) for t in result.tokens]))
    items = [(token_label(tok, t), f"p {step.prob:.3f}")
             for t, step in zip(result.tokens, result.steps, strict=True)]
    chips(items, highlight=len(items) - 1 if result.stop_reason == "eos" else None)
    if result.stop_reason == "eos":
        st.caption(f"The model ended its turn after {len(items)} tokens with the special token "
                   f"{plain(token_label(tok, result.tokens[-1]))} (red border).")
    else:
        st.caption(f"Stopped after the {new} new tokens asked for (the model had not ended "
                   "its turn).")
    explain("Each token is the model's most likely next token (greedy decoding); under it, "
            "its probability. The answer is the model continuing the text above, nothing "
            "more: the chat box only hides the markers.")


with page("What a chat model really reads", intro=INTRO, needs_prompt=False) as state:
    if not chat.has_chat_template(state.tokenizer):
        st.info(NO_TEMPLATE)
        st.stop()
    messages = typed_messages()
    if not messages:
        st.info("Type a message to see what the model reads.")
        st.stop()
    new = new_tokens(state)
    room = state.config.n_ctx - new
    try:
        read = chat.read_chat(state.tokenizer, messages, room)
    except (ChatTemplateError, ValueError) as err:
        st.warning(f"The chat template could not be rendered: {plain(err)}")
        st.stop()
    draw_text(read)
    draw_tokens(state, read)
    draw_answer(state, read, new)
