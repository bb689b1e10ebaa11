"""Decoding: greedy, sampling and beam search continue the same prompt, side by side.

Generation is tinygpt.decoding.generation.generate (with the KV cache), cached per (model, prompt,
settings). Stepping through a run recomputes that step's distribution from one cached forward
pass over the generated text, with the same process_logits the generator used.

A small model's three runs are made as the page opens. A large one's (GPT-2 small: a few
seconds a run in a busy class; tinygpt_app.sections.decoding_runs decides) are written only
when the student asks, and shown as they grow; until then the page shows what is already known:
the first step's distribution, and the runs the class already made.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt.decoding.generation import Run, process_logits
from tinygpt.readouts import beam_tree, shared_start, sorted_distribution
from tinygpt_app.charts import decoding as charts
from tinygpt_app.charts.sampling import ranked_bars
from tinygpt_app.compute import caches
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import (
    BEAMS,
    MAX_BEAMS,
    MAX_NEW,
    MAX_SEED,
    NEW,
    SEED,
    STEP,
    STEPS_SHOWN,
    STRATEGY,
    TEMPERATURE,
    TOP_K,
    TOP_P,
)
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control, set_control
from tinygpt_app.kit.widgets import chips, chips_html, explain, show_chart, text_download
from tinygpt_app.sections import decoding_runs
from tinygpt_app.sections.kv_cache import draw_kv_cache

SHOWN = 20  # bars in a step's chart
TREE_WINDOW = 25  # beam-tree steps drawn at once
CONTEXT_CHIPS = 24  # tokens of context shown before the step's token
STRATEGIES = {"greedy": "Greedy", "sample": "Sampling", "beam": "Beam search"}


def controls(state: AppState) -> dict:
    c = st.columns(6)
    new = control(c[0].slider, "New tokens", "decoding.new", NEW,
                  default=decoding_runs.default_new_tokens(state.model), min_value=1,
                  max_value=MAX_NEW, step=1,
                  help="The same number for all three strategies (at most 100).")
    temperature = control(c[1].slider, "Temperature T", "decoding.temperature",
                          TEMPERATURE, min_value=TEMPERATURE.lo,
                          max_value=TEMPERATURE.hi, step=0.05, help="Sampling only. 0 = greedy.")
    top_k = control(c[2].number_input, "Top-k (0 = off)", "decoding.top_k", TOP_K,
                    hi=state.v, min_value=0, max_value=state.v, step=1,
                    help="Sampling only.")
    top_p = control(c[3].slider, "Top-p (1 = off)", "decoding.top_p", TOP_P,
                    min_value=TOP_P.lo, max_value=TOP_P.hi, step=0.01,
                    help="Sampling only.")
    seed = control(c[4].number_input, "Seed", "decoding.seed", SEED,
                   min_value=0, max_value=MAX_SEED, step=1,
                   help="Sampling only: the same seed gives the same text.")
    beams = control(c[5].slider, "Beams", "decoding.beams", BEAMS,
                    min_value=1, max_value=MAX_BEAMS, step=1, help="Beam search only.")
    return dict(new=new, temperature=temperature, top_k=top_k or None, top_p=top_p, seed=seed,
                beams=beams)


def prompt_ids(state: AppState, new: int):
    """The prompt's last tokens, leaving room in the context for the new ones (with a note)."""
    room = max(1, state.config.n_ctx - new)
    if state.n > room:
        st.caption(f"To leave room for {new} new tokens in the model's context of "
                   f"{state.config.n_ctx}, the runs start from the last {room} prompt tokens.")
        return state.ids[-room:]
    return state.ids


def run_settings(s: dict, eos: int | None) -> dict[str, Run]:
    """strategy -> the Run the page's settings ask for."""
    common = dict(max_new_tokens=s["new"], eos_token_id=eos, record_steps=False)
    return {
        "greedy": Run(strategy="greedy", **common),
        "sample": Run(strategy="sample", temperature=s["temperature"], top_k=s["top_k"],
                      top_p=s["top_p"], seed=s["seed"], **common),
        "beam": Run(strategy="beam", num_beams=s["beams"], **common),
    }


