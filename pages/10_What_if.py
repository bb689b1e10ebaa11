"""What if: switch off a piece of the model and watch the prediction (and one stage) change.

Both runs are the model's own `run_with_trace`, the second with `Interventions`."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt.network.model import Interventions
from tinygpt.readouts.parts import parts_of
from tinygpt_app.charts import attention, residual, whatif
from tinygpt_app.compute import caches, readout_cache
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import (
    HEAD,
    LAYER,
    NO_CAUSAL_MASK,
    NO_LAYERNORM,
    NO_POSITION,
    NO_RESIDUAL,
    SKIP_ATTN,
    SKIP_FFN,
    STAGE,
    ZERO_HEADS,
    pairs,
)
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import (
    columns,
    explain,
    grid_table,
    lens_table,
    page_link,
    series_table,
    show_chart,
)

TOP = 8  # next tokens compared
MAX_ATTN = 160  # the attention maps show at most the last MAX_ATTN positions
LENS_POSITIONS = 12  # positions in the logit-lens comparison
RUNS = ("normal", "switched")
SWITCHES = {spec.name: spec for spec in (NO_POSITION, NO_CAUSAL_MASK, NO_LAYERNORM, NO_RESIDUAL)}

def switch_texts(config) -> dict[str, tuple[str, str]]:
    """switch -> (label, help), naming this model's parts (its norm, its kind of positions)."""
    parts = parts_of(config)
    position = (("No position embeddings", "Drop P: the model no longer knows the order of "
                                           "the tokens.") if parts.position_table else
                ("No rotary positions", "q and k are not turned by their positions: the model "
                                        "no longer knows the order of the tokens."))
    return {
        "no_position": position,
        "no_causal_mask": ("No causal mask",
                           "Every token may look at later tokens too (it could 'cheat')."),
        "no_layernorm": (f"No {parts.norm}", f"Every {parts.norm} (before attention, before "
                         "the feed-forward, and the final one) passes x through unchanged."),
        "no_residual": ("No residual connections",
                        "x = sublayer(x) instead of x = x + sublayer(x): each block overwrites."),
    }


def switches(state: AppState) -> Interventions:
    """Draw the switches; return the Interventions they describe."""
    texts = switch_texts(state.config)
    flags = {}
    for col, (name, (label, help_text)) in zip(st.columns(4), texts.items(), strict=True):
        spec = SWITCHES[name]  # the switch's declaration
        flags[name] = control(col.toggle, label, f"whatif.{name}", spec, help=help_text)
    heads = [f"{layer}.{h}" for layer in range(state.n_layer) for h in range(state.n_head)]
    blocks = dict(hi=state.n_layer - 1, options=range(state.n_layer))
    c1, c2, c3 = st.columns(3)
    zero = control(c1.multiselect, "Zero these heads", "whatif.zero_heads", ZERO_HEADS,
                   hi=state.n_layer, per=state.n_head, options=heads,
                   max_selections=ZERO_HEADS.cap,
                   format_func=lambda entry: "block {}, head {}".format(*entry.split(".")))
    skip_attn = control(c2.multiselect, "Skip attention in blocks", "whatif.skip_attn",
                        SKIP_ATTN, **blocks)
    skip_ffn = control(c3.multiselect, "Skip the feed-forward in blocks", "whatif.skip_ffn",
                       SKIP_FFN, **blocks)
    return Interventions(zero_heads=frozenset(pairs(zero)), skip_attn=frozenset(skip_attn),
                         skip_ffn=frozenset(skip_ffn), **flags)


def draw_prediction(state: AppState, logits, new_logits,
                    iv: Interventions) -> None:
    t, tok = state.position, state.tokenizer
    st.header(f"Next-token guess after {plain(state.labels[t])}")
    if not iv.active:
        st.info("All switches are off, so both runs are the same model. Flip one above.")
    # the union of both runs' top tokens, ordered by the normal run's probability
    change = ti.prediction_change(logits[t], new_logits[t], TOP)
    p_shown, q_shown = change.p_before, change.p_after
    tokens = [token_label(tok, i, show_id=True) for i in change.tokens]
    title = (f"Next token after position {t}: normal vs with the switches "
             f"({len(tokens)} tokens of v)")
    show_chart(whatif.prediction_change(tokens, p_shown, q_shown, title),
               f"what_if_next_token_position{t}",
               series_table({"p normal": p_shown, "p with the switches": q_shown}, tokens,
                            "token"), key="whatif.prediction",
               alt=alt_text.two_runs(tokens, p_shown, q_shown, RUNS, "p(next token)"))
    before, after = change.top_before, change.top_after
    changed = "changed" if change.changed else "did not change"
    st.markdown(
        f"The top guess **{changed}**: {plain(repr(token_label(tok, before)))} "
        f"({change.p_top_before:.3f}) → {plain(repr(token_label(tok, after)))} "
        f"({change.p_top_after:.3f}). "
        f"Entropy {change.entropy_before:.2f} → {change.entropy_after:.2f} bits; "
        f"KL(normal ‖ switched) = {change.kl_bits:.3f} bits."
    )
    explain("KL divergence measures how much the switched model's distribution q differs "
            "from the normal one p (0 means identical).",
            r"\mathrm{KL}(p\,\|\,q) = \sum_i p_i \log_2 \frac{p_i}{q_i}")
    if state.n > 1:
        draw_prompt_scores(state, logits, new_logits, iv)


