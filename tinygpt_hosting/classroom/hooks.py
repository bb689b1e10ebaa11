"""The live class's part of every page, plugged into the page frame (kit.hooks).

The classroom is optional: the frame knows nothing of it. app.py and the Class page call
`register()` (once per process is enough; again does no harm), and from then on every page run
catches up with the teacher, draws the class bar and publishes the teacher's view.
"""

from __future__ import annotations

from tinygpt_app.kit import hooks
from tinygpt_app.kit.state import AppState
from tinygpt_hosting.classroom import rounds
from tinygpt_hosting.classroom import session as live_class
from tinygpt_hosting.classroom.lesson import reveal as lesson_reveal
from tinygpt_hosting.classroom.lesson import runner as lesson_run

NAME = "classroom"
FOLLOWING_NOTE = ("You follow the teacher, who picks the page. The page menu comes back when "
                  "you explore on your own.")


def sidebar_note() -> str | None:
    """A following student's sidebar has no page menu: the teacher picks the page."""
    return FOLLOWING_NOTE if live_class.following() else None


def after_sidebar(state: AppState) -> None:
    """Publish or follow, then the bar of rounds (teacher or student)."""
    live_class.sync()
    role = live_class.role()
    if role == "teacher":
        lesson_run.teacher_bar()
        rounds.teacher_bar(state)
    elif role == "student":
        rounds.student_bar(state)
    if role is not None:
        lesson_reveal.score_bar(state)


def before_page() -> None:
    """A student's news first; then a lesson's step: its page (the teacher), or the lock."""
    live_class.catch_up()
    lesson_run.before_page()


def leads_others() -> bool:
    """A teacher with students following: the extra CPU share (kit.frame) is for a class that
    watches this tab, not for whoever clicked "Start a class"."""
    if live_class.role() != "teacher":
        return False
    view = live_class.TEACHER_VIEW.get()  # refreshed every 2 s
    return view is not None and view.following > 0


def open_question() -> str | None:
    """The kind of the class's latest round while it is open (not revealed yet), as this
    session last heard of it: the pages hold its answer back until the reveal."""
    role = live_class.role()
    if role == "teacher":
        view = live_class.TEACHER_VIEW.get()
        latest = view.rounds[-1] if view and view.rounds else None
    elif role == "student":
        view = live_class.VIEW.get()
        latest = view.round if view else None
    else:
        return None
    return None if latest is None or latest.revealed else latest.question.kind


def register() -> None:
    """Plug the live class into every page of this process."""
    hooks.register(NAME, hooks.PageHooks(before_page=before_page,
                                         sidebar_note=sidebar_note,
                                         after_sidebar=after_sidebar,
                                         after_page=live_class.after_page,
                                         leads_others=leads_others,
                                         open_question=open_question))


def unregister() -> None:
    hooks.unregister(NAME)
