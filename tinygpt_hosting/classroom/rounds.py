"""Guess, then reveal: the rounds of a live class as the teacher and the students see them (the
same game played alone on the home page: tinygpt_app.sections.guess_first).

The numbers come from the model (tinygpt.readouts.guess_report); this module only fetches,
draws and sends. Guesses are people's text: shown with st.text, dataframes and escaped charts.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt_app.charts import classroom as charts
from tinygpt_app.compute import caches
from tinygpt_app.compute.models import available_models, is_session_model, load_model
from tinygpt_app.kit import alt_text
from tinygpt_app.kit import state as s
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot, widget_value
from tinygpt_app.kit.widgets import show_chart
from tinygpt_app.sections.guess_first import guess_token
from tinygpt_hosting.classroom import rules as cr
from tinygpt_hosting.classroom import session as lc

CHIPS = 8  # tokens offered as chips: some of the model's likely ones among others (a-z)
MODEL_EXTRA = 3  # the model's favourites added to the chart beside the class's guesses
MAX_BARS = 12
W_PICK, W_TYPED, W_NEW_WORD = "class.pick", "class.typed", "class.new_word"
W_POSITION = "class.position"
MINE: Slot[dict] = Slot("class.my_guesses", {})  # guesses as sent: {round number: text}
CHIPS_SHOWN: Slot[list] = Slot("class.chips", [])  # the token ids the guess form offers
# a lesson step's round (classroom.lesson) carries its choices as details choice0 .. choice7, and
# the teacher's published view its lock as the control `lesson_lock`
CHOICE_KEYS = tuple(f"choice{i}" for i in range(8))
LOCK_NAME = "lesson_lock"
LOCKED_NOTE = "The teacher has locked the prompt and the model for the lesson: you follow."
NEXT_TOKEN, ATTENTION = cr.KINDS  # "what comes next?", "which token does this head attend to?"


# ----------------------------------------------------------------------------- the model's side


def question_model(question: cr.Question, state: s.AppState) -> s.AppState:
    """The question's prompt under the model it was asked with (this session's model if that
    one is not on this server), as an AppState at the question's position."""
    model_id = question.details.get("model")
    if isinstance(model_id, str) and model_id != state.model_id \
            and model_id in available_models():
        model, tokenizer = load_model(model_id)
    else:
        model_id, model, tokenizer = state.model_id, state.model, state.tokenizer
    n_ctx = min(model.config.n_ctx, s.MAX_APP_TOKENS)
    ids, _ = s.encode_prompt(tokenizer, question.prompt, n_ctx)
    last = max(len(ids) - 1, 0)
    position = last if question.position is None else min(question.position, last)
    labels = [token_label(tokenizer, t, position=i) for i, t in enumerate(ids)]
    return s.AppState(model_id, model, tokenizer, question.prompt, ids, position, labels)


def next_token_probs(asked: s.AppState):
    """The model's next-token distribution (V,) after the asked position."""
    logits = caches.sequence_logits(asked, asked.ids)  # (T, V), cached
    return ti.probabilities(logits[asked.position])


def asked_head(question: cr.Question, asked: s.AppState) -> tuple[int, int]:
    """(layer, head) of an attention question, inside this model's sizes."""
    def whole(name: str, top: int) -> int:
        value = question.details.get(name, 0)
        return min(max(value, 0), top - 1) if isinstance(value, int) else 0
    return whole("layer", asked.n_layer), whole("head", asked.n_head)


def attention_row(question: cr.Question, asked: s.AppState):
    """The asked head's attention weights (t+1,) from the asked position t over 0..t."""
    layer, head = asked_head(question, asked)
    _, trace = caches.get_trace(asked)
    weights = trace[f"blocks.{layer}.attn.weights"][head]  # (T, T), cached trace
    return weights[asked.position, :asked.position + 1]


def choices_of(details: dict) -> list[str]:
    """A round's offered choices (a lesson step's; empty: a free guess)."""
    return [details[k] for k in CHOICE_KEYS if isinstance(details.get(k), str)]