def stop_text(state: AppState, result, asked: int) -> str:
    n = len(result.tokens)
    if result.stop_reason == "eos":
        end = plain(token_label(state.tokenizer, result.tokens[-1])) if n else "its end token"
        return f"Stopped after {n} tokens: the model wrote **{end}**, its end of text."
    if result.stop_reason == "context_full":
        return (f"Stopped after {n} tokens: the context window is full "
                f"(n_ctx = {state.config.n_ctx} tokens).")
    return f"Stopped after the {asked} new tokens asked for."


def column(state: AppState, name: str, result, seconds: float, made_with: int, asked: int,
           eos) -> None:
    st.subheader(STRATEGIES[name])
    text = state.tokenizer.decode([int(t) for t in result.tokens])
    st.code(text or " ", language=None, wrap_lines=True)  # the copy button is on the block
    reason = stop_text(state, result, asked)
    (st.success if result.stop_reason == "eos" else st.info)(reason)
    items = []
    for i, token in enumerate(result.tokens):
        caption = f"p {result.steps[i].prob:.3f}" if result.steps else f"id {int(token)}"
        items.append((token_label(state.tokenizer, token), caption))
    stop_at = len(items) - 1 if result.stop_reason == "eos" else None
    if stop_at is not None:  # named in words too, not by the red border alone
        items[stop_at] = (items[stop_at][0], f"{items[stop_at][1]} · end")
        st.markdown("Last token: " + chips_html(items[-1:], highlight=0),
                    unsafe_allow_html=True)
    with st.expander("The new tokens one by one"):
        chips(items, highlight=stop_at)
    extra = f" · score {result.score:.3f}" if result.score is not None else ""
    timing = ("read off a longer run made before, no new model call" if made_with == 0
              else f"{seconds * 1000:.0f} ms" if made_with == 1
              else f"{seconds * 1000:.0f} ms for the {made_with} runs made together")
    st.caption(f"{len(result.tokens)} tokens · {timing}{extra}"
               + (" · the chip marked end (red border) is the end-of-text token"
                  if stop_at is not None else ""))


def step_controls(results: dict) -> tuple[str, object, int] | None:
    """Which run and which of its steps to explain: (strategy, result, step), or None."""
    c1, c2 = st.columns([1, 3])
    runs = [name for name in ("greedy", "sample") if name in results]  # a large model: made
    strategy = control(c1.radio, "Run", "decoding.strategy", STRATEGY,
                       default="sample" if "sample" in runs else runs[0], choices=runs,
                       format_func=STRATEGIES.get, horizontal=True)
    result = results[strategy][0]
    n = len(result.tokens)
    if n == 0:
        st.info("This run made no tokens (the prompt already fills the context).")
        return None
    with c2:
        step = control(st.slider, "Step", "decoding.step", STEP, hi=max(n - 1, 1),
                       min_value=0, max_value=max(n - 1, 1), step=1,
                       help="Which new token to explain.")
    step = min(step, n - 1)
    b1, b2, _ = st.columns([1, 1, 6])
    b1.button("◀ previous", key="decoding.previous", on_click=set_control,
              args=("decoding.step", max(step - 1, 0)), disabled=step == 0)
    b2.button("next ▶", key="decoding.next", on_click=set_control,
              args=("decoding.step", min(step + 1, n - 1)), disabled=step >= n - 1)
    return strategy, result, step


def step_logits(state: AppState, prompt, tokens, step: int):
    """The scores (v,) that chose new token `step`. Step 0's are the prompt read's last row,
    which the run started from (cached: on a large model, showing a run just written costs no
    model pass); a later step's come from running the tokens written before it."""
    if step == 0:
        return caches.prompt_logits(state, prompt)
    return caches.continuation(state, prompt, tokens)[step]  # (n, v): one row per new token


