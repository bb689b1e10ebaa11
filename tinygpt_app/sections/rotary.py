"""The Rotary positions section of the Attention page: for the chosen layer and head, one pair
of numbers of q and k drawn turning with the position, the score of one query and one key as
they move apart, the live check that shifting every position changes no score, and the same
row scored without the turn ("what if: no RoPE").

Every number comes from tinygpt.readouts.modern.rotary (one head of one layer of the page's trace).
On a model with a learned position table the section is one line that says so and names a
model that has them.
"""

from __future__ import annotations

import streamlit as st

from tinygpt.readouts.modern import rotary as ro
from tinygpt_app.charts.modern import rotary as charts
from tinygpt_app.kit.alt_text import quoted
from tinygpt_app.kit.controls import ROPE_PAIR, ROPE_SHIFT
from tinygpt_app.kit.labels import shape
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import columns, explain, part_elsewhere, series_table, show_chart

NO_ROTARY = ("it adds a learned position vector to each token before the first block, so its "
             "q and k are never turned")


def draw_rotary(state: AppState, trace, layer: int, head: int, key: int) -> None:
    """The whole section for block `layer`, query head `head`; `key`: the key token chosen in
    the score-by-hand section (the query is the inspected position)."""
    if state.config.position != "rope":
        part_elsewhere("Rotary positions (RoPE)", NO_ROTARY,
                       lambda parts: parts.get("position") == "rope", state.model_id)
        return
    st.header("Rotary positions (RoPE): where the order of the tokens comes in")
    half = state.head_size // 2
    explain(
        "This model has no position table. Instead, inside every head, q and k are cut into "
        f"{half} pairs of numbers and each pair is **turned** by an angle that grows with the "
        "token's position: pair j turns by θ^(−2j/hs) radians per position, the first pairs "
        "fast, the last ones slowly. A turn keeps a vector's length; what changes is the "
        "angle between q and k, and that angle depends only on **how far apart** they are.",
        r"\begin{aligned}q_i^{\mathrm{rot}} \cdot k_j^{\mathrm{rot}} &= (R_{i}\,q_i)\cdot"
        r"(R_{j}\,k_j) = q_i \cdot R_{\,j-i}\,k_j\\ R_p &= \text{turn pair } m \text{ by } "
        r"p\,\theta^{-2m/h_s}\end{aligned}")  # stacked: a phone is narrow
    draw_pair(state, trace, layer, head)
    draw_offset(state, trace, layer, head, key)
    draw_shift_check(state, trace, layer, head)
    draw_without(state, trace, layer, head)


def per_position(speed: float) -> str:
    """A turning speed in words: "1 radian per position", "0.316 radians per position"."""
    text = f"{speed:.3g}"
    return f"{text} radian{'' if text == '1' else 's'} per position"


def draw_pair(state: AppState, trace, layer: int, head: int) -> None:
    half = state.head_size // 2
    speeds = ro.rotary_of(state.model, layer).inv_freq  # (hs/2,) radians per position
    pairs = list(range(half))
    j = control(st.selectbox, "Pair of numbers in the head", "attention.rope_pair", ROPE_PAIR,
                choices=pairs,
                format_func=lambda m: f"pair {m}: numbers {m} and {m + half}, "
                                      f"{per_position(speeds[m])}")
    pair = ro.rotary_pair(state.model, trace, layer, head, j)
    t = state.position
    title = f"Pair {j}, head {head}, block {layer}: q and k turned"  # short: a phone is narrow
    alt = (f"Pair {j} turns {per_position(pair.radians_per_position)}, a full turn "
           f"every {pair.positions_per_turn:,.1f} positions: q of {quoted(state.labels[t])} "
           f"(position {t}) is turned by {pair.angles[t]:.2f} radians; the keys at positions "
           f"0 to {t} are turned by 0 to {pair.angles[t]:.2f} radians.")
    table = series_table({"q first": pair.q[:, 0], "q second": pair.q[:, 1],
                          "q turned first": pair.q_rot[:, 0], "q turned second": pair.q_rot[:, 1],
                          "k turned first": pair.k_rot[:, 0], "k turned second": pair.k_rot[:, 1],
                          "angle (radians)": pair.angles}, state.labels, "position: token")
    show_chart(charts.pair_vectors(pair.q, pair.q_rot, pair.k_rot, t, state.labels, title),
               f"rope_pair{j}_layer{layer}_head{head}", table, key="attention.rope_vectors",
               alt=alt)
    m1, m2, m3 = st.columns(3)
    m1.metric("radians per position", f"{pair.radians_per_position:.4g}")
    m2.metric("positions per full turn", f"{pair.positions_per_turn:,.1f}")
    m3.metric(f"angle of q at position {t}", f"{pair.angles[t]:.3f} rad")
    st.caption(f"Numbers {pair.dims[0]} and {pair.dims[1]} of the head (hs = "
               f"{state.head_size}). Dashed: q before its turn; thick orange: after. The faded "
               "circle is where the same q would point at other positions; dots: the keys "
               "after their turns, coloured by position.")