def locked() -> bool:
    """Is this student locked to the teacher's view (the teacher's last published view)?"""
    view = lc.VIEW.get()
    return bool(view and view.state and view.state.controls.get(LOCK_NAME) is True)


def position_guess(text: str, last: int) -> int | None:
    """A guessed position sent as its number ("3"), or None when it is not one of 0..last."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and int(text) <= last else None


def question_text(asked: s.AppState) -> str:
    """The text the class continues: the prompt up to the asked position (its last 80 chars)."""
    text = asked.tokenizer.decode([int(i) for i in asked.ids[:asked.position + 1]])
    return text if len(text) <= 80 else "…" + text[-80:]


def question_line(number: int, question: cr.Question, asked: s.AppState) -> str:
    """The round's question as everyone reads it."""
    if question.kind == ATTENTION:
        layer, head = asked_head(question, asked)
        token = token_label(asked.tokenizer, asked.ids[asked.position])
        return (f"Round {number}: in layer {layer}, head {head}, which token does "
                f"{token} (position {asked.position}) attend to most?")
    asked_text = question.details.get("question")  # a lesson step's own words
    if isinstance(asked_text, str) and asked_text:
        return f"Round {number}: {asked_text} “{question_text(asked)}”"
    return f"Round {number}: what comes next after “{question_text(asked)}”?"


# ----------------------------------------------------------------------------- drawing a result


def draw_result(result: cr.RoundResult, state: s.AppState, *, key: str,
                mine: str | None = None) -> None:
    """The class's guesses beside the model's numbers for one revealed round: its next-token
    probabilities, or for an attention round the asked head's weights over the positions; with
    `mine` (a student's own guess as sent), whether it matched the class and the model."""
    asked = question_model(result.question, state)
    if result.question.kind == ATTENTION:
        dist = attention_row(result.question, asked)  # (t+1,)
        guessed = [position_guess(text, asked.position) for text, _ in result.guesses]
        label = lambda p: asked.labels[p]  # noqa: E731 - "3:But": the position is in it
        top_p, who = None, "head"
    else:
        dist = next_token_probs(asked)  # (V,)
        guessed = [ti.first_token(asked.tokenizer, text) for text, _ in result.guesses]
        label = lambda t: token_label(asked.tokenizer, t)  # noqa: E731
        top_p, who = float(result.question.details.get("top_p", lc.DEFAULT_TOP_P)), "model"
    counted = [(g, n) for g, (_, n) in zip(guessed, result.guesses, strict=True)
               if g is not None]
    report = ti.guess_report(dist, [g for g, _ in counted], [n for _, n in counted],
                             1.0 if top_p is None else top_p)
    st.text(question_line(result.number, result.question, asked))
    if mine == "":
        st.text("You sent no guess in this round (or it was sent from another tab).")
    elif mine is not None:
        own = (position_guess(mine, asked.position) if top_p is None
               else ti.first_token(asked.tokenizer, mine))
        st.text(your_guess_line(own, report, label, who))
    draw_metrics(report, label, who, top_p)
    draw_bars(result.number, report, dist, label, who, top_p, key=key)


def your_guess_line(own: int | None, report: ti.GuessReport, label, who: str) -> str:
    """A student's own guess against the class's favourite(s) and the model's (head's) choice."""
    if own is None:
        return "Your guess did not count (it was not one of the positions)."
    favourites = [int(t) for t in report.class_favourites]
    if own in favourites:
        side = ("the class's favourite" if len(favourites) == 1
                else f"tied for the class's favourite with {len(favourites) - 1} other"
                     + ("s" if len(favourites) > 2 else ""))
    else:
        side = "not the class's favourite"
    model = (f"and the {who}'s choice too" if own == report.model_favourite
             else f"and not the {who}'s choice ({label(report.model_favourite)})")
    return f"Your guess {label(own)}: {side}, {model}."