def step_view(state: AppState, results: dict, s: dict) -> None:
    st.header("Step by step")
    chosen = step_controls(results)
    if chosen is None:
        return
    strategy, result, step = chosen
    record, token = result.steps[step], int(result.steps[step].token)
    prompt_len = len(result.all_ids) - len(result.tokens)
    row = step_logits(state, result.all_ids[:prompt_len], result.tokens, step)  # (v,)
    pr = (process_logits(row, s["temperature"], s["top_k"], s["top_p"]) if strategy == "sample"
          else process_logits(row))
    start = max(0, record.position - CONTEXT_CHIPS)
    chips([(token_label(state.tokenizer, t), "new" if i >= prompt_len else "")
           for i, t in enumerate(result.all_ids[start:record.position + 1], start)],
          highlight=record.position - start)
    how = (f"drawn with u = {record.u:.4f}" if record.u is not None
           else "the most likely token (greedy)")
    st.markdown(f"Step {step}: **{plain(token_label(state.tokenizer, token))}** (id {token}), "
                f"{how}; its probability in the distribution it was picked from: "
                f"**{record.prob:.4f}** (recomputed here: {float(pr.final_probs[token]):.4f}).")
    step_chart(state, row, pr, token, step, strategy)


def first_step_view(state: AppState, s: dict) -> None:
    """Before any run of a large model: the distribution every run starts from (the prompt
    read that the runs will start from, so asking for one does not read the prompt again)."""
    st.header("The first step")
    row = caches.prompt_logits(state, prompt_ids(state, s["new"]))  # (v,)
    pr = process_logits(row, s["temperature"], s["top_k"], s["top_p"])
    (top,), (p_top,) = ti.top_k(row, 1)  # what greedy takes, and its probability
    top, p_top = int(top), float(p_top)
    st.markdown(f"Every run starts from this distribution: the model's next-token "
                f"probabilities after your prompt. Greedy will take the first bar, "
                f"**{plain(token_label(state.tokenizer, top))}** (id {top}, p = {p_top:.4f}); "
                f"sampling draws among the kept bars; beam search keeps the best "
                f"{2 * s['beams']} of them.")
    step_chart(state, row, pr, None, 0, "sample", which="before any run")


def step_chart(state: AppState, row, pr, token: int | None, step: int,
               strategy: str, which: str | None = None) -> None:
    """The step's distribution, ranked: the bars it was picked from (`which`: the chart says
    whose step it is; the strategy's name unless told)."""
    order = sorted_distribution(row).order  # rank by score
    shown = order[:SHOWN]
    where = [r for r, i in enumerate(shown) if i == token]
    fig = ranked_bars(
        [token_label(state.tokenizer, i, show_id=True) for i in shown],
        pr.probs[shown], pr.kept[shown],
        f"Step {step} ({which or STRATEGIES[strategy]}): the top {len(shown)} of v = {state.v:,} "
        f"next-token probabilities" + (f" at T = {pr.temperature:g}" if strategy == "sample"
                                       else ""),
        picked=where[0] if where else None)
    table = pd.DataFrame({"token_id": shown,
                          "token": [token_label(state.tokenizer, i) for i in shown],
                          "logit": row[shown], "p": pr.probs[shown], "kept": pr.kept[shown],
                          "p_final": pr.final_probs[shown]})
    show_chart(fig, f"decoding_step_{step}", table, key="decoding.step_chart",
               alt=alt_text.kept_and_cut(list(table["token"]), pr.probs[shown], pr.kept[shown],
                                         f"Step {step}, most likely"))
    if strategy == "sample":
        n_kept = ti.sampling_summary(pr).n_kept
        st.markdown(f"Cutoffs at this step: top-k removed {float(pr.top_k_removed_mass):.4f}, "
                    f"top-p removed {float(pr.top_p_removed_mass):.4f}; **{n_kept:,} of "
                    f"{state.v:,} tokens could be drawn**. Orange bars were cut.")
    else:
        st.markdown("Greedy ignores temperature, top-k and top-p: it always takes the first "
                    "bar.")


