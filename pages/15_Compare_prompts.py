"""Compare two prompts: the same model on two prompts that differ a little ("The doctor said
that he" / "...she"), stage by stage, side by side, with the difference."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from tinygpt.readouts import (
    attention_with_mask,
    logit_lens,
    prediction_change,
    residual_norms,
    residual_stages,
)
from tinygpt.readouts.explain import difference_waterfall, parts_difference
from tinygpt.readouts.parts import parts_of
from tinygpt_app.charts import attention as attention_charts
from tinygpt_app.charts import explain as charts
from tinygpt_app.compute import caches, explain_caches
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import HEAD, LAYER, PROMPT2, TOKEN
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import (
    MAX_APP_TOKENS,
    MAX_URL_PROMPT_CHARS,
    AppState,
    control,
    encode_prompt,
)
from tinygpt_app.kit.widgets import chips, explain, number_table, series_table, show_chart

TOP_K = 6
BARS = 12
PARTS = ["1. Next-token distributions", "2. The logit's difference", "3. Lengths",
         "4. Logit lens", "5. One head"]


def second_prompt(state: AppState) -> AppState | None:
    """The second prompt (its own text area, in the link as ?prompt2=), as a state at its
    last position; None when it is empty."""
    text = control(st.text_area, "Second prompt", "compare.prompt2", PROMPT2, height=90,
                   max_chars=MAX_URL_PROMPT_CHARS,
                   help=f"Compared with the prompt in the sidebar (at most "
                        f"{MAX_URL_PROMPT_CHARS:,} characters). Ctrl+Enter to run.")
    ids, notes = encode_prompt(state.tokenizer, text, min(state.config.n_ctx, MAX_APP_TOKENS))
    for note in notes:
        st.warning(plain(note.replace("The prompt", "The second prompt")))
    if len(ids) == 0:
        return None
    labels = [token_label(state.tokenizer, t, position=i) for i, t in enumerate(ids)]
    return replace(state, prompt=text, ids=ids, position=len(ids) - 1, labels=labels,
                   notes=notes)


def draw_distributions(a: AppState, b: AppState, logits_a, logits_b) -> int:
    st.header("1. The next-token distributions")
    change = prediction_change(logits_a[-1], logits_b[-1], TOP_K)
    names = [token_label(a.tokenizer, t) for t in change.tokens]
    fig = charts.two_distributions(names, change.p_before, change.p_after, ("first", "second"),
                                   "p(next token) after each prompt")
    table = series_table({"p first": change.p_before, "p second": change.p_after}, names,
                         "token")
    show_chart(fig, "compare_next_token", table, key="compare.next_token",
               alt=alt_text.two_runs(names, change.p_before, change.p_after,
                                     ("first", "second"), "p(next token)"))
    st.markdown(f"Top guess: **{plain(token_label(a.tokenizer, change.top_before))}** "
                f"(p = {change.p_top_before:.3f}) after the first, "
                f"**{plain(token_label(a.tokenizer, change.top_after))}** "
                f"(p = {change.p_top_after:.3f}) after the second. KL divergence between the two "
                f"distributions: **{change.kl_bits:.3f} bits** (0 when they agree).")
    options = {int(t): token_label(a.tokenizer, t, show_id=True) for t in change.tokens}
    return control(st.selectbox, "Token to follow through the model", "compare.token", TOKEN,
                   default=int(change.tokens[0]), choices=list(options), format_func=options.get)


def draw_attribution(a: AppState, b: AppState, token: int) -> None:
    name = token_label(a.tokenizer, token)
    st.header(f"2. Where the difference in the logit of {plain(name)} comes from")
    att_a, att_b = explain_caches.attribution(a, token), explain_caches.attribution(b, token)
    w = difference_waterfall(att_a, att_b, BARS)
    explain(f"The logit of **{plain(name)}** is {att_a.total:+.3f} after the first prompt and "
            f"{att_b.total:+.3f} after the second. Split both into the parts of the model (as "
            "on the *Why this token?* page) and subtract part by part: the bars add up exactly "
            f"to the difference, {w.total:+.3f}.")
    fig = charts.attribution_waterfall(w.names, w.values, w.total,
                                       f"logit({name}): first − second = {w.total:+.3f}",
                                       total_name="difference")
    table = pd.DataFrame({"part": att_a.names, "first": att_a.values, "second": att_b.values,
                          "first − second": parts_difference(att_a, att_b)}).set_index("part")
    show_chart(fig, f"compare_attribution_{token}", table, key="compare.attribution",
               alt=alt_text.bars(w.names, w.values,
                                 f"logit({name}), first − second = {w.total:+.3f}, by part"))


def draw_norms(a: AppState, b: AppState, trace_a, trace_b) -> None:
    st.header("3. The residual stream's length, stage by stage")
    stages = [label for label, _ in residual_stages(a.n_layer)]
    norm_a = residual_norms(trace_a, a.n_layer)[:, -1]  # (S,) at the last token
    norm_b = residual_norms(trace_b, b.n_layer)[:, -1]
    fig = charts.paired_lines(stages, norm_a, norm_b, ("first", "second"),
                              "‖x‖ at the last token of each prompt", "length ‖x‖")
    show_chart(fig, "compare_residual_norms",
               series_table({"first": norm_a, "second": norm_b}, stages, "stage"),
               key="compare.norms",
               alt=alt_text.two_runs(stages, norm_a, norm_b, ("first", "second"),
                                     "‖x‖ at the last token"))


def draw_lens(a: AppState, b: AppState, trace_a, trace_b) -> None:
    st.header("4. The logit lens: the guess at every stage")
    lens_a = logit_lens(a.model, trace_a, k=1, positions=[a.n - 1])
    lens_b = logit_lens(b.model, trace_b, k=1, positions=[b.n - 1])
    explain(f"Read the residual stream through the final {parts_of(a.config).norm} and the "
            "output layer after "
            "every block: what the model would guess if it stopped there.")
    table = pd.DataFrame({
        "stage": lens_a.labels,
        "first: guess": [token_label(a.tokenizer, t) for t in lens_a.ids[:, 0, 0]],
        "first: p": lens_a.probs[:, 0, 0],
        "second: guess": [token_label(b.tokenizer, t) for t in lens_b.ids[:, 0, 0]],
        "second: p": lens_b.probs[:, 0, 0],
    })
    number_table(table, "%.3f", hide_index=True)
    fig = charts.paired_lines(lens_a.labels, lens_a.probs[:, 0, 0], lens_b.probs[:, 0, 0],
                              ("first", "second"), "p(the guess at each stage)", "probability")
    show_chart(fig, "compare_logit_lens", table.set_index("stage"), key="compare.lens",
               alt=alt_text.two_runs(lens_a.labels, lens_a.probs[:, 0, 0], lens_b.probs[:, 0, 0],
                                     ("first", "second"), "p(the guess at each stage)"))


def draw_head(a: AppState, b: AppState, trace_a, trace_b) -> None:
    st.header("5. One head's attention in both")
    left, right = st.columns(2)
    layer = control(left.selectbox, "Block", "compare.layer", LAYER,
                    hi=a.n_layer - 1, options=range(a.n_layer))
    head = control(right.selectbox, "Head", "compare.head", HEAD,
                   hi=a.n_head - 1, options=range(a.n_head))
    for column, state, trace, which in ((left, a, trace_a, "first"),
                                        (right, b, trace_b, "second")):
        z = attention_with_mask(trace, layer, head)[-1:]  # (1, n) the last token's row
        fig = attention_charts.attention_map(
            z, state.labels, f"{which}: where the last token looks (block {layer}, head {head})",
            y_labels=[state.labels[-1]], zrange=(0.0, 1.0))
        with column:
            show_chart(fig, f"compare_attention_{which}_layer{layer}_head{head}",
                       series_table({"weight": z[0]}, state.labels, "key"),
                       key=f"compare.attention_{which}",
                       alt=f"{which}: " + alt_text.attention(z, [state.labels[-1]],
                                                             state.labels))


with page("Compare prompts", intro="The same model on two prompts, stage by stage. The first "
          "prompt is the one in the sidebar; both are read at their last token.") as state:
    other = second_prompt(state)
    if other is None:
        st.info("Type a second prompt above to compare it with the first.")
        st.stop()
    first = replace(state, position=state.n - 1)
    with st.expander(f"The tokens of both prompts ({first.n} and {other.n})"):  # the tabs
        chips([(token_label(state.tokenizer, t), "first") for t in first.ids])  # stay in the
        chips([(token_label(state.tokenizer, t), "second") for t in other.ids])  # first screen
    logits_a, trace_a = caches.get_trace(first)
    logits_b, trace_b = caches.get_trace(other)
    tabs = st.tabs(PARTS)  # one part at a time (issue 49)
    with tabs[0]:
        token = draw_distributions(first, other, logits_a, logits_b)
    with tabs[1]:
        draw_attribution(first, other, token)
    with tabs[2]:
        draw_norms(first, other, trace_a, trace_b)
    with tabs[3]:
        draw_lens(first, other, trace_a, trace_b)
    with tabs[4]:
        draw_head(first, other, trace_a, trace_b)