def favourite_value(report: ti.GuessReport, label) -> tuple[str, str]:
    """The class's favourite and its count, or a tie said as a tie."""
    count = f"{int(report.counts[0])} of {report.answers}"
    if len(report.class_favourites) == 1:
        return label(report.class_favourite), count
    names = ", ".join(label(int(t)) for t in report.class_favourites[:3])
    more = " …" if len(report.class_favourites) > 3 else ""
    return f"A tie: {names}{more}", f"{int(report.counts[0])} each of {report.answers}"


def draw_metrics(report: ti.GuessReport, label, who: str, top_p: float | None) -> None:
    """Answers, the class's favourite, the model's (or head's); top-p's share if it applies."""
    cols = st.columns(3 if top_p is None else 4)
    cols[0].metric("Answers", f"{report.answers}")
    if report.class_favourite is not None:
        value, count = favourite_value(report, label)
        cols[1].metric("The class's favourite", value, count, delta_color="off",
                       delta_arrow="off")
    value = (f"p = {report.model_favourite_prob:.1%}" if top_p is not None
             else f"weight {report.model_favourite_prob:.2f}")
    cols[2].metric(f"The {who}'s favourite", label(report.model_favourite), value,
                   delta_color="off", delta_arrow="off")
    if top_p is not None:
        cols[3].metric(f"Kept by top-p {top_p:g}", f"{report.share_kept:.0%}",
                       help="The share of the class whose guess sampling with this top-p "
                            "could still pick.")


def draw_bars(number: int, report: ti.GuessReport, dist, label, who: str,
              top_p: float | None, *, key: str) -> None:
    """The guessed tokens (and the model's favourites) as bars, and the same as a table."""
    shown = list(report.token_ids[:MAX_BARS - MODEL_EXTRA])
    shown += [int(t) for t in ti.sorted_distribution(dist).order[:MODEL_EXTRA]
              if int(t) not in shown]
    shares = dict(zip(report.token_ids.tolist(), report.shares.tolist(), strict=True))
    value = "model probability" if top_p is not None else "attention weight"
    share = [shares.get(int(t), 0.0) for t in shown]
    model = [float(dist[t]) for t in shown]
    fig = charts.guesses_vs_model([label(t) for t in shown], share, model,
                                  f"Round {number}: the class and the {who}",
                                  model_name=f"the {who}")
    token = "token" if top_p is not None else "position: token"
    columns = {token: [label(t) for t in report.token_ids],
               "guessed by": report.counts, value: report.probs, "rank": report.ranks}
    if top_p is not None:
        columns[f"kept by top-p {top_p:g}"] = report.kept
    table = pd.DataFrame(columns)
    show_chart(fig, f"class_round_{number}", table, key=f"{key}.chart",
               alt=alt_text.two_runs([label(t) for t in shown], share, model, ("class", who),
                                     f"Round {number}, share of guesses and {value}"))
    # a line between the CSV button and the table: the table's toolbar floats over whatever
    # is right above it, and it covered the button on a phone
    st.caption("The guesses as a table (the CSV above has the full column names):")
    # short headers and fixed widths: 5 columns fit a phone's 320 px (90 + 4 x 56 = 314)
    narrow = st.column_config
    config = {token: narrow.TextColumn(token.split(": ")[-1], width=90),
              "guessed by": narrow.NumberColumn("count", width=56, help="guessed by"),
              value: narrow.NumberColumn("p" if top_p is not None else "weight",
                                         format="%.3f", width=56, help=value),
              "rank": narrow.NumberColumn("rank", width=56, help=f"rank in the {who}'s order")}
    if top_p is not None:
        kept = f"kept by top-p {top_p:g}"
        config[kept] = narrow.CheckboxColumn("top-p", width=56, help=kept)
    st.dataframe(table, hide_index=True, width="stretch", column_config=config)


def fetch_result(number: int) -> cr.RoundResult | None:
    """A revealed round's guesses (fetched once per session: a revealed round never changes)."""
    results = lc.RESULTS.get()
    if number not in results:
        room = lc.open_classroom()
        try:
            if lc.role() == "teacher":
                result = room.round_result(lc.code(), number, secret=lc.SECRET.get())
            else:
                result = room.round_result(lc.code(), number, student_id=lc.STUDENT.get())
        except cr.ClassError as err:
            st.warning(plain(err))
            return None
        results = lc.RESULTS.set({**results, number: result})
    return results[number]


