"""The Interventions page's three experiments, each a section: patching (which block and
position carry the difference between two prompts), ablation (what the model says without
some heads or neurons) and steering (push the residual stream along the difference of two
prompts). Every number is the model's own forward with the change made at one point of it
(tinygpt.readouts.interventions, through tinygpt_app.compute.interventions); the patching
grid is computed when asked."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from tinygpt import readouts as ti
from tinygpt_app.charts import interventions as charts
from tinygpt_app.compute import caches
from tinygpt_app.compute import interventions as compute
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import (
    ANSWER,
    CLEAN,
    COEFFICIENT,
    CORRUPT,
    HEADS,
    LAYER,
    MEAN,
    NEURON_LAYER,
    NEURONS,
    POSITION,
    SITE,
    STEER_A,
    STEER_B,
    STEER_LAYER,
    pairs,
)
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import (
    MAX_URL_PROMPT_CHARS,
    AppState,
    control,
    encode_prompt,
    start_value,
)
from tinygpt_app.kit.widgets import chips, explain, grid_table, series_table, show_chart

SITE_NAMES = {"resid_pre": "residual stream entering the block",
              "attn_out": "what attention writes", "mlp_out": "what the feed-forward writes"}
TOP = 5  # top tokens of each run in a comparison
ANSWERS = 8  # answer tokens offered: the clean run's top 8
NEURONS_OFFERED = 24  # the neurons of a block offered: the most active at the last position


def prompt_box(state: AppState, label: str, key: str, spec, column):
    """A prompt of the page's own (capped in characters and tokens), as token ids."""
    text = control(column.text_area, label, key, spec, height=68,
                   max_chars=MAX_URL_PROMPT_CHARS,
                   help=f"At most {MAX_URL_PROMPT_CHARS:,} characters. Ctrl+Enter to run.")
    ids, notes = encode_prompt(state.tokenizer, text, state.config.n_ctx)
    for note in notes:
        column.warning(plain(note.replace("The prompt", f"The {label.lower()}")))
    return ids


def labels_of(state: AppState, ids) -> list[str]:
    return [token_label(state.tokenizer, t) for t in ids]


def compared(state: AppState, rows: dict) -> tuple[list[str], dict]:
    """The union of each run's top tokens (first run's order) and every run's p of them."""
    probs = {name: ti.probabilities(row) for name, row in rows.items()}
    tokens: list[int] = []
    for row in rows.values():
        tokens += [int(t) for t in ti.top_k(row, TOP)[0] if int(t) not in tokens]
    labels = [token_label(state.tokenizer, t, show_id=True) for t in tokens]
    return labels, {name: p[tokens] for name, p in probs.items()}


def draw_runs(state: AppState, rows: dict, title: str, name: str) -> None:
    labels, probs = compared(state, rows)
    names = list(probs)
    show_chart(charts.distributions(labels, probs, title), name,
               series_table({f"p {n}": p for n, p in probs.items()}, labels, "token"),
               key=f"interventions.{name}",
               alt=alt_text.two_runs(labels, probs[names[0]], probs[names[-1]],
                                     (names[0], names[-1]), "p(next token)"))


# ----------------------------------------------------------------------------- patching


def patching_pair(state: AppState) -> tuple | None:
    """The clean and corrupted prompts' ids, or None (with a plain message) when one is
    empty."""
    left, right = st.columns(2)
    clean = prompt_box(state, "Clean prompt", "interventions.clean", CLEAN, left)
    corrupt = prompt_box(state, "Corrupted prompt", "interventions.corrupt", CORRUPT, right)
    if len(clean) == 0 or len(corrupt) == 0:
        st.info("Type both prompts: the clean one, and a corrupted one that differs in a "
                "word or two.")
        return None
    chips([(label, "clean") for label in labels_of(state, clean)])
    chips([(label, "corrupted") for label in labels_of(state, corrupt)])
    return clean, corrupt


def patchable(clean, corrupt) -> bool:
    """Whether the grid can run on these prompts; if not, says why."""
    most = compute.MAX_PATCH_TOKENS
    if max(len(clean), len(corrupt)) > most:
        st.warning(f"Patching compares the prompts position by position; keep each to at "
                   f"most {most} tokens (these have {len(clean)} and {len(corrupt)}).")
        return False
    if len(clean) != len(corrupt):
        st.warning(f"The clean prompt has {len(clean)} tokens and the corrupted one "
                   f"{len(corrupt)}. Patching swaps activations position by position, so "
                   "both need the same number of tokens: change a word for a word.")
        return False
    return True


def choose_answer(state: AppState, clean) -> int:
    row = compute.last_row(state, clean)
    options = [int(t) for t in ti.top_k(row, ANSWERS)[0]]
    names = {t: token_label(state.tokenizer, t, show_id=True) for t in options}
    return control(st.selectbox, "Answer token (the clean prompt's top guesses)",
                   "interventions.answer", ANSWER, default=options[0], choices=options,
                   format_func=names.get)


