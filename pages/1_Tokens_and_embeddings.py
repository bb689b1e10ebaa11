"""Tokens and embeddings: text -> token ids (BPE) -> token embedding + position embedding."""

from __future__ import annotations

import html

import pandas as pd
import streamlit as st

import ui

VIEWS = {  # choice -> trace name
    "Token embedding E[id]": "embed.token",
    "Position embedding P[t]": "embed.position",
    "Sum: the block input x = E[id] + P[t]": "embed.sum",
}
MAX_TABLE_DIMS = 8  # how many dimensions the worked example prints


def bytes_hex(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data)


def draw_tokens(state: ui.AppState) -> None:
    st.subheader("1. The prompt as tokens")
    tok = state.tokenizer
    chips = [(ui.token_text(tok, t), f"id {int(t)}") for t in state.ids]
    st.markdown(ui.chips_html(chips, highlight=state.position), unsafe_allow_html=True)
    ui.explain(f"The tokenizer cut your prompt into **n = {state.n}** tokens from a vocabulary of "
               f"**v = {state.v:,}**. A space is drawn as `·`; the inspected position has a red "
               "border. The model never sees letters, only these ids.")
    table = pd.DataFrame({
        "position": range(state.n),
        "token": [ui.token_text(tok, t) for t in state.ids],
        "id": state.ids,
        "bytes (hex)": [bytes_hex(tok.token_bytes(int(t))) for t in state.ids],
        "byte count": [len(tok.token_bytes(int(t))) for t in state.ids],
    })
    with st.expander(f"Table of the {state.n} tokens with their UTF-8 bytes"):
        st.dataframe(table, hide_index=True, width="stretch", height=min(400, 40 + 35 * state.n))


def chunk_of_position(chunks, position: int, offset: int) -> int:
    """Index of the chunk that produced token `position` (offset = tokens cut off the front)."""
    target, seen = position + offset, 0
    for i, chunk in enumerate(chunks):
        seen += len(chunk.final)
        if target < seen:
            return i
    return len(chunks) - 1


def draw_merges(state: ui.AppState) -> None:
    st.subheader("2. How byte-pair encoding built them")
    tok = state.tokenizer
    chunks = ui.bpe_replay(state)
    total = sum(len(c.final) for c in chunks)
    offset = total - state.n  # tokens dropped at the front when the prompt is too long
    ui.explain("First the text is split into chunks (a word with the space before it, a run of "
               "digits, a run of punctuation...). Each chunk starts as its UTF-8 bytes, one token "
               "per byte. Then the learned merges run in the order they were learned: wherever "
               "two neighbouring tokens form a learned pair, they become one new token. It stops "
               "when no learned pair is left.")
    st.caption(f"{len(chunks)} chunks, {sum(len(c.steps) for c in chunks)} merges in total.")
    first = chunk_of_position(chunks, 0, offset)  # chunks cut off in front are not offered
    options = list(range(first, len(chunks)))
    default = chunk_of_position(chunks, state.position, offset) - first
    choice = st.selectbox(
        "Chunk to replay", options, index=default,
        # a new prompt or position starts from the chunk of the inspected token
        key=f"tok_chunk_{state.position}_{hash(state.prompt)}",
        format_func=lambda i: f"{i}: {chunks[i].text!r} ({len(chunks[i].steps)} merges)",
    )
    chunk = chunks[choice]
    if chunk.is_special:
        st.markdown(f"`{chunk.text}` is a special token: it gets its own id "
                    f"{chunk.initial[0]} directly, without any merging.")
        return
    rows = [("start: one token per byte", chunk.initial, None)]
    for k, step in enumerate(chunk.steps, start=1):
        a, b = (ui.token_text(tok, i) for i in step.pair)
        rows.append((f"merge {k}: {a} + {b} → {ui.token_text(tok, step.new_id)} "
                     f"(id {step.new_id})", step.tokens, step.new_id))
    steps_html = []
    for caption, tokens, new_id in rows:
        chips = [(ui.token_text(tok, t), str(int(t))) for t in tokens]
        highlight = tokens.index(new_id) if new_id in tokens else None
        steps_html.append(f'<div style="margin:6px 0 10px 0"><small style="color:#52606d">'
                          f"{html.escape(caption)}</small>"
                          f"{ui.chips_html(chips, highlight=highlight)}</div>")
    st.markdown("".join(steps_html), unsafe_allow_html=True)


def draw_embeddings(state: ui.AppState, trace) -> None:
    st.subheader("3. Token embedding + position embedding = the input")
    n, d = state.n, state.d
    ui.explain(
        f"Each token id picks one row (length d = {d}) of the token-embedding matrix E "
        f"(v × d = {state.v:,} × {d}). Each position t picks row t of the position-embedding "
        f"matrix P ({state.config.n_ctx} × {d}), so the model knows where the token stands. "
        "Their sum is what the first block reads.",
        r"x_t = E[\mathrm{id}_t] + P[t] \qquad x \in \mathbb{R}^{n \times d}",
    )
    view = st.radio("Show", list(VIEWS), horizontal=True, key="tok_view")
    name = VIEWS[view]
    start = ui.first_row_within_budget(n, d)
    if start:
        st.caption(f"Only the last {n - start} rows are drawn to keep the page light.")
    z, rows, dims = trace[name][start:], state.labels[start:], [str(j) for j in range(d)]
    fig = ui.heatmap(z, ui.shape(view, n=n - start, d=d), y_labels=rows, x_labels=dims,
                     x_title="embedding dimension", y_title="position: token")
    ui.show_chart(fig, name.replace(".", "_"),
                  ui.grid_table(z, rows, dims, "position: token", "dimension"))

    t = state.position
    k = min(MAX_TABLE_DIMS, d)
    st.markdown(f"**Check it with numbers** at position {state.labels[t]} "
                f"(first {k} of {d} dimensions): the third row is the sum of the first two.")
    example = pd.DataFrame(
        [trace["embed.token"][t, :k], trace["embed.position"][t, :k], trace["embed.sum"][t, :k]],
        index=[f"E[{int(state.ids[t])}]", f"P[{t}]", "x = E + P"],
        columns=[f"dim {j}" for j in range(k)],
    )
    ui.number_table(example)


def main() -> None:
    ui.page_setup("Tokens and embeddings")
    with ui.guard():
        state = ui.sidebar()
        if state is None or not state.ready:
            return
        _, trace = ui.get_trace(state)
        draw_tokens(state)
        draw_merges(state)
        draw_embeddings(state, trace)


main()
