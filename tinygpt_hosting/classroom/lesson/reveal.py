"""The room against the model, on real text: what a revealed round of a lesson adds when its
step carries the true next token, and the class report.

Shown under the round's result: the true token; the room's probability for it (its share of
the guesses, smoothed: tinygpt.readouts.room_score) beside the model's; for the teacher (so on
the projector) the running score over the lesson; for each student, on their own screen only,
how many true tokens they guessed. The numbers come from the model's own forward (cached) and
the store's counts of guesses.
"""

from __future__ import annotations

import streamlit as st

from tinygpt import readouts as ti
from tinygpt.readouts import room_score
from tinygpt_app.kit import state as s
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot
from tinygpt_hosting.classroom import rounds
from tinygpt_hosting.classroom import rules as cr
from tinygpt_hosting.classroom import session as lc
from tinygpt_hosting.classroom.lesson import report

# a student's {round: (their token or None, the true token)}, of at most max_rounds rounds
TALLY: Slot[dict] = Slot("class.tally", {})
W_NAMES = "class.report_names"


def is_scored(result: cr.RoundResult) -> bool:
    """Does this round carry the text's true next token?"""
    return isinstance(result.question.details.get("true_next"), str)


def scored(result: cr.RoundResult, state: s.AppState):
    """(asked state, model probs (V,), true token, RoundScore) of a round with a true token."""
    asked = rounds.question_model(result.question, state)
    probs = rounds.next_token_probs(asked)  # (V,)
    tokenizer = asked.tokenizer
    true_token = ti.first_token(tokenizer, result.question.details["true_next"])
    counts: dict[int, int] = {}
    for text, n in result.guesses:
        token = ti.first_token(tokenizer, text)
        if token is not None:
            counts[token] = counts.get(token, 0) + n
    offered = [t for c in rounds.choices_of(result.question.details)
               if (t := ti.first_token(tokenizer, c)) is not None]
    return asked, probs, true_token, room_score.score_round(counts, true_token, probs, offered)


def revealed_results() -> list[cr.RoundResult]:
    """The teacher's revealed rounds, first first (each fetched once per session)."""
    view = lc.TEACHER_VIEW.get()
    if view is None:
        return []
    return [r for info in view.rounds if info.revealed
            and (r := rounds.fetch_result(info.number)) is not None]


def running(state: s.AppState) -> room_score.RunningScore:
    return room_score.running_score(scored(r, state)[3] for r in revealed_results()
                                    if is_scored(r))


# ----------------------------------------------------------------------------- drawing


def draw_score(result: cr.RoundResult, state: s.AppState) -> None:
    """The true token and who gave it more probability, under a revealed round's result."""
    if not is_scored(result):
        return
    asked, _, true_token, score = scored(result, state)
    label = token_label(asked.tokenizer, true_token)
    st.text(f"The text's true next token: {label}")
    cols = st.columns(2)
    cols[0].metric("The room's probability for it", f"{score.room_prob:.1%}",
                   help="(its guesses + ½) / (all guesses + ½ × the number of choices): the "
                        "class's share, smoothed so that no one is infinitely wrong.")
    cols[1].metric("The model's probability for it", f"{score.model_prob:.1%}")
    if lc.role() == "teacher":
        draw_running(state)
    elif lc.role() == "student":
        draw_tally(result.number, asked, true_token)


def draw_running(state: s.AppState) -> None:
    total = running(state)
    if total.rounds:
        st.text("Who predicts Shakespeare better: this class or the model? "
                + report.verdict(total))


def draw_tally(number: int, asked: s.AppState, true_token: int) -> None:
    """This student's own count of true tokens guessed (kept in their session only)."""
    own = rounds.MINE.get().get(number)
    tally = TALLY.set({**TALLY.get(), number: (ti.first_token(asked.tokenizer, own) if own
                                                else None, true_token)})
    hits = room_score.true_guesses({n: mine for n, (mine, _) in tally.items()},
                                   {n: true for n, (_, true) in tally.items()})
    st.success(f"You guessed {hits} of {len(tally)} true tokens so far.")


def latest_revealed() -> cr.RoundResult | None:
    """The latest round if it is revealed (the teacher's or this student's view)."""
    if lc.role() == "teacher":
        view = lc.TEACHER_VIEW.get()
        latest = view.rounds[-1] if view and view.rounds else None
    else:
        view = lc.VIEW.get()
        latest = view.round if view else None
    return rounds.fetch_result(latest.number) if latest and latest.revealed else None


def score_bar(state: s.AppState | None) -> None:
    """Under the class bar of every page (not the teacher's Class page: it draws its own)."""
    if state is None or (lc.role() == "teacher" and lc.current_page() == "Class"):
        return
    result = latest_revealed()
    if result is not None and is_scored(result):
        with st.container(border=True, key="class_score"):
            draw_score(result, state)


# ----------------------------------------------------------------------------- the report


def report_row(result: cr.RoundResult, state: s.AppState) -> report.ReportRow:
    asked = rounds.question_model(result.question, state)
    probs = rounds.next_token_probs(asked)  # (V,)
    top = [int(t) for t in ti.sorted_distribution(probs).order[:report.TOP]]
    model_top = tuple((asked.tokenizer.decode([t]), float(probs[t])) for t in top)
    true_label, score = None, None
    if is_scored(result):
        _, _, true_token, score = scored(result, state)
        true_label = asked.tokenizer.decode([true_token])
    question = result.question.details.get("question")
    return report.ReportRow(result.number, question if isinstance(question, str) else
                            "What comes next?", rounds.question_text(asked), true_label,
                            model_top, tuple(result.guesses), result.answers, score)


def report_downloads(state: s.AppState, title: str) -> None:
    """The teacher's download of the class report (made now, kept nowhere)."""
    results = revealed_results()
    if not results:
        return
    st.header("Class report")
    names = st.checkbox("Include the nicknames of those present", key=W_NAMES, value=False)
    rows = [report_row(r, state) for r in results]
    view = lc.TEACHER_VIEW.get()
    nicknames = view.nicknames if names and view else ()
    summary = report.to_html(title, rows, running(state), nicknames)
    left, right = st.columns(2)
    left.download_button("Download the report (CSV)", report.to_csv(rows).encode("utf-8"),
                         file_name="class_report.csv", mime="text/csv",
                         key="class.report_csv")
    right.download_button("Download the summary (HTML)", summary.encode("utf-8"),
                          file_name="class_report.html", mime="text/html",
                          key="class.report_html")
    st.caption(plain(f"{len(rows)} revealed rounds. Nothing is kept after the class ends: "
                     "download the report before you end it."))