def run_grid(state, clean, corrupt, answer: int, site: str) -> ti.Patching | None:
    result = compute.patching_cached(state, clean, corrupt, answer, site)
    if result is not None:
        return result
    n_layer, shown = state.n_layer, compute.grid_positions(state, len(clean))
    if shown < len(clean):
        st.caption(f"The grid will patch the last {shown} of {len(clean)} positions (the cost "
                   "grows with the model's size and the prompt's length).")
    if not st.button(f"Run the patching grid ({n_layer} blocks × {shown} positions)",
                     key="interventions.run", type="primary"):
        st.info("The grid runs the corrupted prompt once per cell, from the patched block "
                "on. Press the button to compute it.")
        return None
    bar = st.progress(0.0, text="Patching…")

    def progress(done: int, total: int) -> None:
        bar.progress(done / total, text=f"Patching: block {done} of {total} done")

    result = compute.patching(state, clean, corrupt, answer, site, progress)
    bar.empty()
    return result


def draw_grid(state: AppState, result: ti.Patching, corrupt, clean) -> None:
    cols = result.positions
    layers = [f"block {i}" for i in range(state.n_layer)]
    tokens = [f"{t}: {a}" if a == b else f"{t}: {a}→{b}" for t, a, b in
              zip(cols, (labels_of(state, clean[cols])), labels_of(state, corrupt[cols]),
                  strict=True)]
    z = result.recovered[:, cols]
    answer = token_label(state.tokenizer, result.answer_id)
    if len(cols) < len(corrupt):
        st.caption(f"The grid covers the last {len(cols)} of {len(corrupt)} positions.")
    if result.best_cell() is None:
        st.info("Both prompts give the answer the same log-probability: there is nothing to "
                "recover. Change the corrupted prompt.")
        return
    title = f"How much of log p({answer}) each patch brings back"
    show_chart(charts.patching_map(z, tokens, title), f"patching_{result.site}",
               grid_table(z, layers, tokens, "block", "position"), key="interventions.grid",
               alt=alt_text.grid(z, layers, tokens, f"recovered share of log p({answer})"))


def draw_cell(state, result: ti.Patching, clean, corrupt) -> None:
    best = result.best_cell()  # (block, index into the positions): the largest recovery
    left, right = st.columns(2)
    layer = control(left.selectbox, "Block of the cell", "interventions.layer", LAYER,
                    default=int(best[0]), hi=state.n_layer - 1, options=range(state.n_layer))
    positions = [int(p) for p in result.positions]
    position = control(right.selectbox, "Position of the cell", "interventions.position",
                       POSITION, default=positions[int(best[1])], choices=positions,
                       format_func=lambda p: f"{p}: {token_label(state.tokenizer, clean[p])}")
    patched = compute.patched_row(state, clean, corrupt, layer, position, result.site)
    score = ti.answer_score(patched, result.answer_id)
    st.markdown(f"Patched at block {layer}, position {position}: log p = **{score:.3f}** "
                f"(the grid's cell: {result.scores[layer, position]:.3f}).")
    rows = {"clean": compute.last_row(state, clean), "corrupted": compute.last_row(state, corrupt),
            "patched": patched}
    draw_runs(state, rows, f"Next token: clean, corrupted, patched at block {layer}, "
              f"position {position}", "patching_cell")


def patching_section(state: AppState) -> None:
    explain("Run the **corrupted** prompt, but take one activation (one block, one position) "
            "from the **clean** run. If the answer comes back, that activation carried the "
            "difference. The colour is the share recovered: 0 (white) is the corrupted run's "
            "log-probability of the answer, 1 (blue) the clean run's; red went the other way.",
            r"\text{recovered} = \frac{\log p_{\text{patched}} - \log p_{\text{corrupted}}}"
            r"{\log p_{\text{clean}} - \log p_{\text{corrupted}}}")
    pair = patching_pair(state)
    if pair is None:
        return
    clean, corrupt = pair
    answer = choose_answer(state, clean)
    draw_runs(state, {"clean": compute.last_row(state, clean),
                      "corrupted": compute.last_row(state, corrupt)},
              "Next token after each prompt", "patching_runs")
    if not patchable(clean, corrupt):
        return
    site = control(st.radio, "Patch", "interventions.site", SITE, format_func=SITE_NAMES.get,
                   horizontal=True)
    result = run_grid(state, clean, corrupt, answer, site)
    if result is None:
        return
    name = token_label(state.tokenizer, answer)
    st.markdown(f"log p({plain(name)}): clean **{result.clean_score:.3f}**, corrupted "
                f"**{result.corrupt_score:.3f}**.")
    draw_grid(state, result, corrupt, clean)
    if result.best_cell() is not None:
        draw_cell(state, result, clean, corrupt)


# ----------------------------------------------------------------------------- ablation


