"""Tokens and embeddings: text -> token ids (BPE) -> token embedding (+ position embedding, for a
model with a learned position table; a rotary model adds positions inside attention)."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt_app.charts import tokens as charts
from tinygpt_app.charts.common import first_row_within_budget
from tinygpt_app.compute import caches
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import CHUNK, TOKENS_VIEW
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import byte_note, byte_pieces, chip_captions, shape, token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control, start_from
from tinygpt_app.kit.widgets import chips, chips_html, explain, grid_table, number_table, show_chart

VIEWS = {  # choice -> trace name
    "Token embedding E[id]": "embed.token",
    "Position embedding P[t]": "embed.position",
    "Sum: the block input x = E[id] + P[t]": "embed.sum",
}
MAX_TABLE_DIMS = 8  # how many dimensions the worked example prints
MAX_DRAWN_STEPS = 32  # merge rows drawn per chunk ("the first N of M merges")
MAX_ROW_CHIPS = 40  # token chips drawn per row, around the merge
MAX_CHUNK_LABEL = 24  # characters of a chunk shown in the chunk menu


def draw_tokens(state: AppState) -> None:
    st.header("1. The prompt as tokens")
    tok = state.tokenizer
    texts = [token_label(tok, t) for t in state.ids]
    chips(list(zip(texts, chip_captions(tok, state.ids), strict=True)), highlight=state.position)
    note = byte_note(byte_pieces(tok, state.ids))  # "🍕" as four bytes: said, not left a puzzle
    if note:
        st.caption(plain(note))
    explain(f"The tokenizer cut your prompt into **n = {state.n}** tokens from a vocabulary of "
            f"**v = {state.v:,}**. A space is drawn as `·`; the inspected position is in bold "
            "with a thick red border. The model never sees letters, only these ids.")
    raw = [tok.token_bytes(int(t)) for t in state.ids]
    table = pd.DataFrame({
        "position": range(state.n),
        "token": texts,
        "id": state.ids,
        "bytes (hex)": [data.hex(" ") for data in raw],
        "byte count": [len(data) for data in raw],
    })
    with st.expander(f"Table of the {state.n} tokens with their UTF-8 bytes"):
        st.dataframe(table, hide_index=True, width="stretch", height=min(400, 40 + 35 * state.n))


def choose_chunk(state: AppState, chunks) -> int:
    """The chunk to replay: offered from the first one inside the window; a new prompt or
    position starts from the chunk of the inspected token."""
    first = chunks.chunk_of_token(-state.n)  # the window is the last n tokens
    inspected = chunks.chunk_of_token(state.position - state.n)
    start_from("tokens.chunk", inspected, origin=(state.model_id, hash(state.prompt),
                                                  state.position), spec=CHUNK)
    return control(st.selectbox, "Chunk to replay", "tokens.chunk", CHUNK, default=inspected,
                   choices=list(range(first, len(chunks))),
                   format_func=lambda i: chunk_label(i, chunks[i]))


def chunk_label(i: int, chunk) -> str:
    """A chunk in the menu: its number, text, and how many merges made it (or taken whole)."""
    how = "taken whole" if chunk.taken_whole else f"{chunk.steps_total} merges"
    return f"{i}: {short_text(chunk.text)} ({how})"


def short_text(text: str) -> str:
    """A chunk's text for a menu: its repr, cut to MAX_CHUNK_LABEL characters."""
    shown = repr(text[:MAX_CHUNK_LABEL])
    return shown if len(text) <= MAX_CHUNK_LABEL else f"{shown}… ({len(text):,} characters)"


def replay_rows(tok, chunk) -> list[tuple[str, list[int], int | None]]:
    """(caption, tokens, new id) of each recorded step: the start, then each merge kept."""
    rows = [("start: one token per byte", chunk.initial, None)]
    if chunk.taken_whole:
        rows.append((f"taken whole: {token_label(tok, chunk.final[0])} (id {chunk.final[0]})",
                     chunk.final, chunk.final[0]))
    for k, step in enumerate(chunk.steps[:MAX_DRAWN_STEPS], start=1):
        a, b = (token_label(tok, i) for i in step.pair)
        rows.append((f"merge {k}: {a} + {b} → {token_label(tok, step.new_id)} "
                     f"(id {step.new_id})", step.tokens, step.new_id))
    return rows


def row_html(tok, caption: str, tokens: list[int], new_id: int | None) -> str:
    """One replay row: at most MAX_ROW_CHIPS chips, around the first place the merge made."""
    where = tokens.index(new_id) if new_id in tokens else 0
    shown = ti.position_window(len(tokens), where, MAX_ROW_CHIPS)
    items = [(token_label(tok, tokens[t]), str(int(tokens[t]))) for t in shown]
    if len(shown) < len(tokens):
        caption += f" · tokens {shown[0]}–{shown[-1]} of {len(tokens):,}"
    highlight = where - shown[0] if new_id in tokens else None
    return (f'<div style="margin:6px 0 10px 0"><small style="opacity:0.8">'
            f"{html.escape(caption)}</small>{chips_html(items, highlight=highlight)}</div>")


