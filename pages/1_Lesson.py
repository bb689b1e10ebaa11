"""A guided lesson: ten steps from the student's own text to the next token, with the model's
real numbers at each step. The step is in the link (?lesson_step=5), so a teacher can hand one
out."""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit import projector
from tinygpt_app.kit.controls import LESSON_STEP
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.state import control, set_control
from tinygpt_app.kit.widgets import page_link
from tinygpt_app.sections import lesson

INTRO = ("Ten steps from your text to the next token. Every number below is what the model "
         "computed for *your* prompt: change it in the sidebar and the lesson follows.")
LAST = len(lesson.STEPS)


def choose_step(config) -> int:
    return control(st.selectbox, "Step", "lesson.lesson_step", LESSON_STEP, hi=LAST,
                   options=range(1, LAST + 1),
                   format_func=lambda number: lesson.step_label(number, config),
                   help="The step is part of the link: copy it to hand out this step.")


def back_and_next(number: int, where: str = "") -> None:
    """Back and Next; `where` names a second pair (their keys must differ)."""
    back, forward = st.columns(2)
    back.button("Back", key=f"lesson.back{where}", icon=":material/arrow_back:",
                on_click=set_control, args=("lesson.lesson_step", max(number - 1, 1)),
                disabled=number == 1)
    forward.button("Next", key=f"lesson.next{where}", icon=":material/arrow_forward:",
                   on_click=set_control, args=("lesson.lesson_step", min(number + 1, LAST)),
                   disabled=number == LAST, type="primary")


# projected, the class hears the intro from the teacher: the step's chart moves up the screen
with page("Lesson", intro=None if projector.requested() else INTRO) as state:
    # the stepper first, within the first screen, drawn whatever the step below does
    pick, buttons = st.columns([3, 2], vertical_alignment="bottom")
    with pick:
        number = choose_step(state.config)
    with buttons:
        back_and_next(number)
    lesson.draw_step(state, number)
    back_and_next(number, ".end")  # and again under the step, where the reading ends
    if number == LAST:  # the tour ends: experiments on the same model come next
        page_link("pages/11_Interventions.py",
                  "Go further: patch, ablate and steer the model "
                  "(Interventions)", {}, icon=":material/science:")
        page_link("pages/16_Class.py",  # the prepared lessons (lessons/, docs/lessons.md)
                  "Teaching a class? Run a prepared lesson: the room against the model "
                  "(Class)", {}, icon=":material/school:")
