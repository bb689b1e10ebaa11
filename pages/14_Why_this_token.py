"""Why this token? The predicted token's logit taken apart, exactly, into what each part of
the model wrote; the same for the difference of two tokens; and which words of the prompt
mattered (each one removed in turn)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt.readouts import top_k
from tinygpt.readouts.explain import head_grid, top_contributors, top_heads, waterfall
from tinygpt_app.charts import explain as charts
from tinygpt_app.compute import caches, explain_caches
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import TOKEN, VERSUS
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import chips, explain, page_link, series_table, show_chart

TOP_K = 10  # the tokens a student may pick from
BARS = 12  # the largest parts drawn in the waterfall; the others share one bar
ATTENTION_PAGE = "pages/4_Attention.py"
PARTS = ["Where the logit comes from", "Rather than another token", "Which words mattered"]


def pick_token(state: AppState, candidates, label: str, key: str, spec, default) -> int:
    names = {int(t): token_label(state.tokenizer, t, show_id=True) for t in candidates}
    return control(st.selectbox, label, key, spec, default=default, choices=list(names),
                   format_func=names.get)


def draw_waterfall(state: AppState, att, title: str, file: str, key: str,
                   total_name: str = "logit") -> None:
    w = waterfall(att, BARS)
    fig = charts.attribution_waterfall(w.names, w.values, w.total, title, total_name)
    table = series_table({"share": w.values}, w.names, "part")
    show_chart(fig, file, table, key=key,
               alt=alt_text.bars(w.names, w.values, f"{title}: the parts add up to "
                                                    f"{w.total:+.3f}; parts"))
    if w.rest:
        st.caption(f"The {BARS} largest of {len(att.values)} parts, in the model's order; the "
                   f"other {w.rest} are added up in one bar (every part is in the CSV of the "
                   "head chart).")


def draw_contributors(state: AppState, att) -> None:
    top = top_contributors(att, 5)
    st.markdown("**The biggest contributors:**\n\n" + "\n".join(
        f"- {c.sentence}" for c in top))
    heads = top_heads(att, 3)
    st.markdown("Open a head on the Attention page to see where it looks:")
    cols = st.columns(len(heads))
    for col, c in zip(cols, heads, strict=True):
        layer, head = c.head
        with col:
            page_link(ATTENTION_PAGE, f"{c.name} ({c.value:+.2f})",
                      {"layer": str(layer), "head": str(head), "pos": str(state.position)},
                      icon=":material/visibility:")


def draw_heads(state: AppState, att, what: str) -> None:
    grid = head_grid(att, state.n_layer, state.n_head)
    fig = charts.head_shares(grid, f"Each head's share of {what}")
    table = pd.DataFrame({"part": att.names, "share": att.values}).set_index("part")
    show_chart(fig, "head_shares", table, key="why.heads",
               alt=alt_text.grid(grid, [f"block {i}" for i in range(state.n_layer)],
                                 [f"head {h}" for h in range(state.n_head)],
                                 f"Each head's share of {what}"))


ATTRIBUTION_FORMULA = {  # short lines, one under the other: a long line runs off a phone
    "layernorm": (r"z_t = \sum_{\text{parts } p} s_p + \beta\cdot w_t \;(+\, b_t)",
                  r"w_t = W_{\text{out}}[:, t]",
                  r"s_p = \frac{(x_p - \bar{x}_p)\odot\gamma}{\sigma}\cdot w_t"),
    "rmsnorm": (r"z_t = \sum_{\text{parts } p} s_p \;(+\, b_t)",
                r"w_t = W_{\text{out}}[:, t]",
                r"s_p = \frac{x_p\odot\gamma}{\mathrm{rms}(x)}\cdot w_t"),
}


def explain_parts(state: AppState) -> None:
    """How the logit splits into parts, for this model's final norm and its positions."""
    parts = state.parts
    embeddings = ("the token and position embeddings" if parts.position_table else
                  "the token embedding (this model adds no position row: its positions turn "
                  "q and k inside attention)")
    explain(
        "The logit of a token is read from the residual stream, and the residual stream is a "
        f"sum: what {embeddings}, every attention head and every feed-forward layer wrote. "
        f"Once the final {parts.norm}'s scale ({parts.norm_stats}) is fixed at the value the "
        "model computed, each of those parts gets its own share of the logit, and the shares "
        "add up **exactly** to the logit the model computed.",
        ATTRIBUTION_FORMULA[state.config.norm])


