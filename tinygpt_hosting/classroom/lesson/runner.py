"""Running a lesson file in a live class: the teacher opens one, Next and Back move the whole
class, a step's question becomes a round, and the teacher can lock the students' prompt and
model while the lesson runs.

A step is applied to the teacher's own session (page, prompt, model, position, controls), and
reaches the students through the class's usual way: the teacher's view is published
(classroom.session.view_state) and followers take it. The lock travels the same way, as the
view's control `lesson_lock`: a locked student follows, and is put back on the teacher's prompt
and model if they change theirs. Facilitator notes are drawn on the teacher's screen only, and
not at all in projector mode.

This session keeps (kit.slots):

    class.lesson         (file name, Lesson) being run
    class.lesson_step    the index of the step shown (0 = the first)
    class.lesson_rounds  {step number: round number} of the steps whose question was asked
    class.lesson_models  {step number: model id} the step ran on (its round's model)
    class.lesson_goto    the page to open at the top of the next run
"""

from __future__ import annotations

import streamlit as st
from streamlit.errors import StreamlitAPIException

from tinygpt_app.compute.models import available_models
from tinygpt_app.kit import navigation, projector
from tinygpt_app.kit import state as s
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot, set_widget, widget_value
from tinygpt_hosting.classroom import rounds
from tinygpt_hosting.classroom import rules as cr
from tinygpt_hosting.classroom import session as lc
from tinygpt_hosting.classroom.lesson import loader as lf

# a lesson file is at most MAX_LESSON_BYTES; read, it weighs a few times that
LESSON: Slot[tuple[str, lf.Lesson] | None] = Slot("class.lesson", None,
                                                   max_bytes=16 * lf.MAX_LESSON_BYTES)
STEP: Slot[int] = Slot("class.lesson_step", 0)
ROUNDS: Slot[dict] = Slot("class.lesson_rounds", {})  # {step number: round number}
MODELS: Slot[dict] = Slot("class.lesson_models", {})  # {step number: model id}
GOTO: Slot[str | None] = Slot("class.lesson_goto", None)
MODEL_NOTE: Slot[str | None] = Slot("class.lesson_model_note", None)
ERROR: Slot[str | None] = Slot("class.lesson_error", None)  # why a lesson could not be opened
W_LOCK, W_CHOSEN, W_UPLOAD = "class.lesson_lock_toggle", "class.lesson_file", "class.upload"


# ----------------------------------------------------------------------------- pure parts


def choose_model(wanted: tuple[str, ...], available: list[str],
                 current: str | None) -> tuple[str | None, str | None]:
    """(the model a step runs on, a note when it is not the step's first choice): the first
    of `wanted` on this server, else the class's current model."""
    if not wanted:
        return current, None
    for model_id in wanted:
        if model_id in available:
            if model_id == wanted[0]:
                return model_id, None
            return model_id, (f"This step asks for {wanted[0]}, which is not installed on this "
                              f"server (python -m tinygpt.models get smollm2 installs the real "
                              f"model): it runs on {model_id} instead.")
    return current, (f"None of this step's models ({', '.join(wanted)}) is on this server: it "
                     f"runs on {current}.")


def round_details(step: lf.Step, model_id: str | None, top_p: float) -> dict[str, object]:
    """What a step's round carries beside its prompt (rules: scalars, text of ≤ 200 chars)."""
    details: dict[str, object] = {"top_p": float(top_p), "lesson_step": step.number,
                                  "question": step.question}
    if model_id:
        details["model"] = model_id
    if step.true_next is not None:
        details["true_next"] = step.true_next
    details.update(zip(rounds.CHOICE_KEYS, step.choices, strict=False))
    return details


# ----------------------------------------------------------------------------- the teacher


def running() -> tuple[str, lf.Lesson] | None:
    return LESSON.get() if lc.role() == "teacher" else None


def report_title() -> str:
    """The class report's title: the lesson's, else the class's."""
    current = running()
    lesson = f": {current[1].title or current[0]}" if current else ""
    return f"Class {lc.code()}{lesson}"


def open_lesson(name: str, lesson: lf.Lesson) -> None:
    """Start `lesson` at its first step (a button callback)."""
    LESSON.set((name, lesson))
    ROUNDS.set({})
    MODELS.set({})
    go_to(0)


def close_lesson() -> None:
    for slot in (LESSON, STEP, GOTO, MODEL_NOTE):
        slot.pop()
    set_lock(False)


def go_to(index: int) -> None:
    """Show step `index` to the class: apply it here (the class follows), ask its question."""
    _, lesson = LESSON.get()
    index = min(max(index, 0), len(lesson.steps) - 1)
    STEP.set(index)
    step = lesson.steps[index]
    model_id = apply_step(step)
    if step.question is not None and step.number not in ROUNDS.get():
        ask_step(step, model_id)
    GOTO.set(step.page)


def apply_step(step: lf.Step) -> str | None:
    """Page, prompt, model, position and controls of `step` in this session; its model."""
    models = available_models()
    model_id, note = choose_model(step.models, models, s.current_view().model_id)
    MODEL_NOTE.set(note)
    s.take_view(s.View(model_id, step.prompt, -1 if step.position is None else step.position,
                       dict(step.controls)), models=models)
    MODELS.set({**MODELS.get(), step.number: model_id})
    return model_id


