"""The guided lesson: ten steps from the student's text to the next token, each with a short
paragraph, the one chart that matters and the model's own numbers for this prompt.

A step is a `Step`: its title, the page that shows the stage in full, and a function that
draws it. The functions only read (the cached trace, the readouts) and draw (the chart
builders of each stage); the page pages/1_Lesson.py adds the step control and Back / Next.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import streamlit as st

from tinygpt import readouts as ti
from tinygpt.decoding.generation import Run, process_logits
from tinygpt.network.config import GPTConfig
from tinygpt.readouts import lesson as lr
from tinygpt.readouts.modern.rms_norm import rms_norm_statistics
from tinygpt.readouts.parts import parts_of
from tinygpt_app.charts import attention as attention_charts
from tinygpt_app.charts import layernorm as layernorm_charts
from tinygpt_app.charts import logits as logits_charts
from tinygpt_app.charts import residual as residual_charts
from tinygpt_app.charts import sampling as sampling_charts
from tinygpt_app.charts import tokens as tokens_charts
from tinygpt_app.charts.common import MAX_HEATMAP_CELLS, bar, first_row_within_budget
from tinygpt_app.compute import caches, readout_cache
from tinygpt_app.kit import alt_text, notices
from tinygpt_app.kit.labels import (
    byte_note,
    byte_pieces,
    chip_captions,
    shape,
    token_label,
)
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, use_position, use_prompt
from tinygpt_app.kit.widgets import chips, grid_table, page_link, series_table, show_chart

TOP_P, SEED = 0.9, 0  # the Softmax and sampling page's own defaults (temperature 1, no top-k)
TOP_SHOWN = 10  # bars of the softmax step
MIN_SEGMENT = 0.005  # tokens below this share one grey stretch of the draw bar
MAX_CURVE = 2_000  # ranks drawn on the cumulative curve at most
GREEDY_NEW = 40  # tokens greedy decoding may write in the last step (the Decoding page's default)


@dataclass(frozen=True)
class Step:
    """One step of the lesson."""

    title: str
    page: str  # the page file that shows this stage in full
    link_label: str
    draw: Callable[[AppState, np.ndarray, object], dict[str, str]]  # -> the full page's link


def percent(p: float) -> str:
    """A probability as the lesson writes it: 0.2341 -> "23.4 %"."""
    return f"{100 * p:.1f} %"


def tok(state: AppState, token_id: int) -> str:
    """A token for the lesson's markdown: its label, escaped, in bold."""
    return f"**{plain(token_label(state.tokenizer, int(token_id)))}**"


def at_position(state: AppState) -> str:
    """The inspected token, for the text: "**·the** (position 10)"."""
    t = state.position
    return f"{tok(state, state.ids[t])} (position {t})"


def pos_link(state: AppState, **more: str) -> dict[str, str]:
    return {"pos": str(state.position), **more}


# ----------------------------------------------------------------------------- the steps


