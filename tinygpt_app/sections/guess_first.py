"""Guess first, alone: on the home page, the model's answer waits until the student has typed a
guess, then the guess is scored against the model's own next-token probabilities (the same
game a live class plays in rounds: tinygpt_hosting.classroom.rounds)."""

from __future__ import annotations

import streamlit as st

from tinygpt import readouts as ti
from tinygpt_app.compute import caches
from tinygpt_app.kit import state as s
from tinygpt_app.kit.controls import TOP_P
from tinygpt_app.kit.labels import token_label


def guess_token(tokenizer, typed: str, new_word: bool) -> str:
    """The guess as sent: typed text, with a space in front for a new word."""
    return " " + typed if new_word and typed and not typed[0].isspace() else typed


def guess_first(state: s.AppState) -> bool:
    """The same game without a class: with the toggle on, the model's answer waits until a guess
    is typed, then the guess is scored. Returns whether the answer may show now."""
    if not st.toggle("Guess first (hide the model's answer until you guess)",
                     key="home.guess_first"):
        return True
    typed = st.text_input("Your guess for the token after the inspected position",
                          key="home.guess", max_chars=32)
    new_word = st.checkbox("It starts a new word (put a space before it)",
                           key="home.guess_new_word", value=True)
    token = ti.first_token(state.tokenizer, guess_token(state.tokenizer, typed, new_word))
    if token is None:
        st.caption("The model's answer shows here once you have guessed.")
        return False
    logits = caches.get_trace(state)[0]
    probs = ti.probabilities(logits[state.position])
    top_p = float(s.control_value(TOP_P.name, TOP_P.default))
    report = ti.guess_report(probs, [token], [1], top_p)
    st.text(f"Your guess is the token {token_label(state.tokenizer, token)} (id {token}).")
    cols = st.columns(3)
    cols[0].metric("The model's probability", f"{float(report.probs[0]):.2%}")
    cols[1].metric("Its rank", f"{int(report.ranks[0]):,} of {state.v:,}")
    cols[2].metric(f"Kept by top-p {top_p:g}", "yes" if report.kept[0] else "no")
    return True
