"""The Class page: the teacher starts a live class and projects its code; students join and
follow, guess what comes next, and see the class's guesses beside the model's probabilities.

pages/16_Class.py draws it through tinygpt_app.host (Host.class_page) when the hosting wing is
installed; the page itself imports nothing of the wing."""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit import projector
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.sections import class_moderation
from tinygpt_hosting.classroom import hooks as class_hooks
from tinygpt_hosting.classroom import links as class_links
from tinygpt_hosting.classroom import moderation
from tinygpt_hosting.classroom import rounds as class_rounds
from tinygpt_hosting.classroom import rules as cr
from tinygpt_hosting.classroom import session as live_class
from tinygpt_hosting.classroom.lesson import reveal as lesson_reveal
from tinygpt_hosting.classroom.lesson import runner as lesson_run

KEY_NAMES = "class.show_names"
INTRO = ("Teach with the app: start a class and project its code; students join on their "
         "phones or laptops, follow what you show, guess the next token, and compare their "
         "guesses with the model's.")


def start_or_join() -> None:
    teach, learn = st.columns(2, gap="large")
    with teach.container(border=True):
        st.header("Teach")
        st.caption("You get a class code and a QR code to project.")
        key = class_moderation.teacher_key_input(live_class.open_classroom().needs_teacher_key)
        if st.button("Start a class", key="class.start", type="primary"):
            try:
                live_class.start_class(key)
            except cr.ClassError as err:
                st.error(plain(err))
            else:
                st.rerun()
    with learn.container(border=True):
        st.header("Join")
        with st.form("class.join_form", border=False):
            code = st.text_input("Class code", value=st.query_params.get("class", ""),
                                 max_chars=12, placeholder="6 letters or digits",
                                 key="class.join_code")
            nickname = st.text_input("Nickname (optional)", max_chars=24,
                                     key="class.join_nickname",
                                     help="No account and no name needed.")
            joined = st.form_submit_button("Join the class", type="primary")
        if joined:
            try:
                live_class.join(code, nickname)
            except cr.ClassError as err:
                st.error(plain(err))
            else:
                st.rerun()


def teacher_panel(state) -> None:
    code = live_class.code()
    address = live_class.class_address()
    join_link = class_links.join_link(address, code)
    qr, details = st.columns([1, 2], gap="large")
    with qr:  # a caption line above keeps the image's fullscreen button off the controls
        st.caption("Scan to join")
        st.image(live_class.qr_png(join_link), width=320)
    with details:
        st.markdown("Class code")
        st.code(code, language=None)
        roll_call()
        st.markdown("Join link")
        st.code(join_link, language=None)
        if address.warning:
            st.warning(plain(address.note))
        elif address.note:
            st.info(plain(address.note))
        teacher_link(code, address)
    view = live_class.TEACHER_VIEW.get()
    if view and view.rounds:
        st.header("Rounds")
        numbers = [r.number for r in view.rounds]
        number = st.selectbox("Look back at a round", numbers, index=len(numbers) - 1,
                              key="class.round_choice")
        chosen = view.rounds[numbers.index(number)]
        if chosen.revealed:
            result = class_rounds.fetch_result(number)
            if result:
                class_rounds.draw_result(result, state, key="class.history")
                lesson_reveal.draw_score(result, state)
        else:
            st.text(f"Round {number}: {chosen.answers} answered, not revealed yet.")
    lesson_run.lesson_picker()
    if state is not None:
        lesson_reveal.report_downloads(state, lesson_run.report_title())
    class_moderation.panel(moderation.for_this_session())
    st.button("End the class", key="class.end", on_click=end_class,
              help="Deletes the class and everything in it.")


@st.fragment(run_every=live_class.TEACHER_SECONDS)
def roll_call() -> None:
    """Who is here, beside the code (never above the QR code, however many): hidden on a
    projected screen until the teacher shows them, with the one toggle for it."""
    view = live_class.TEACHER_VIEW.get()  # the class bar refreshes it
    if view is None or not view.nicknames:
        return
    if not st.toggle("Show the names", key=KEY_NAMES, value=not projector.is_on(),
                     help="The nicknames of the students here, on this screen."):
        return
    shown = ", ".join(view.nicknames[:60]) + (" …" if len(view.nicknames) > 60 else "")
    with st.container(height=110, border=False):  # however long the roll call, it stays here
        st.text(f"Here: {shown}")


def teacher_link(code: str, address: class_links.ClassAddress) -> None:
    """The private teacher link, only when asked for and never in projector mode: whoever
    holds it controls the class, and a projected screen is read by the whole room."""
    if projector.is_on():
        st.caption("Your private teacher link is not shown in projector mode.")
        return
    if not live_class.SHOW_LINK.get():
        st.button("Show my teacher link", key="class.show_link",
                  help="A link that makes another device of yours the teacher of this class.",
                  on_click=live_class.SHOW_LINK.set, args=(True,))
        return
    st.warning("Your private teacher link: whoever holds it controls this class. Copy it "
               "(the button at its right) for another device of yours; do not project it.")
    st.code(class_links.teacher_link(address, code, live_class.SECRET.get()),
            language=None)
    st.button("Hide my teacher link", key="class.hide_link",
              on_click=live_class.SHOW_LINK.pop)


def end_class() -> None:
    try:
        live_class.open_classroom().close_class(live_class.code(),
                                                live_class.SECRET.get())
    except cr.ClassError:
        pass  # already ended: forget it all the same
    live_class.leave()


def draw() -> None:
    """The Class page (pages/16_Class.py runs it through tinygpt_app.host: Host.class_page)."""
    class_hooks.register()  # the class bar on every page (the wing's plug does it too)
    # the teacher knows the page: the intro goes, the QR code comes up into the first screen
    with page("Live class", intro=None if live_class.role() == "teacher" else INTRO,
              needs_prompt=False) as state:
        role = live_class.role()
        if role is None:
            start_or_join()
        elif role == "teacher":
            teacher_panel(state)
        else:
            st.button("Leave the class", key="class.leave", on_click=live_class.leave_class)