def ask_step(step: lf.Step, model_id: str | None) -> None:
    """Open the step's question as a round of the class."""
    top_p = step.controls.get("top_p", s.control_value("top_p", lc.DEFAULT_TOP_P))
    try:
        number = lc.open_classroom().open_round(
            lc.code(), lc.SECRET.get(), kind=cr.KINDS[0], prompt=step.prompt,
            position=step.position, details=round_details(step, model_id, float(top_p)))
    except cr.ClassError as err:
        lc.NOTICE.set(str(err))
        return
    ROUNDS.set({**ROUNDS.get(), step.number: number})


def set_lock(locked: bool) -> None:
    s.take_control(rounds.LOCK_NAME, bool(locked))


def _on_lock_toggle() -> None:
    set_lock(bool(widget_value(W_LOCK)))


def before_page() -> None:
    """At the top of a run: the teacher opens the step's page; a locked student is put back on
    the teacher's view."""
    if lc.role() == "teacher":
        page = GOTO.pop()
        if page is not None and page != lc.current_page():
            _switch(page)
    elif lc.role() == "student":
        enforce_lock()


def _switch(page: str) -> None:
    try:
        st.switch_page(navigation.page(navigation.page_file(page)),
                       query_params={lc.URL_CLASS: lc.code()})
    except StreamlitAPIException:  # a page run on its own (tests) knows no other page
        lc.ELSEWHERE.set(f"This step is on the page {page!r}.")


def enforce_lock() -> None:
    """A locked student follows, on the teacher's prompt and model."""
    if not rounds.locked():
        return
    teacher = lc.VIEW.get().state
    if not lc.FOLLOWING.get():
        lc.FOLLOWING.set(True)
    model = teacher.controls.get("model")
    mine = s.current_view()
    if mine.prompt != teacher.prompt or (model and mine.model_id != model):
        lc.follow(teacher)


def teacher_bar() -> None:
    """The lesson's controls on every page of the teacher: where we are, Back and Next, the
    lock, and the facilitator notes (never in projector mode)."""
    current = running()
    if current is None:
        return
    name, lesson = current
    index = STEP.get()
    step = lesson.steps[index]
    with st.container(border=True, key="class_lesson_bar"):
        st.text(f"Lesson: {lesson.title or name} · step {index + 1} of {len(lesson.steps)} "
                f"· {step.page.replace('_', ' ')}")
        back, forward, lock = st.columns([1, 1, 2], vertical_alignment="center")
        back.button("Back", key="class.lesson_back", icon=":material/arrow_back:",
                    on_click=go_to, args=(index - 1,), disabled=index == 0)
        forward.button("Next", key="class.lesson_next", icon=":material/arrow_forward:",
                       on_click=go_to, args=(index + 1,), type="primary",
                       disabled=index == len(lesson.steps) - 1)
        set_widget(W_LOCK, bool(s.control_value(rounds.LOCK_NAME)))
        lock.toggle("Lock students' prompt and model", key=W_LOCK, on_change=_on_lock_toggle,
                    help="While on, students follow you and cannot change the prompt or the "
                         "model; off, they may explore on their own.")
        note = MODEL_NOTE.get()
        if note:
            st.info(plain(note))
        if step.notes and not projector.is_on():
            with st.expander("Notes for you (never projected)", expanded=True):
                st.text(step.notes)


# ----------------------------------------------------------------------------- choosing a lesson


def lesson_picker() -> None:
    """On the Class page: open a shipped lesson, or upload one (capped), and end it."""
    st.header("Lesson")
    current = running()
    if current is not None:
        st.text(f"Running: {current[1].title or current[0]} ({len(current[1].steps)} steps).")
        st.button("End the lesson", key="class.lesson_close", on_click=close_lesson)
        return
    if ERROR.is_set():
        st.error(plain(ERROR.pop()))
    shipped = lf.shipped_lessons()
    left, right = st.columns(2, gap="large")
    if shipped:
        left.selectbox("A lesson from the lessons folder", list(shipped), key=W_CHOSEN)
        left.button("Open this lesson", key="class.lesson_open", type="primary",
                    on_click=_open_shipped)
    upload = right.file_uploader(f"… or upload a lesson file (TOML, at most "
                                 f"{lf.MAX_LESSON_BYTES // 1024} kB)", type=["toml"],
                                 key=W_UPLOAD)
    if upload is not None:
        right.button("Open the uploaded lesson", key="class.lesson_up", on_click=_open_upload)


def _open_shipped() -> None:
    name = widget_value(W_CHOSEN)
    path = lf.shipped_lessons().get(name)
    if path is not None:
        _open_checked(name, lambda: lf.load_lesson(path))


def _open_upload() -> None:
    upload = widget_value(W_UPLOAD)
    if upload is None:
        return
    if upload.size > lf.MAX_LESSON_BYTES:  # said before its bytes are read
        ERROR.set(f"That file has {upload.size:,} bytes; a lesson is at "
                  f"most {lf.MAX_LESSON_BYTES:,}.")
        return
    _open_checked(upload.name, lambda: lf.read_lesson(upload.getvalue()))


def _open_checked(name: str, read) -> None:
    """Open a lesson from a button's callback (before any widget is drawn), or say why not."""
    try:
        lesson = read()
    except lf.LessonError as err:
        ERROR.set(f"This lesson cannot be opened. {err}")
        return
    except OSError:  # the error would name a server path: not shown
        ERROR.set("This lesson file could not be read.")
        return
    open_lesson(str(name)[:80], lesson)