def draw_tokens(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    captions = chip_captions(state.tokenizer, state.ids)
    chips([(token_label(state.tokenizer, t), c) for t, c in zip(state.ids, captions, strict=True)],
          highlight=state.position)
    note = byte_note(byte_pieces(state.tokenizer, state.ids))
    if note:
        st.caption(plain(note))
    st.markdown(
        f"A GPT never reads letters. The `BPETokenizer` cut your prompt of "
        f"**{len(state.prompt):,} characters** into **{state.n} tokens**: common words come "
        "out whole, rarer ones in pieces (a space is drawn as `·`). Each piece is looked up in "
        f"a vocabulary of **vocab_size = {state.v:,}** entries and replaced by its number, its "
        "id. From here on the model only sees these ids.")
    st.markdown(f"The token with the red border, {at_position(state)}, is the one this lesson "
                "follows; choose another with *Position inspected* in the sidebar.")
    sizes = [len(state.tokenizer.token_bytes(int(t))) for t in state.ids]
    fig = bar(sizes, f"Bytes of text per token (n = {state.n})",
              x_labels=state.labels, x_title="position: token", y_title="bytes")
    show_chart(fig, "lesson_token_bytes", series_table({"bytes": sizes}, state.labels,
                                                       "position: token"),
               key="lesson.chart_tokens",
               alt=alt_text.bars(state.labels, sizes, "Bytes of text per token", fmt=".0f"))
    return pos_link(state)


def draw_embeddings(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    n, d, t = state.n, state.d, state.position
    learned = state.parts.position_table  # False: rotary positions, in attention
    first = ", ".join(f"{x:+.3f}" for x in trace["embed.sum"][t, :3])
    where = ("and the row for its position is added, so the same word at two places looks a "
             "little different" if learned else
             "and nothing else: no position row is added. This model learns where a token is "
             "inside attention, where each query and key is turned by an angle that grows with "
             "its position (rotary positions)")
    st.markdown(
        f"Each id picks one row of **embedding_dim = {d}** numbers from the token-embedding "
        f"table of the `EmbeddingLayer` ({state.v:,} rows, one per token), {where}. "
        f"Your {n} tokens are now a table of **{n} × {d} = {n * d:,} numbers**. "
        f"The first three of {at_position(state)} are {first}.")
    start = first_row_within_budget(n, d)
    z, rows, dims = trace["embed.sum"][start:], state.labels[start:], [str(j) for j in range(d)]
    if start:
        st.caption(f"The last {n - start} of {n} rows are drawn.")
    what = "Token + position embedding" if learned else "Token embedding"
    fig = tokens_charts.embedding_heatmap(z, shape(what, n=n - start, d=d), rows, dims)
    show_chart(fig, "lesson_embeddings", grid_table(z, rows, dims, "position: token",
                                                    "dimension"), key="lesson.chart_embeddings",
               alt=alt_text.grid(z, rows, dims, what))
    return pos_link(state)


def layer_norm_histogram(state: AppState, trace, name: str, stage: str, title: str,
                         marks: bool) -> None:
    """One token's vector at a norm (`stage`: input / normalized / output) as a histogram,
    marked with LayerNorm's mean and mean ± std or RMSNorm's ± rms when `marks`."""
    t = state.position
    values = trace[f"{name}.{stage}"][t]  # (d,)
    extra = {}
    if marks and state.config.norm == "rmsnorm":
        extra = dict(rms=float(rms_norm_statistics(state.model, trace, name).rms[t]))
    elif marks:
        stats = ti.layer_norm_statistics(state.model, trace, name)
        extra = dict(mean=float(stats.mean[t]), std=float(stats.std[t]))
    fig = layernorm_charts.histogram(values, shape(title, d=state.d), **extra)
    show_chart(fig, f"lesson_{name.replace('.', '_')}_{stage}",
               series_table({stage: values}, range(state.d), "dimension"),
               key=f"lesson.chart_{name}",
               alt=alt_text.spread(values, f"{title} (one token's {state.d} numbers)"))


# What the lesson says of a LayerNorm's input at the inspected token ({at}); {mu}, {sigma} and
# {denominator} are the model's own statistics of that row, {d} its length.
FIRST_NORM_WORDS = (
    "Each `TransformerBlock` first tidies every token's vector on its own. For {at} the {d} "
    "numbers entering block 0 have mean **μ = {mu}** and standard deviation **σ = {sigma}**. "
    "LayerNorm subtracts μ and divides by √(σ² + ε) = {denominator}, so the numbers get mean 0 "
    "and spread 1 whatever their size was; then a learned scale γ and shift β (one per "
    "dimension) give them the spread the model wants.")
FINAL_NORM_WORDS = (
    "After the last block, one more LayerNorm. The vector of {at} arrives with mean μ = {mu} "
    "and standard deviation **σ = {sigma}**; it leaves centred and rescaled, then stretched by "
    "the final γ and shifted by β. This is the vector h the output layer reads: whatever the "
    "blocks wrote, it comes in at a size the output layer expects.")


# ... and of an RMSNorm's (Llama, Qwen2): {rms} what it divides by, {mu} the mean it keeps
FIRST_RMS_WORDS = (
    "Each `TransformerBlock` first tidies every token's vector on its own. For {at} the {d} "
    "numbers entering block 0 have root mean square **rms = {rms}**. RMSNorm divides them by "
    "it, so they come out with root mean square 1 whatever their size was; then a learned "
    "scale γ (one per dimension) gives them the size the model wants. Unlike GPT-2's "
    "LayerNorm it subtracts no mean (here μ = {mu} stays) and adds no shift β.")
FINAL_RMS_WORDS = (
    "After the last block, one more RMSNorm. The vector of {at} arrives with root mean "
    "square **rms = {rms}**; it leaves divided by it and stretched by the final γ. This is "
    "the vector h the output layer reads: whatever the blocks wrote, it comes in at a size "
    "the output layer expects.")


def say_norm_input(state: AppState, trace, name: str, words: str, rms_words: str) -> None:
    """`words` (LayerNorm) or `rms_words` (RMSNorm) with the statistics of what enters the
    norm `name` at the inspected token (only the template is formatted: the token's text is a
    value, never a format)."""
    t = state.position
    if state.config.norm == "rmsnorm":
        rms = rms_norm_statistics(state.model, trace, name)
        st.markdown(rms_words.format(at=at_position(state), d=state.d,
                                     rms=f"{float(rms.rms[t]):.4f}",
                                     mu=f"{float(rms.mean[t]):+.4f}"))
        return
    stats = ti.layer_norm_statistics(state.model, trace, name)
    st.markdown(words.format(
        at=at_position(state), d=state.d, mu=f"{float(stats.mean[t]):+.4f}",
        sigma=f"{float(stats.std[t]):.4f}", denominator=f"{float(stats.denominator[t]):.4f}"))


def draw_layer_norm(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    say_norm_input(state, trace, "blocks.0.ln1", FIRST_NORM_WORDS, FIRST_RMS_WORDS)
    norm = state.parts.norm
    layer_norm_histogram(state, trace, "blocks.0.ln1", "input",
                         f"Into {norm}: {state.labels[state.position]}", marks=True)
    st.caption("Orange dotted lines: ± rms, what RMSNorm divides by." if norm == "RMSNorm"
               else "Red dashed line: the mean μ; orange dotted lines: μ ± σ.")
    return pos_link(state)


def draw_attention(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    t, n = state.position, state.n
    look = lr.strongest_look(trace, state.n_layer, state.n_head, t)
    st.markdown(
        "Attention is where tokens share information. In every block, each of the "
        f"{state.n_head} heads of `Attention` lets a token take a weighted mix of the earlier "
        "tokens (never the later ones: they are masked), with weights that add up to 1. "
        f"Over all {state.n_layer} × {state.n_head} heads, the strongest look of "
        f"{at_position(state)} at an earlier token goes to {tok(state, state.ids[look.key])} "
        f"(position {look.key}), weight **{look.weight:.2f}**, in block {look.layer}, "
        f"head {look.head}." + (" (The first token can only look at itself.)" if t == 0 else ""))
    start = first_row_within_budget(n, 2 * n, MAX_HEATMAP_CELLS * 3 // 4)
    z = ti.attention_with_mask(trace, look.layer, look.head)[start:]
    rows = state.labels[start:]
    fig = attention_charts.attention_map(
        z, state.labels, f"Block {look.layer}, head {look.head}: weights ({n} × {n})",
        y_labels=rows)
    show_chart(fig, f"lesson_attention_layer{look.layer}_head{look.head}",
               grid_table(z, rows, state.labels, "query", "key"), key="lesson.chart_attention",
               alt=f"Block {look.layer}, head {look.head}: " + alt_text.attention(
                   z, rows, state.labels, row=t - start if t >= start else -1))
    st.caption("Row = the token looking, column = the token looked at. Grey = masked (a "
               "later token)." + (f" The last {n - start} rows are drawn." if start else ""))
    return pos_link(state, layer=str(look.layer), head=str(look.head))


def draw_residual(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    growth = lr.residual_growth(trace, state.n_layer, state.position)
    biggest = growth.write_labels[growth.biggest]
    st.markdown(
        "No block replaces a token's vector: attention, then the `FeedForward` network (which "
        "works on each token alone), each read a normalised copy and **add** their result "
        "back. This running sum is the residual stream. For "
        f"{at_position(state)} its length ‖x‖ goes from **{growth.first:.2f}** after the "
        f"embeddings to **{growth.last:.2f}** after the {state.n_layer} blocks; the biggest "
        f"addition came from **{biggest}** (‖Δx‖ = "
        f"{float(growth.writes[growth.biggest]):.2f}).")
    norms = ti.residual_norms(trace, state.n_layer)  # (1 + 2L, n)
    stages = [label for label, _ in ti.residual_stages(state.n_layer)]
    fig = residual_charts.norm_lines(norms, stages, state.labels, [state.position],
                                     f"‖x‖ of {state.labels[state.position]}, stage by "
                                     "stage")
    show_chart(fig, "lesson_residual_norms",
               series_table({"‖x‖": growth.norms}, stages, "after stage"),
               key="lesson.chart_residual",
               alt=alt_text.bars(stages, growth.norms,
                                 f"‖x‖ of {state.labels[state.position]} after each stage"))
    return pos_link(state)


def draw_final_norm(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    say_norm_input(state, trace, "ln_f", FINAL_NORM_WORDS, FINAL_RMS_WORDS)
    layer_norm_histogram(state, trace, "ln_f", "output",
                         f"h: {state.labels[state.position]} after the final "
                         f"{state.parts.norm}", marks=False)
    return pos_link(state)


def draw_logits(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    t, v, d = state.position, state.v, state.d
    row = logits[t]  # (v,)
    spread = lr.logit_spread(row)
    bias = " and adds b_out" if state.model.output.b_out is not None else ""
    st.markdown(
        f"The `OutputLayer` multiplies h (d = {d} numbers) by W_out (d × vocab_size = "
        f"{d} × {v:,}){bias}: one score, a **logit**, for every token of the vocabulary. "
        f"After {at_position(state)} the highest of the **{v:,} logits** is "
        f"**{spread.top:.2f}**, for {tok(state, spread.top_token)}; the lowest is "
        f"{spread.bottom:.2f}, for {tok(state, spread.bottom_token)}. A logit is not a "
        "probability yet: it can be any number, and only the differences matter.")
    top_ids = readout_cache.top_tokens(state, logits).ids[t, :8]
    marks = [(int(i), token_label(state.tokenizer, i)) for i in top_ids]
    fig = logits_charts.logit_row(row, marks, f"All {v:,} logits after {state.labels[t]}")
    show_chart(fig, f"lesson_logits_row{t}", series_table({"logit": row}, range(v), "token id"),
               key="lesson.chart_logits",
               alt=alt_text.top_items([token_label(state.tokenizer, i) for i in top_ids],
                                      row[top_ids], f"The {v:,} logits after {state.labels[t]}",
                                      fmt=".2f"))
    return pos_link(state)


def draw_softmax(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    t = state.position
    top = readout_cache.top_tokens(state, logits)
    ids, probs = top.ids[t, :TOP_SHOWN], top.probs[t, :TOP_SHOWN]
    bits = float(ti.entropy(ti.probabilities(logits[t])))
    st.markdown(
        "Softmax turns the logits into probabilities: raise e to each logit, then divide by "
        f"the total, so all {state.v:,} are positive and add up to 1. After "
        f"{at_position(state)} the top guess is {tok(state, ids[0])} at "
        f"**{percent(float(probs[0]))}**, then {tok(state, ids[1])} at "
        f"{percent(float(probs[1]))}. The entropy is **{bits:.2f} bits** (0 would be "
        f"certain, {math.log2(state.v):.1f} bits every token equally likely).")
    one_back(state, logits)
    labels = [token_label(state.tokenizer, i, show_id=True) for i in ids]
    fig = sampling_charts.top_probabilities(labels, probs, f"Top {len(ids)} after "
                                                           f"{state.labels[t]}")
    show_chart(fig, "lesson_softmax",
               series_table({"probability": probs}, labels, "token"), key="lesson.chart_softmax",
               alt=alt_text.top_items(labels, probs, f"Top {len(ids)} probabilities"))
    return pos_link(state, temperature="1")


def one_back(state: AppState, logits: np.ndarray) -> None:
    """How sure the model is here against one position earlier, with the click that goes
    there: a confident position and an uncertain one side by side."""
    t = state.position
    sure = lr.confidence(logits, t)
    if sure.before_token is None:
        return
    st.markdown(
        f"How sure is that? One position back, after {tok(state, state.ids[t - 1])} "
        f"(position {t - 1}), the best guess was {tok(state, sure.before_token)} with only "
        f"**{percent(sure.before_p)}**; here the best guess holds **{percent(sure.p)}**. "
        "A model is sure where its training text was predictable, and hesitant elsewhere.")
    st.button(f"Look one position back (position {t - 1})", key="lesson.one_back",
              on_click=use_position, args=(t - 1,), icon=":material/arrow_back:")


def cutoff(state: AppState, logits: np.ndarray):
    """The Softmax page's default cut of the inspected row: T = 1, top-p = TOP_P."""
    pr = process_logits(logits[state.position], 1.0, None, TOP_P)
    return pr, ti.sampling_summary(pr)


def draw_cutoffs(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    pr, stats = cutoff(state, logits)
    st.markdown(
        f"To pick a token we need not consider all {state.v:,}. **Top-p** (nucleus) keeps "
        f"the most likely tokens until they hold p = {TOP_P:g} of the probability and cuts "
        f"the rest. After {at_position(state)} that keeps **{stats.n_kept:,} of "
        f"{state.v:,} tokens**, holding {stats.nucleus_held:.4f}; the "
        f"{state.v - stats.n_kept:,} cut tokens held {percent(stats.removed_mass)}. The kept "
        f"ones are divided by {stats.kept_mass:.4f} so they add up to 1 again. (Top-k would "
        "keep a fixed number instead; temperature sharpens or flattens first.)")
    ranked = ti.sorted_distribution(pr.probs_after_top_k)
    m = int(min(state.v, MAX_CURVE, max(50, stats.n_kept + 20)))
    fig = sampling_charts.cumulative_curve(
        ranked.cumulative[:m], TOP_P, stats.n_kept,
        f"Cumulative p by rank (first {m:,} of {state.v:,})")
    show_chart(fig, "lesson_cumulative",
               series_table({"cumulative": ranked.cumulative[:m]}, range(1, m + 1), "rank"),
               key="lesson.chart_cutoffs",
               alt=alt_text.cumulative(ranked.cumulative[:m], stats.n_kept, TOP_P))
    return pos_link(state, temperature="1", top_k="0", top_p=f"{TOP_P:g}", seed=str(SEED))


def draw_choice(state: AppState, logits: np.ndarray, trace) -> dict[str, str]:
    pr, _ = cutoff(state, logits)
    top = readout_cache.top_tokens(state, logits)
    greedy, p_greedy = int(top.ids[state.position, 0]), float(top.probs[state.position, 0])
    drawn = ti.seeded_draw(pr.final_probs, SEED, MIN_SEGMENT)
    st.markdown(
        f"Last, one token is chosen. **Greedy** decoding takes the most likely: "
        f"{tok(state, greedy)} ({percent(p_greedy)}). **Sampling** with seed {SEED} draws "
        f"u = {drawn.u:.4f} and walks along the kept probabilities until it passes u: it "
        f"lands on {tok(state, drawn.token)} ({percent(float(pr.final_probs[drawn.token]))} "
        "after the cut). The chosen token is appended to the prompt and the whole pass runs "
        "again for the next one: that is how a GPT writes.")
    greedy_line(state)
    go_again(state, greedy)
    seg = drawn.segments
    labels = [token_label(state.tokenizer, t, show_id=True) if t >= 0 else f"… {c} small tokens"
              for t, c in zip(seg.tokens, seg.counts, strict=True)]
    fig = sampling_charts.draw_bar(seg.starts, seg.widths, labels, drawn.u, drawn.segment,
                                   f"The draw: u = {drawn.u:.4f} (seed {SEED}) lands on "
                                   f"{token_label(state.tokenizer, drawn.token)}")
    show_chart(fig, "lesson_draw", series_table({"start": seg.starts, "width": seg.widths},
                                                labels, "segment"), key="lesson.chart_draw",
               alt=f"The draw: u = {drawn.u:.4f} lands on "
                   f"{alt_text.quoted(token_label(state.tokenizer, drawn.token))}, whose "
                   f"segment is {float(pr.final_probs[drawn.token]):.4f} wide.")
    return {"temperature": "1", "top_k": "0", "top_p": f"{TOP_P:g}", "seed": str(SEED)}


def greedy_line(state: AppState) -> None:
    """What greedy decoding writes from here, appending the top token again and again."""
    ids = state.ids[:state.position + 1]
    eos = getattr(state.tokenizer, "eos_token_id", None)
    run = Run(max_new_tokens=GREEDY_NEW, strategy="greedy", eos_token_id=eos,
              record_steps=False)
    result = caches.generations(state, ids, {"greedy": run})["greedy"][0]
    n = len(result.tokens)
    ends = {"eos": f"then it writes {tok(state, result.tokens[-1]) if n else 'its end token'}, "
                   "the model's end of text, and stops",
            "context_full": "then the context window is full",
            "max_new_tokens": f"and would go on: {GREEDY_NEW} is all we asked for"}
    st.markdown(f"Repeated, greedy decoding writes **{n} tokens** from here "
                f"({ends[result.stop_reason]}):")
    st.code(state.tokenizer.decode([int(i) for i in result.tokens]), language=None,
            wrap_lines=True)


def go_again(state: AppState, token: int) -> None:
    """The loop a GPT runs, one click at a time: append the predicted token, predict again."""
    if state.position != state.n - 1:
        st.caption("Go to the last position to append a token to the prompt.")
        return
    text = state.tokenizer.decode([int(token)])
    st.button(f"Append {token_label(state.tokenizer, token)} and go again",
              key="lesson.go_again", on_click=use_prompt, args=(state.prompt + text,),
              type="primary", icon=":material/replay:",
              help="Adds the most likely token to your prompt; the model then predicts the "
                   "next one. This is exactly how a GPT writes, one token at a time.")


STEPS: list[Step] = [
    Step("Text → tokens", "pages/2_Tokens_and_embeddings.py", "Tokens and embeddings",
         draw_tokens),
    Step("Embeddings", "pages/2_Tokens_and_embeddings.py", "Tokens and embeddings",
         draw_embeddings),
    Step("LayerNorm", "pages/3_LayerNorm.py", "LayerNorm", draw_layer_norm),
    Step("Attention", "pages/4_Attention.py", "Attention", draw_attention),
    Step("The residual stream", "pages/5_Residual_stream.py", "Residual stream",
         draw_residual),
    Step("Final LayerNorm", "pages/3_LayerNorm.py", "LayerNorm", draw_final_norm),
    Step("Logits", "pages/6_Logits.py", "Logits", draw_logits),
    Step("Softmax", "pages/7_Softmax_and_sampling.py", "Softmax and sampling",
         draw_softmax),
    Step("Cutoffs: top-p", "pages/7_Softmax_and_sampling.py", "Softmax and sampling",
         draw_cutoffs),
    Step("The chosen token", "pages/8_Decoding.py", "Decoding", draw_choice),
]


def for_model(text: str, config: GPTConfig | None) -> str:
    """A step's title or link named for the model's parts: "LayerNorm" is "RMSNorm" on a
    Llama-style model."""
    return text if config is None else text.replace("LayerNorm", parts_of(config).norm)


def step_label(number: int, config: GPTConfig | None = None) -> str:
    """The step menu's text: "5 · The residual stream"."""
    return f"{number} · {for_model(STEPS[number - 1].title, config)}"


def draw_step(state: AppState, number: int) -> Step:
    """Draw step `number` (1-based) for the current prompt; returns the step and draws the
    link to its full page."""
    step = STEPS[number - 1]
    st.header(f"Step {number} of {len(STEPS)}: {for_model(step.title, state.config)}")
    try:
        logits, trace = caches.get_trace(state)
        params = step.draw(state, logits, trace)
    except Exception as err:  # noqa: BLE001 - a step that fails keeps the stepper around it
        notices.page_error(err)
        return step
    page_link(step.page, f"The full page: {for_model(step.link_label, state.config)}", params,
              icon=":material/open_in_new:")
    return step