def draw_attribution(state: AppState, logits_row, ids) -> int:
    st.header("Where the logit comes from")
    token = pick_token(state, ids, "Token to explain", "why.token", TOKEN, int(ids[0]))
    att = explain_caches.attribution(state, token)
    name = token_label(state.tokenizer, token)
    explain_parts(state)
    draw_waterfall(state, att, f"The logit of {name} at {state.labels[state.position]}: "
                   f"{att.total:+.3f}", f"attribution_{token}", "why.waterfall")
    st.caption(f"Sum of the bars {att.values.sum():+.4f} · the model's logit "
               f"{float(logits_row[token]):+.4f}.")
    draw_contributors(state, att)
    draw_heads(state, att, f"the logit of {name}")
    return token


def draw_difference(state: AppState, logits_row, ids, token: int) -> None:
    st.header("Why this token rather than another?")
    others = [int(t) for t in ids if int(t) != token]
    versus = pick_token(state, others, "…rather than", "why.versus", VERSUS, others[0])
    att = explain_caches.attribution(state, token, versus)
    a, b = token_label(state.tokenizer, token), token_label(state.tokenizer, versus)
    explain(f"The same parts, now for the difference of two logits: how much each part "
            f"prefers **{plain(a)}** to **{plain(b)}** (positive: towards {plain(a)}). The "
            "softmax only cares about differences of logits, so this is what decides between "
            "the two.")
    draw_waterfall(state, att, f"logit({a}) − logit({b}) = {att.total:+.3f}",
                   f"attribution_{token}_minus_{versus}", "why.difference", "difference")
    st.markdown("\n".join(f"- {c.sentence}" for c in top_contributors(att, 3)))


def draw_occlusion(state: AppState, token: int) -> None:
    st.header("Which words mattered?")
    if state.position < 1:
        st.info("The first token has no earlier words to remove: pick a later position in "
                "the sidebar.")
        return
    if not occlusion_wanted(state, token):
        return
    occ = explain_caches.occlusion_for(state, token)
    name = token_label(state.tokenizer, token)
    explain(f"Remove one word (token) at a time from the prompt, run the model again, and "
            f"watch the probability of **{plain(name)}** (now {occ.base_prob:.4f}). A big drop: "
            "that word mattered for this guess. All the shortened prompts run as one batch.")
    labels = [state.labels[i] for i in occ.removed]
    fig = charts.occlusion_bars(labels, occ.change,
                                f"p({name}) without each token (now {occ.base_prob:.4f})")
    table = series_table({"p without it": occ.probs, "change": occ.change,
                          "KL (bits)": occ.kl_bits}, labels, "token removed")
    show_chart(fig, f"occlusion_{token}", table, key="why.occlusion",
               alt=alt_text.bars(labels, occ.change, f"Change of p({name}) without each token"))
    if occ.not_scored:
        st.caption(f"The last {len(occ.removed)} of {state.position + 1} tokens are removed in "
                   f"turn; the first {occ.not_scored} stay.")
    colours = charts.heat_colours(occ.change, diverging=True)
    text = [token_label(state.tokenizer, state.ids[i]) for i in occ.removed]
    chips(list(zip(text, [f"{c:+.3f}" for c in occ.change], strict=True)), colours=colours)
    st.caption("Red: the probability falls without the token (it helped). Blue: it rises "
               "(the token held the guess back).")

# (model, prompt, position, token) the student asked occlusion for
OCCLUSION_ASKED: Slot[tuple | None] = Slot("why.occlusion_asked", None)


def occlusion_wanted(state: AppState, token: int) -> bool:
    """Run occlusion now? At once when it is cheap; when costly (a big model, a far
    position), once asked for (its cost said first), and then for this prompt, position and
    token until they change."""
    if explain_caches.occlusion_runs_itself(state):
        return True
    macs, forwards = explain_caches.occlusion_cost(state)
    asked = (state.model_id, hash(tuple(int(i) for i in state.ids)), state.position, token)
    if OCCLUSION_ASKED.get() == asked:
        return True
    st.info(f"Removing each of the {min(state.position + 1, state.n)} tokens in turn costs "
            f"about {forwards:.0f} forward passes of the prompt on this model "
            f"({macs / 1e9:,.0f} billion multiply-adds), so it runs only when you ask.")
    if st.button("Remove each token in turn", key="why.run_occlusion"):
        OCCLUSION_ASKED.set(asked)
        return True
    return False


with page("Why this token?", intro="Take the model's guess apart: which parts of the model "
          "and which words of the prompt made it.") as state:
    logits, _ = caches.get_trace(state)
    row = logits[state.position]
    ids, probs = top_k(row, TOP_K)
    st.markdown(f"At position **{plain(state.labels[state.position])}** the model's top guess is "
                f"**{plain(token_label(state.tokenizer, ids[0]))}** (p = {float(probs[0]):.3f}). "
                "Choose another position in the sidebar.")
    parts, versus, words = st.tabs(PARTS)  # one part at a time (issue 49)
    with parts:
        token = draw_attribution(state, row, ids)
    with versus:
        draw_difference(state, row, ids, token)
    with words:
        draw_occlusion(state, token)