def draw_offset(state: AppState, trace, layer: int, head: int, key: int) -> None:
    t = state.position
    curve = ro.score_by_offset(state.model, trace, layer, head, t, key)
    st.subheader("The score depends on the distance only")
    st.markdown(f"Keep what q of **{plain(state.labels[t])}** and k of "
                f"**{plain(state.labels[key])}** say "
                "(their numbers before the turn) and place them at every distance apart: "
                "the curve is their score, every pair of the head turned. Where they really "
                f"are, {curve.offset} apart, it is the model's own score, {curve.score:+.4f}.")
    title = shape(f"Score of q[{t}] and k[{key}] moved apart, block {layer} head {head}",
                  n=len(curve.offsets))
    show_chart(charts.score_by_offset(curve.offsets, curve.scores, curve.offset, curve.score,
                                      title),
               f"rope_offset_q{t}_k{key}_layer{layer}_head{head}",
               series_table({"score": curve.scores}, curve.offsets, "offset"),
               key="attention.rope_offset",
               alt=(f"Score of q of {quoted(state.labels[t])} and k of "
                    f"{quoted(state.labels[key])} moved apart: at offset {curve.offset} it is "
                    f"{curve.scores[curve.offset]:+.4f} (the model's {curve.score:+.4f}); from "
                    f"{curve.scores.min():+.3f} to {curve.scores.max():+.3f} over offsets 0 to "
                    f"{len(curve.offsets) - 1}."))


def draw_shift_check(state: AppState, trace, layer: int, head: int) -> None:
    st.subheader("Live check: move the whole prompt along")
    n_ctx = state.config.n_ctx
    shift = control(st.number_input, "Shift every position by", "attention.rope_shift",
                    ROPE_SHIFT, default=min(ROPE_SHIFT.default, n_ctx), hi=n_ctx, min_value=0,
                    max_value=n_ctx, step=1)
    check = ro.shift_check(state.model, trace, layer, head, shift)
    st.markdown(f"Every q and k of head {head} turned again as if the prompt started at "
                f"position {shift} instead of 0, and every visible score computed again "
                f"({int(check.visible.sum()):,} scores):")
    left, middle, right = st.columns(3)
    left.metric("largest change of a score", f"{check.max_difference:.2e}")
    middle.metric("largest score", f"{check.largest_score:.3f}")
    right.metric("float rounding at that size", f"{check.tolerance:.1e}")
    if check.holds:
        st.success("Unchanged, to float rounding: only the distance between two tokens "
                   "counts, not where they are. That is what makes RoPE *relative*.")
    else:
        st.warning("The scores changed by more than float rounding.")
    st.caption("With a position table (GPT-2) the same shift adds other position vectors to "
               "every token, and the scores change.")


def draw_without(state: AppState, trace, layer: int, head: int) -> None:
    t = state.position
    row = ro.row_without_rotation(state.model, trace, layer, head, t)
    keys = [state.labels[j] for j in row.keys]
    st.subheader("What if: no RoPE")
    st.markdown(f"The same q of **{plain(state.labels[t])}** and the same keys, scored without "
                "their turns: this head would see the tokens as an unordered bag, and a word "
                "far back would count as much as the one just before. (Only this head changes; "
                "nothing after it is run again.)")
    best, best_unturned = int(row.weights.argmax()), int(row.weights_unturned.argmax())
    a, b = columns(2)
    for column, value, turned, unturned in ((a, "score", row.scores, row.scores_unturned),
                                            (b, "weight", row.weights, row.weights_unturned)):
        with column:
            show_chart(charts.with_and_without(
                keys, turned, unturned,
                f"The {value}s of {state.labels[t]}, with and without RoPE", value),
                f"rope_without_{value}_q{t}_layer{layer}_head{head}",
                series_table({"with RoPE": turned, "without RoPE": unturned}, keys, "key"),
                key=f"attention.rope_without_{value}",
                alt=(f"{value.capitalize()}s of {quoted(state.labels[t])}: with RoPE highest "
                     f"at {quoted(keys[int(turned.argmax())])} {turned.max():+.3f}, without "
                     f"at {quoted(keys[int(unturned.argmax())])} {unturned.max():+.3f}."))
    st.caption(f"Strongest look with RoPE: {plain(keys[best])} ({row.weights[best]:.3f}); without: "
               f"{plain(keys[best_unturned])} ({row.weights_unturned[best_unturned]:.3f}).")