def tree_view(state: AppState, result, beams: int) -> None:
    st.header("The beam tree")
    history = result.beam_history or []
    if not history:
        st.info("Beam search made no step.")
        return
    nodes = beam_tree(history, result.tokens.tolist())
    n_steps = len(history)
    lo, hi = 0, n_steps - 1
    if n_steps > TREE_WINDOW:
        lo, hi = control(st.slider, "Steps shown", "decoding.tree_window", STEPS_SHOWN,
                         default=(0, TREE_WINDOW - 1), hi=n_steps - 1, min_value=0,
                         max_value=n_steps - 1)
    sub = ti.beam_tree_window(nodes, lo, hi)  # parents re-indexed into sub (-1: outside)
    texts = [token_label(state.tokenizer, nd.token) for nd in sub]
    fig = charts.beam_tree(
        [nd.step for nd in sub], [nd.rank for nd in sub], [nd.parent for nd in sub],
        [nd.status for nd in sub], texts, [nd.score for nd in sub],
        [nd.on_winning_path for nd in sub],
        f"Beam search with {beams} beams: the {2 * beams} best continuations kept at each of "
        f"steps {lo}–{hi} (of {n_steps})", root_text="prompt" if lo == 0 else "earlier steps")
    table = pd.DataFrame({
        "step": [nd.step for nd in sub], "rank": [nd.rank for nd in sub],
        "token_id": [nd.token for nd in sub], "token": texts,
        "score_sum_logp": [nd.score for nd in sub], "status": [nd.status for nd in sub],
        "final_score": [nd.final_score for nd in sub],
        "on_returned_path": [nd.on_winning_path for nd in sub],
    })
    show_chart(fig, "beam_tree", table, key="decoding.beam_tree",
               alt=alt_text.top_items(texts, [nd.score for nd in sub],
                                      "Best scores (sum of log p) among the nodes drawn"))
    explain(
        f"At each step every running beam is extended by every token; the {2 * beams} best "
        f"extensions by total log-probability are kept (the nodes), and the best {beams} that "
        "did not end become the running beams (blue). A candidate ending in `<|endoftext|>` "
        "becomes a finished hypothesis (green star), scored by its log-probability divided by "
        "its length. Faded nodes were pruned; the thick orange path is the text returned.",
        (r"\text{score}(y_{1..t}) = \sum_{i=1}^{t} \log p(y_i \mid \text{prompt}, y_{<i})",
         r"\text{final} = \frac{\text{score}}{t^{\,\text{length penalty}}}"),
    )
    finished = history[-1].finished
    if finished:
        draw_finished(state, finished)


def draw_finished(state: AppState, finished: list) -> None:
    """The finished hypotheses: the start they share said once, then where each differs (cut
    to the cell's width, whole texts looked alike)."""
    same = shared_start([list(h.tokens) for h in finished])
    decode = state.tokenizer.decode
    if same and len(finished) > 1:
        st.markdown(f"The {len(finished)} finished hypotheses share their first {same:,} "
                    f"token{'s' if same > 1 else ''}; the table shows where they differ, after "
                    "that shared start:")
        st.text(decode(finished[0].tokens[:same]))  # plain text, never markdown
    text = "after the shared start" if same else "finished hypothesis"
    st.dataframe(pd.DataFrame({
        text: [decode(h.tokens[same:]) or "(nothing more)" for h in finished],
        "tokens": [len(h.tokens) for h in finished],
        "score / length": [h.score for h in finished],
    }), hide_index=True, width="stretch",  # the numbers narrow: the text keeps the room
        column_config={text: st.column_config.TextColumn(width=200),
                       "tokens": st.column_config.NumberColumn(width=56),
                       "score / length": st.column_config.NumberColumn(format="%.3f",
                                                                       width=64)})


def progress_view(state: AppState, s: dict, holders: dict):
    """What the runs being written have written so far, each in its column's placeholder: a
    student watches the text grow while the model writes it (GPT-2 in a busy class: seconds)."""
    def watch(written: dict) -> None:
        for name, tokens in written.items():
            with holders[name].container():
                st.subheader(STRATEGIES[name])
                st.code(state.tokenizer.decode([int(t) for t in tokens]) or " ",
                        language=None, wrap_lines=True)
                best = " (its best beam so far)" if name == "beam" else ""
                st.caption(f"Writing… {len(tokens)} of {s['new']} new tokens{best}")
    return watch