# ----------------------------------------------------------------------------- the teacher


def ask(state: s.AppState, kind: str = NEXT_TOKEN) -> None:
    """Open a round on the teacher's current prompt and position: "what comes next?", or
    (kind=ATTENTION) "which token does this head attend to?" for the Attention page's head."""
    if kind == ATTENTION:
        details = {name: int(s.control_value(name, 0)) for name in ("layer", "head")}
    else:
        details = {"top_p": float(s.control_value("top_p", lc.DEFAULT_TOP_P))}
    if not is_session_model(state.model_id):
        details["model"] = state.model_id
    try:
        lc.open_classroom().open_round(lc.code(), lc.SECRET.get(),
                                       kind=kind, prompt=state.prompt,
                                       position=state.position, details=details)
    except cr.ClassError as err:
        lc.NOTICE.set(str(err))


def reveal(number: int) -> None:
    try:
        lc.open_classroom().reveal(lc.code(), lc.SECRET.get(), number)
    except cr.ClassError as err:
        lc.NOTICE.set(str(err))


def teacher_bar(state: s.AppState | None) -> None:
    """The teacher's class controls on every page: ask, reveal, and the latest result."""
    view: cr.TeacherView | None = lc.TEACHER_VIEW.get()
    latest = view.rounds[-1] if view and view.rounds else None
    left, right = st.columns(2)
    if state is not None and state.ready:
        left.button("Ask the class: what comes next?", key="class.ask", on_click=ask,
                    args=(state,), icon=":material/help:",
                    help="Every student guesses the token after the inspected position.")
        if lc.current_page() == "Attention":
            left.button("Ask the class: which token does this head attend to?",
                        key="class.ask_attention", on_click=ask, args=(state, ATTENTION),
                        icon=":material/visibility:",
                        help="Every student picks the earlier token that the chosen layer and "
                             "head weigh most from the inspected position.")
    if latest and not latest.revealed:
        right.button(f"Reveal round {latest.number}", key="class.reveal", on_click=reveal,
                     args=(latest.number,), type="primary", icon=":material/visibility:")
        if state is not None:  # the room reads the open question on the projector too
            st.text(question_line(latest.number, latest.question,
                                  question_model(latest.question, state)))
    on_class_page = lc.current_page() == "Class"  # the Class page draws the rounds itself
    if latest and latest.revealed and state is not None and not on_class_page:
        result = fetch_result(latest.number)
        if result:
            with st.expander(f"Round {latest.number}: the class and the model", expanded=True):
                draw_result(result, state, key="class.teacher")


# ----------------------------------------------------------------------------- a student


def student_bar(state: s.AppState | None) -> None:
    """A student's class bar: following or not, and the current round (guess, wait, result)."""
    following = bool(lc.FOLLOWING.get())
    view: cr.StudentView | None = lc.VIEW.get()
    left, right = st.columns([3, 2], vertical_alignment="center")
    left.text(f"Class {lc.code()} · " + ("following the teacher" if following
                                         else "exploring on your own"))
    if locked():
        right.caption(LOCKED_NOTE)
    else:
        right.button("Explore on my own" if following else "Follow again", key="class.follow",
                     on_click=lc.set_following, args=(not following,))
    if view and view.round and state is not None:
        round_part(state)


@st.fragment
def round_part(state: s.AppState) -> None:
    """The current round: the guess form, "your guess is in", or the result. A fragment: sending
    a guess reruns this part only, not the page (a class of 60 sends theirs at once)."""
    if lc.NOTICE.is_set():  # a guess that was refused (too late, empty): why
        st.warning(plain(lc.NOTICE.pop()))
    view: cr.StudentView = lc.VIEW.get()
    latest = view.round
    if latest.revealed:
        result = fetch_result(latest.number)
        if result:
            with st.expander(f"Round {latest.number}: the class and the model", expanded=True):
                draw_result(result, state, key="class.student",
                            mine=MINE.get().get(latest.number, ""))
    elif view.answered:
        st.success(f"Your guess for round {latest.number} is in. Wait for the reveal.")
    else:
        guess_form(latest, state)