def draw_merges(state: AppState) -> None:
    st.header("2. How byte-pair encoding built them")
    tok = state.tokenizer
    chunks = caches.bpe_replay(state)
    explain("First the text is split into chunks (a word with the space before it, a run of "
            "digits, a run of punctuation...). Each chunk starts as its UTF-8 bytes, one token "
            "per byte. Then the learned merges run in the order they were learned: wherever "
            "two neighbouring tokens form a learned pair, they become one new token. It stops "
            "when no learned pair is left.")
    shown = "" if len(chunks) == chunks.chunks_total else f" (the last {len(chunks)} replayed)"
    st.caption(f"{chunks.chunks_total:,} chunks{shown}, "
               f"{chunks.steps_total:,} merges in the chunks replayed.")
    chunk = chunks[choose_chunk(state, chunks)]
    if chunk.is_special:
        st.text(f"{chunk.text} is a special token: it gets its own id {chunk.initial[0]} "
                "directly, without any merging.")
        return
    if chunk.taken_whole:
        st.text(f"{chunk.text!r} is one token of the vocabulary (id {chunk.final[0]}), so it "
                "is taken whole: this tokenizer (ignore_merges) gives a chunk that is already "
                "a vocabulary token its id at once, without running any merge.")
    rows = replay_rows(tok, chunk)
    if len(rows) - 1 < chunk.steps_total:
        st.caption(f"Showing the first {len(rows) - 1} of {chunk.steps_total:,} merges of this "
                   f"chunk, each row cut to at most {MAX_ROW_CHIPS} tokens.")
    st.markdown("".join(row_html(tok, *row) for row in rows), unsafe_allow_html=True)


ROTARY_VIEWS = {"Token embedding E[id]: the block input x": "embed.token"}


def explain_embeddings(state: AppState) -> dict[str, str]:
    """The section's header and explanation for this model's positions; the views it offers.
    A rotary model has no position table: positions enter inside attention."""
    n, d = state.n, state.d
    parts = state.parts
    if not parts.position_table:
        st.header("3. Token embedding = the input (positions come later)")
        explain(
            f"Each token id picks one row (length d = {d}) of the token-embedding matrix E "
            f"(v × d = {state.v:,} × {d}), and that row is what the first block reads. This "
            f"model ({parts.family}) has no position table: it uses {parts.positions}. "
            "Inside every attention layer each query and key is turned by an angle that "
            "grows with its position, so the scores depend on how far apart two tokens are.",
            (r"x_t = E[\mathrm{id}_t]", r"x \in \mathbb{R}^{n \times d}"),
        )
        return ROTARY_VIEWS
    st.header("3. Token embedding + position embedding = the input")
    explain(
        f"Each token id picks one row (length d = {d}) of the token-embedding matrix E "
        f"(v × d = {state.v:,} × {d}). Each position t picks row t of the position-embedding "
        f"matrix P ({state.config.n_ctx} × {d}), so the model knows where the token stands. "
        f"Their sum is what the first block reads ({n} × {d}).",
        (r"x_t = E[\mathrm{id}_t] + P[t]", r"x \in \mathbb{R}^{n \times d}"),
    )
    return VIEWS


def draw_embeddings(state: AppState, trace) -> None:
    n, d = state.n, state.d
    views = explain_embeddings(state)
    view = control(st.radio, "Show", "tokens.view", TOKENS_VIEW, default=next(iter(views)),
                   choices=list(views), horizontal=True)
    name = views[view]
    start = first_row_within_budget(n, d)
    if start:
        st.caption(f"Only the last {n - start} rows are drawn to keep the page light.")
    z, rows, dims = trace[name][start:], state.labels[start:], [str(j) for j in range(d)]
    show_chart(charts.embedding_heatmap(z, shape(view, n=n - start, d=d), rows, dims),
               name.replace(".", "_"), grid_table(z, rows, dims, "position: token", "dimension"),
               key="tokens.embeddings",
               alt=alt_text.grid(z, rows, [f"dimension {j}" for j in dims], view))
    draw_worked_example(state, trace, views is VIEWS)


def draw_worked_example(state: AppState, trace, with_positions: bool) -> None:
    t, d = state.position, state.d
    k = min(MAX_TABLE_DIMS, d)
    token_row = f"E[{int(state.ids[t])}]"
    if not with_positions:
        st.markdown(f"**The numbers** at position {plain(state.labels[t])} (first {k} of {d} "
                    "dimensions): the block input is the token's row of E itself.")
        number_table(pd.DataFrame([trace["embed.token"][t, :k], trace["embed.sum"][t, :k]],
                                  index=pd.Index([token_row, "x = E"], name="vector"),
                                  columns=[f"dim {j}" for j in range(k)]))
        return
    st.markdown(f"**Check it with numbers** at position {plain(state.labels[t])} "
                f"(first {k} of {d} dimensions): the third row is the sum of the first two.")
    number_table(pd.DataFrame(
        [trace["embed.token"][t, :k], trace["embed.position"][t, :k], trace["embed.sum"][t, :k]],
        index=pd.Index([token_row, f"P[{t}]", "x = E + P"], name="vector"),
        columns=[f"dim {j}" for j in range(k)],
    ))


with page("Tokens and embeddings") as state:
    _, trace = caches.get_trace(state)
    draw_tokens(state)
    draw_merges(state)
    draw_embeddings(state, trace)
