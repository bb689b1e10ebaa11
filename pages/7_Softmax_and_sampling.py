"""Softmax and sampling: from the scores of one position to one drawn token.

The logits come from the cached forward pass; moving a control reruns only the fragment below
(temperature, top-k, top-p, renormalise, draw), never the model.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt.decoding.generation import process_logits, softmax_with_temperature
from tinygpt.readouts import entropy, sorted_distribution
from tinygpt_app.charts import sampling as charts
from tinygpt_app.compute import caches
from tinygpt_app.kit import alt_text, projector
from tinygpt_app.kit.controls import SEED, TEMPERATURE, TOP_K, TOP_P
from tinygpt_app.kit.frame import fair_turn, guard, page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control, set_control
from tinygpt_app.kit.widgets import explain, show_chart

SHOWN = 50  # bars in the ranked chart
SHOWN_PROJECTED = (20, 40)  # projected, in a third of the screen: fewer bars (at least, most)
PROJECTED_HEIGHT = 245  # px before projector_style's growth (x 1.4): both charts in one screen
RENORMALISED = 20  # kept tokens compared before / after renormalising
MAX_CURVE = 2_000  # ranks drawn on the cumulative curve at most
MIN_SEGMENT = 0.005  # tokens below this probability share one grey stretch of the draw bar
MAX_SEED = SEED.hi


def controls(v: int, places: list) -> tuple[float, int, float, int]:
    """The four controls, one per place (a column each, or stacked beside the charts)."""
    temperature = control(
        places[0].slider, "Temperature T", "sampling.temperature", TEMPERATURE,
        min_value=TEMPERATURE.lo, max_value=TEMPERATURE.hi, step=0.05,
        help="Divide every score by T before softmax. T < 1 sharpens, T > 1 flattens, "
             "T = 0 is greedy (all probability on the top token).")
    top_k = control(
        places[1].number_input, "Top-k (0 = off)", "sampling.top_k", TOP_K, hi=v,
        min_value=0, max_value=v, step=1,
        help=f"Keep only the k most likely tokens (0 to {v:,}; 0 keeps them all).")
    top_p = control(
        places[2].slider, "Top-p (1 = off)", "sampling.top_p", TOP_P,
        min_value=TOP_P.lo, max_value=TOP_P.hi, step=0.01,
        help="Keep the most likely tokens until their probabilities add up to p.")
    seed = control(
        places[3].number_input, "Seed", "sampling.seed", SEED,
        min_value=0, max_value=MAX_SEED, step=1,
        help="The same seed always draws the same random number u, so the same token.")
    return temperature, top_k, top_p, seed


def summary(raw, pr, stats, v: int) -> None:
    """Five numbers in a row. The unit is in the label, so a value never runs out of room
    (a projector cut "8.808 bits" to "8.808 …")."""
    removed, n_kept = stats.removed_mass, stats.n_kept
    tempered = pr.temperature != 1  # at T = 1 the tempered entropy is the model's own
    cols = list(st.columns(5 if tempered else 4))
    cols.pop(0).metric("Entropy, T = 1 (bits)", f"{float(entropy(raw)):.3f}",
                       help="How spread out the model's own distribution is, before any change.")
    if tempered:
        cols.pop(0).metric(f"Entropy at T = {pr.temperature:g} (bits)",
                           f"{float(entropy(pr.probs)):.3f}")
    cols[0].metric("Entropy after the cut (bits)", f"{float(entropy(pr.final_probs)):.3f}")
    cols[1].metric(f"Tokens kept, of {v:,}", f"{n_kept:,}",
                   help="How many tokens the draw can still pick after top-k and top-p.")
    cols[2].metric("Probability removed", f"{removed:.3f}",
                   help=f"top-k removed {float(pr.top_k_removed_mass):.4f} of the tempered "
                        f"distribution; top-p then removed {float(pr.top_p_removed_mass):.4f} "
                        "of what top-k left.")


def ranked_chart(state: AppState, row, raw, pr,
                 order, picked: int, projected: bool, n_kept: int) -> None:
    shown = order[:shown_bars(n_kept, projected)]
    labels = [token_label(state.tokenizer, i, show_id=True) for i in shown]
    where = [r for r, i in enumerate(shown) if i == picked]
    # short titles: a phone shows about 40 characters (the details are in the caption)
    title = f"Top {len(shown)} of {state.v:,} at T = {pr.temperature:g}"
    fig = charts.ranked_bars(labels, pr.probs[shown], pr.kept[shown], title,
                             picked=where[0] if where else None,
                             height=PROJECTED_HEIGHT if projected else 340)
    table = pd.DataFrame({
        "rank": range(1, len(shown) + 1), "token_id": shown,
        "token": [token_label(state.tokenizer, i) for i in shown],
        "logit": row[shown], "p_T1": raw[shown], "p_temperature": pr.probs[shown],
        "kept": pr.kept[shown], "p_final": pr.final_probs[shown],
    })
    show_chart(fig, "sampling_ranked", table, key="sampling.ranked",
               alt=alt_text.kept_and_cut(labels, pr.probs[shown], pr.kept[shown],
                                         f"Most likely at T = {pr.temperature:g}"))


def shown_bars(n_kept: int, projected: bool) -> int:
    """How many ranked bars: SHOWN; projected, a few more than the kept tokens, so the cut
    shows, within SHOWN_PROJECTED."""
    if not projected:
        return SHOWN
    low, high = SHOWN_PROJECTED
    return min(max(n_kept + 5, low), high)


def ranked_note(state: AppState, shown: int) -> None:
    st.caption(f"Only the {shown} most likely of the {state.v:,} tokens are drawn "
               "(the rest are in the tail of the cumulative curve). Plain blue bars: can still "
               "be picked. Striped orange bars: cut by top-k or top-p.")


def cumulative_chart(state: AppState, pr, n_kept: int, projected: bool):
    """The curve top-p reads; returns the ranked cumulative sums it drew from."""
    ranked = sorted_distribution(pr.probs_after_top_k)  # what top-p reads, ranked
    m = int(min(state.v, MAX_CURVE, max(SHOWN, n_kept + 20)))
    top_p = pr.top_p if pr.top_p is not None and pr.top_p < 1.0 else None
    title = f"Cumulative p by rank ({n_kept:,} kept)"
    fig = charts.cumulative_curve(ranked.cumulative[:m], top_p, n_kept, title,
                                  height=PROJECTED_HEIGHT if projected else 320)
    table = pd.DataFrame({
        "rank": range(1, m + 1), "token_id": ranked.order[:m],
        "p_after_top_k": ranked.probs[:m], "cumulative": ranked.cumulative[:m],
        "kept": pr.kept[ranked.order[:m]],
    })
    show_chart(fig, "sampling_cumulative", table, key="sampling.cumulative",
               alt=alt_text.cumulative(ranked.cumulative[:m], n_kept, top_p))
    return ranked.cumulative


def cutoff_text(pr, cumulative, n_kept: int) -> None:
    top_p = pr.top_p if pr.top_p is not None and pr.top_p < 1.0 else None
    held = float(cumulative[n_kept - 1])
    if top_p is not None:
        before = float(cumulative[n_kept - 2]) if n_kept > 1 else 0.0
        st.markdown(
            f"**The exact cutoff:** the first {n_kept - 1:,} token(s) hold {before:.4f} < "
            f"p = {top_p:g}, so one more is needed; with token {n_kept:,} the kept tokens "
            f"hold **{held:.4f} ≥ {top_p:g}**. Everything after rank {n_kept:,} is removed.")
    else:
        st.markdown(f"Top-p is off (p = 1): the {n_kept:,} kept tokens hold {held:.4f}.")
    explain(
        "Top-p (nucleus) sampling walks down the ranking, adding up probabilities, and stops "
        "as soon as the total reaches p. The kept set is small when the model is sure (one "
        "token can hold 0.9 by itself) and large when it hesitates.",
        (r"\text{keep the smallest set } S \text{ of top-ranked}",
         r"\text{tokens with } \sum_{i \in S} p_i \ge p"),
    )


def renormalised_chart(state: AppState, pr, order, stats) -> None:
    n_kept = stats.n_kept
    kept_ranked = [int(i) for i in order if pr.kept[i]][:RENORMALISED]
    labels = [token_label(state.tokenizer, i, show_id=True) for i in kept_ranked]
    which = (f"{n_kept} kept token(s)" if n_kept == len(kept_ranked)
             else f"top {len(kept_ranked)} of {n_kept:,} kept")
    fig = charts.renormalised(labels, pr.probs[kept_ranked], pr.final_probs[kept_ranked],
                              f"Renormalised: {which}")
    table = pd.DataFrame({"token_id": kept_ranked,
                          "token": [token_label(state.tokenizer, i) for i in kept_ranked],
                          "p_before": pr.probs[kept_ranked],
                          "p_after": pr.final_probs[kept_ranked]})
    show_chart(fig, "sampling_renormalised", table, key="sampling.renormalised",
               alt=alt_text.two_runs(labels, pr.probs[kept_ranked], pr.final_probs[kept_ranked],
                                     ("before", "after"), "Renormalising the kept tokens"))
    kept_mass = stats.kept_mass
    explain(
        f"The removed tokens' probability does not vanish: the kept tokens share it in "
        f"proportion. Here every kept probability is divided by {kept_mass:.4f}, so they add "
        "up to 1 again.",
        (r"p'_i = \frac{p_i}{\sum_{j \in S} p_j} \quad (i \in S)",
         r"p'_i = 0 \text{ otherwise}"),
    )


def draw(state: AppState, pr, drawn, seed: int) -> int:
    """The seeded draw: u from the seed, then the first token whose cumulative sum passes u."""
    u, token, seg, picked = drawn.u, drawn.token, drawn.segments, drawn.segment
    labels = [token_label(state.tokenizer, t, show_id=True) if t >= 0 else f"… {c} small tokens"
              for t, c in zip(seg.tokens, seg.counts, strict=True)]
    fig = charts.draw_bar(seg.starts, seg.widths, labels, u, picked,
                          f"The draw (seed {seed}): u = {u:.4f} → "
                          f"{token_label(state.tokenizer, token)}")
    table = pd.DataFrame({"start": seg.starts, "width": seg.widths, "token_id": seg.tokens,
                          "tokens_in_segment": seg.counts, "label": labels})
    show_chart(fig, "sampling_draw", table, key="sampling.draw",
               alt=f"The draw u = {u:.4f} (seed {seed}) falls in the segment of "
                   f"{alt_text.quoted(labels[picked])}, which starts at "
                   f"{float(seg.starts[picked]):.4f} and is {float(seg.widths[picked]):.4f} wide.")
    st.markdown(
        f"Drawn token: **{plain(token_label(state.tokenizer, token))}** (id {token}), probability "
        f"{float(pr.final_probs[token]):.4f} after the cut. The same seed always gives the same "
        "u, so the same token; the Decoding page's sampling starts with this very draw.")
    st.button("Draw again (seed + 1)", key="sampling.redraw", on_click=set_control,
              args=("sampling.seed", min(seed + 1, MAX_SEED)))
    explain(
        "Sampling lays the kept probabilities end to end on a line from 0 to 1 (in token-id "
        "order), draws a uniform random number u, and picks the token whose stretch contains "
        "u. A token with probability 0.3 owns 30 % of the line, so it is picked 30 % of the "
        "time. Tokens under 0.5 % are merged into grey stretches here so the bar stays "
        "readable.",
        (r"u \sim \mathcal{U}[0, 1)",
         r"\text{pick the first } i \text{ with } \sum_{j \le i} p'_j > u"),
    )
    return token


def explain_softmax(uniform_bits: float) -> None:
    explain(
        "Softmax turns the v scores into probabilities. The temperature T divides the "
        "scores first; entropy measures how spread out the result is (0 bits = certain, "
        f"log₂ v = {uniform_bits:.1f} bits = every token equally likely).",
        (r"p_i = \frac{e^{z_i / T}}{\sum_j e^{z_j / T}}", r"H = -\sum_i p_i \log_2 p_i"),
    )


GREEDY_NOTE = ("T = 0 cannot divide the scores (x / 0), so it is taken as the limit: all the "
               "probability goes to the highest score. That is **greedy** decoding: top-k, "
               "top-p and the seed no longer matter.")


@st.fragment
def sampling_lab(state: AppState, row) -> None:
    """Everything that depends on the controls: reruns alone when one of them moves.

    Projected, the controls sit in a column beside the two charts they change, all on one
    1280 x 720 screen; the numbers and explanations follow below."""
    with fair_turn(), guard():
        projected = projector.is_on()
        if projected:
            side, *beside = st.columns([1.0, 1.6, 1.6], gap="small")
            temperature, top_k, top_p, seed = controls(state.v, [side] * 4)
        else:
            beside = None
            temperature, top_k, top_p, seed = controls(state.v, st.columns(4))
        pr = process_logits(row, temperature, top_k or None, top_p)
        raw = softmax_with_temperature(row)  # (v,) T = 1, no cut
        order = sorted_distribution(raw).order  # rank by score (the same order at any T > 0)
        stats = ti.sampling_summary(pr)
        drawn = ti.seeded_draw(pr.final_probs, seed, MIN_SEGMENT)
        if beside:
            with beside[0]:
                ranked_chart(state, row, raw, pr, order, drawn.token, projected, stats.n_kept)
            with beside[1]:
                cumulative = cumulative_chart(state, pr, stats.n_kept, projected)
        if temperature == 0.0:
            st.info(GREEDY_NOTE)
        summary(raw, pr, stats, state.v)
        explain_softmax(stats.entropy_uniform)
        if not beside:
            ranked_chart(state, row, raw, pr, order, drawn.token, projected, stats.n_kept)
        ranked_note(state, min(len(order), shown_bars(stats.n_kept, projected)))
        if not beside:
            cumulative = cumulative_chart(state, pr, stats.n_kept, projected)
        cutoff_text(pr, cumulative, stats.n_kept)
        renormalised_chart(state, pr, order, stats)
        st.header("One random draw")
        draw(state, pr, drawn, seed)


with page("Softmax and sampling") as state:
    logits, _ = caches.get_trace(state)  # cached: the sliders below never rerun the model
    t = state.position
    if projector.is_on():  # the room hears the rest from the teacher: the charts move up
        st.markdown(f"What comes after **{plain(state.labels[t])}** (position {t})?")
    else:
        st.markdown(f"The scores (logits) for what comes after **{plain(state.labels[t])}** "
                    f"(position {t}, change it in the sidebar): {state.v:,} numbers, one per "
                    "vocabulary token. Move the controls to see how each step reshapes them.")
    sampling_lab(state, logits[t])