def pair_name(kind: str) -> Callable[[str], str]:
    return lambda entry: "block {}, {} {}".format(entry.split(".")[0], kind, entry.split(".")[1])


def pick_heads(state: AppState) -> list[tuple[int, int]]:
    heads = [f"{layer}.{h}" for layer in range(state.n_layer) for h in range(state.n_head)]
    picked = control(st.multiselect, "Heads to ablate", "interventions.heads", HEADS,
                     hi=state.n_layer, per=state.n_head, options=heads,
                     max_selections=HEADS.cap, format_func=pair_name("head"))
    return pairs(picked)


def pick_neurons(state: AppState) -> list[tuple[int, int]]:
    """Neurons of any block: the chosen block's most active are offered, beside those
    picked already (in this block or another, or by a link)."""
    layer = control(st.selectbox, "Block of the neurons", "interventions.neuron_layer",
                    NEURON_LAYER, hi=state.n_layer - 1, options=range(state.n_layer))
    _, trace = caches.get_trace(state)
    post = trace[f"blocks.{layer}.ffn.post"][-1]  # (I,) at the last position
    offered = [f"{layer}.{n}" for n in ti.most_active(post, NEURONS_OFFERED)]
    label = (f"Neurons to ablate (offered: block {layer}'s {len(offered)} most active at the "
             "last token)")
    bounds = dict(hi=state.n_layer, per=len(post))
    kept = start_value(label, "interventions.neurons", NEURONS, **bounds)  # offered too
    named = pair_name("neuron")

    def name(entry: str) -> str:
        block, n = pairs([entry])[0]
        return named(entry) + (f" ({post[n]:+.2f})" if block == layer else "")

    picked = control(st.multiselect, label, "interventions.neurons", NEURONS, **bounds,
                     options=offered + [e for e in kept if e not in offered],
                     max_selections=NEURONS.cap, format_func=name)
    return pairs(picked)


def ablation_section(state: AppState) -> None:
    explain("Set some heads' outputs (before the output projection) or some feed-forward "
            "neurons to zero, or to their mean over the prompt's positions, and watch the "
            "next-token guess after the prompt in the sidebar change.")
    picked = pick_heads(state)
    neurons = pick_neurons(state)
    mean = control(st.toggle, "Mean instead of zero", "interventions.mean", MEAN,
                   help="Replace each by its mean over the prompt's positions.")
    if not picked and not neurons:
        st.info("Pick heads or neurons above to ablate them.")
    normal = compute.last_row(state, state.ids)
    ablated = compute.ablated_row(state, picked, neurons, mean)
    draw_runs(state, {"normal": normal, "ablated": ablated},
              f"Next token after the prompt: normal and ablated ({len(picked)} heads, "
              f"{len(neurons)} neurons)", "ablation")
    before, after = (int(ti.top_k(row, 1)[0][0]) for row in (normal, ablated))
    st.markdown(f"Top guess: {plain(token_label(state.tokenizer, before))} → "
                f"{plain(token_label(state.tokenizer, after))}.")


# ----------------------------------------------------------------------------- steering


def steering_section(state: AppState) -> None:
    explain("Take the residual stream entering a block at the last token of prompt A, minus "
            "that of prompt B: a direction. Add a multiple of it at every position of the "
            "prompt in the sidebar, and see where the model goes.",
            r"x_t \leftarrow x_t + c\,(x^{A}_{\text{last}} - x^{B}_{\text{last}})")
    left, right = st.columns(2)
    a = prompt_box(state, "Prompt A (towards)", "interventions.steer_a", STEER_A, left)
    b = prompt_box(state, "Prompt B (away from)", "interventions.steer_b", STEER_B, right)
    if len(a) == 0 or len(b) == 0:
        st.info("Type both prompts: the direction goes from B to A.")
        return
    layer = control(st.slider, "Block whose input is steered", "interventions.steer_layer",
                    STEER_LAYER, default=state.n_layer // 2, hi=state.n_layer - 1, min_value=0,
                    max_value=state.n_layer - 1)
    c = control(st.slider, "Coefficient c", "interventions.coefficient", COEFFICIENT,
                min_value=COEFFICIENT.lo, max_value=COEFFICIENT.hi, step=0.5)
    logits, new = compute.steered(state, a, b, layer, c)
    vector = compute.steering_vector(state, a, b, layer)
    st.markdown(f"The direction's length ‖A − B‖ = {ti.vector_length(vector):.2f}.")
    draw_runs(state, {"normal": compute.last_row(state, state.ids), "steered": logits},
              f"Next token after the prompt: normal and steered (c = {c:+.1f}, block {layer})",
              "steering")
    plain_new = compute.continuation(state)
    st.markdown(f"**Greedy continuation, normal:** {plain(state.tokenizer.decode(plain_new))}")
    st.markdown(f"**Greedy continuation, steered:** {plain(state.tokenizer.decode(new))}")