def send_guess(number: int, tokenizer) -> None:
    typed = widget_value(W_TYPED, "")
    picked = widget_value(W_PICK)
    if typed:
        guess = guess_token(tokenizer, typed, bool(widget_value(W_NEW_WORD)))
    elif picked is not None:
        guess = tokenizer.decode([int(picked)])
    else:
        lc.NOTICE.set("Type a guess or pick a token first.")
        return
    try:
        lc.open_classroom().submit_guess(lc.code(), lc.STUDENT.get(), number,
                                         guess)
    except cr.ClassError as err:
        lc.NOTICE.set(str(err))  # shown by round_part
        return
    remember_guess(number, guess)
    lc.mark_answered()


def send_position(number: int) -> None:
    position = widget_value(W_POSITION)
    if position is None:
        lc.NOTICE.set("Pick a token first.")
        return
    try:
        lc.open_classroom().submit_guess(lc.code(), lc.STUDENT.get(), number,
                                         str(int(position)))
    except cr.ClassError as err:
        lc.NOTICE.set(str(err))
        return
    remember_guess(number, str(int(position)))
    lc.mark_answered()


def remember_guess(number: int, guess: str) -> None:
    """Keep this student's guess to show beside the reveal (the store keeps none per student)."""
    mine = {**MINE.get(), number: guess}
    for old in sorted(mine)[:-10]:  # the last ten rounds are plenty
        del mine[old]
    MINE.set(mine)


def position_form(latest: cr.RoundInfo, asked: s.AppState) -> None:
    """One guess for an attention round: one of the tokens the head can see (0..t)."""
    with st.form("class.guess_position", border=True):
        st.text(question_line(latest.number, latest.question, asked))
        st.selectbox("The token it looks at most", range(asked.position + 1), index=None,
                     key=W_POSITION, format_func=lambda p: asked.labels[p],
                     placeholder="Pick a position")
        st.form_submit_button("Send my guess", type="primary", on_click=send_position,
                              args=(latest.number,))


def true_next(asked: s.AppState, question: cr.Question | None = None) -> int | None:
    """The prompt's own next token after the asked position; at its last token, a lesson
    step's true next token (its `true_next`), else None."""
    following = asked.position + 1
    if following < len(asked.ids):
        return int(asked.ids[following])
    given = question.details.get("true_next") if question is not None else None
    return ti.first_token(asked.tokenizer, given) if isinstance(given, str) else None


def guess_form(latest: cr.RoundInfo, state: s.AppState) -> None:
    """One guess: a chip of a plausible token, or typed text (its first token counts). The chips
    mix the model's likely tokens with others, in alphabetical order: no hint of the answer."""
    asked = question_model(latest.question, state)
    if latest.question.kind == ATTENTION:
        position_form(latest, asked)
        return
    offered = choices_of(latest.question.details)  # a lesson's choices, if any
    if offered:  # in the lesson's order
        chips = [t for c in offered if (t := ti.first_token(asked.tokenizer, c)) is not None]
    else:
        options = ti.guess_options(next_token_probs(asked), CHIPS, seed=latest.number,
                                   include=true_next(asked, latest.question))
        chips = sorted((int(t) for t in options), key=lambda t: token_label(asked.tokenizer, t))
    CHIPS_SHOWN.set(chips)
    with st.form("class.guess", border=True):
        st.text(question_line(latest.number, latest.question, asked))
        st.pills("Pick a token", chips, key=W_PICK,
                 format_func=lambda t: token_label(asked.tokenizer, t))
        if not offered:  # a choice question takes one of its choices only
            st.text_input("… or type your guess", key=W_TYPED, max_chars=32)
            st.checkbox("It starts a new word (put a space before it)", key=W_NEW_WORD,
                        value=True, help="“ the” and “the” are different tokens.")
        st.form_submit_button("Send my guess", type="primary", on_click=send_guess,
                              args=(latest.number, asked.tokenizer))


# ----------------------------------------------------------------------------- alone