def download(state: AppState, results: dict) -> None:
    """The runs' texts as one download."""
    everything = "\n\n".join(
        f"== {STRATEGIES[name]} ==\n{state.prompt}"
        + state.tokenizer.decode([int(t) for t in result.tokens])
        for name, (result, _, _) in results.items())
    text_download(everything, "generations", "Download the three texts" if len(results) == 3
                  else "Download the texts", key="decoding.download")


def runs_at_once(state: AppState, s: dict, eos: int | None) -> dict:
    """A small model: the three runs made together as the page opens, side by side."""
    columns = st.columns(3)
    results = caches.generations(state, prompt_ids(state, s["new"]), run_settings(s, eos))
    for col, (name, made) in zip(columns, results.items(), strict=True):
        with col:
            column(state, name, *made, s["new"], eos)
    download(state, results)
    return results


def on_demand_note(state: AppState) -> str:
    return (f"This model has {state.model.num_parameters() / 1e6:,.0f} M parameters, and "
            "every new token reads all of them: so here a run is written when you ask for it "
            f"and shown as it grows, and runs start at {decoding_runs.DEFAULT_NEW_LARGE} new "
            f"tokens (the shipped model: {decoding_runs.DEFAULT_NEW}; up to {MAX_NEW}). A run "
            "someone already made with the same prompt and settings is shown at once.")


def runs_on_demand(state: AppState, s: dict, eos: int | None) -> dict:
    """A large model: the runs already made, the runs this student asked for (written now,
    shown as they grow), and a button for each of the others. Returns the runs shown."""
    ids, runs = prompt_ids(state, s["new"]), run_settings(s, eos)
    subject = decoding_runs.subject_of(state.model_id, state.ids)
    asked = decoding_runs.asked_runs(subject)
    made = {name: hit for name, hit in caches.made_generations(state, ids, runs).items()
            if hit is not None}
    todo = {name: run for name, run in runs.items() if name in asked and name not in made}
    st.caption(on_demand_note(state))
    if len(made) + len(todo) < len(runs):
        st.button("Write all three", key="decoding.write.all", on_click=decoding_runs.ask,
                  args=(subject, list(runs)), help="The three runs together: one model step "
                  "per token for all of them.")
    holders = {}
    for col, name in zip(st.columns(3), runs, strict=True):
        if name in todo:
            holders[name] = col.empty()  # the run as it grows, then the run
        elif name in made:
            with col:
                column(state, name, *made[name], s["new"], eos)
        else:
            with col:
                write_button(name, subject, s["new"])
    if todo:
        made |= caches.generations(state, ids, todo, watch=progress_view(state, s, holders))
        for name, holder in holders.items():
            with holder.container():
                column(state, name, *made[name], s["new"], eos)
    results = {name: made[name] for name in runs if name in made}
    if results:
        download(state, results)
    return results


def write_button(name: str, subject: tuple, new: int) -> None:
    st.subheader(STRATEGIES[name])
    st.button(f"Write the {STRATEGIES[name].lower()} run", key=f"decoding.write.{name}",
              on_click=decoding_runs.ask, args=(subject, [name]),
              help=f"{new} new tokens, shown as the model writes them.")
    st.caption("Not written yet.")


with page("Decoding") as state:
    eos = getattr(state.tokenizer, "eos_token_id", None)
    explain(
        "Three ways to continue your prompt, one token at a time, each from the same "
        "model and the same number of new tokens. **Greedy** always takes the most likely "
        "token; **sampling** draws one at random after temperature, top-k and top-p; "
        "**beam search** follows several candidate texts at once and returns the one "
        "with the best total log-probability."
        + ("" if eos is not None else " This tokenizer has no `<|endoftext|>` token, so "
           "runs stop only at the length limit or the context."))
    options = controls(state)
    st.header("Three runs")
    results = (runs_on_demand if decoding_runs.writes_on_demand(state.model)
               else runs_at_once)(state, options, eos)
    if "greedy" in results or "sample" in results:
        step_view(state, results, options)
    else:  # a large model before its first run
        first_step_view(state, options)
    if "beam" in results:
        tree_view(state, results["beam"][0], options["beams"])
    if "greedy" in results:
        draw_kv_cache(state, results["greedy"][0], asked=options["new"])