def draw_prompt_scores(state: AppState, logits, new_logits,
                       iv: Interventions) -> None:
    """Top-1 hits and the loss on the prompt itself, normal against switched (once per
    trace: a position click does not score the whole prompt again)."""
    shifts = [readout_cache.top_tokens(state, lg, run).shift
              for lg, run in ((logits, None), (new_logits, iv))]
    hits, loss = [s.n_hits for s in shifts], [s.loss for s in shifts]
    st.dataframe(pd.DataFrame({
        "run": list(RUNS),
        f"top-1 hits on this prompt (of {state.n - 1})": hits,
        "loss on this prompt": loss,
    }), hide_index=True)


def compare_attention(state: AppState, traces: tuple) -> None:
    c1, c2 = st.columns(2)
    layer = control(c1.selectbox, "Block", "whatif.layer", LAYER, hi=state.n_layer - 1,
                    options=range(state.n_layer))
    head = control(c2.selectbox, "Head", "whatif.head", HEAD, hi=state.n_head - 1,
                   options=range(state.n_head))
    keep = slice(max(0, state.n - MAX_ATTN), state.n)
    labels = state.labels[keep]
    if state.n > MAX_ATTN:
        st.caption(f"Showing the last {MAX_ATTN} of {state.n} positions.")
    for col, tr, run in zip(columns(2), traces, RUNS, strict=True):
        w = ti.attention_with_mask(tr, layer, head)[keep, keep]
        fig = attention.attention_map(w, labels, f"{run}: block {layer}, head {head} weights "
                                      f"(n × n = {state.n} × {state.n})", zrange=(0.0, 1.0))
        with col:
            show_chart(fig, f"what_if_attention_{run}_block{layer}_head{head}",
                       grid_table(w, labels, labels, "query", "key"), key=f"whatif.attn_{run}",
                       alt=f"{run}: " + alt_text.attention(w, labels, labels))
    explain("Grey crossed cells are hidden by the causal mask. Zeroing a head does not "
            "change its weights, only stops its output from being used; the "
            "blocks after it see a different input and so attend differently.")


def compare_norms(state: AppState, traces: tuple) -> None:
    stages = [label for label, _ in ti.residual_stages(state.n_layer)]
    for col, tr, run in zip(columns(2), traces, RUNS, strict=True):
        norms = ti.residual_norms(tr, state.n_layer)  # (1 + 2L, n)
        fig = residual.norms_heatmap(norms, stages, state.labels,
                                     f"{run}: ‖x‖, stages × n = {state.n} tokens")
        with col:
            show_chart(fig, f"what_if_residual_norms_{run}",
                       grid_table(norms, stages, state.labels, "stage", "token"),
                       key=f"whatif.norms_{run}",
                       alt=alt_text.grid(norms, stages, state.labels, f"{run}: ‖x‖"))
    explain(f"Without residual connections or {state.parts.norm}, the size of the "
            "vectors is no longer kept in check: compare the colour bars.")


def compare_lens(state: AppState, traces: tuple, ivs: tuple = (None, None)) -> None:
    width = readout_cache.lens_width(state, LENS_POSITIONS)  # affordable on a large vocabulary
    positions = ti.position_window(state.n, state.position, width)
    shown = [state.labels[i] for i in positions]
    for col, tr, iv, run in zip(columns(2), traces, ivs, RUNS, strict=True):
        lens = readout_cache.logit_lens(state, tr, positions, 1, interventions=iv)
        text = [[token_label(state.tokenizer, i) for i in row] for row in lens.ids[:, :, 0]]
        fig = residual.logit_lens(lens.probs[:, :, 0], text, lens.labels, shown,
                                  f"{run}: logit lens after each block")
        with col:
            show_chart(fig, f"what_if_logit_lens_{run}",
                       lens_table(lens.probs[:, :, 0], text, lens.labels, shown),
                       key=f"whatif.lens_{run}",
                       alt=f"{run}: " + alt_text.lens(lens.probs[:, :, 0], text, lens.labels,
                                                      shown))
    norm = state.parts.norm
    explain(f"The top token read from the stream after each block (final {norm} "
            "then the output layer), normal against switched. The lens always "
            f"applies the final {norm}, even when a switch removes it from the model.")


STAGE_VIEWS = {"attention weights": compare_attention, "residual norms": compare_norms,
               "logit lens": compare_lens}

with page("What if…") as state:
    explain("Each switch removes one idea from the transformer. The model was trained with "
            "all of them on, so turning one off shows what that idea was doing: compare "
            "the next-token guesses and the internal view below, normal against switched.")
    page_link("pages/11_Interventions.py",
              "Finer experiments: patch one layer and position, "
              "ablate single heads or neurons, steer (Interventions)", {},
              icon=":material/science:")
    iv = switches(state)
    logits, trace = caches.get_trace(state)
    new_logits, new_trace = caches.get_trace(state, iv)
    draw_prediction(state, logits, new_logits, iv)
    st.header("Inside the model")
    stage = control(st.radio, "Stage", "whatif.stage", STAGE, choices=list(STAGE_VIEWS),
                    horizontal=True)
    views = {**STAGE_VIEWS, "logit lens": partial(compare_lens, ivs=(None, iv))}
    views[stage](state, (trace, new_trace))
