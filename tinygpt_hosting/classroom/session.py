"""A live class in a Streamlit session: who this session is in the class, following the teacher,
and the guess-then-reveal rounds, on every page.

The class itself lives in tinygpt_hosting.classroom.rules (shared by every process); this module
keeps this session's part of it in typed slots (kit.slots):

    class.code       the class code (teacher and students)
    class.secret     the teacher secret: only the teacher's session has it
    class.student    this student's random id
    class.following  True while a student follows the teacher
    class.offer      (browser token, role, code): the way back offered after a reload

A reload starts a new session that knows no class: `offer_way_back` finds, through the
browser's token (kit.browser_token) and classroom.resume, the class this browser teaches or
has a seat in, and offers it in one click.

The page frame runs this module through the classroom's page hooks (classroom.hooks): `sync()`
after the sidebar does the per-page work: the teacher's session publishes its view when it
changes (at the top and at the end of each page run); a student's session takes its news in
`catch_up`, before the sidebar, and while following takes the teacher's page, prompt, position
and controls there. News arrives by push (class_push: this
process's watcher reruns the session when its class changes) and, as a safety net, by a slow
heartbeat fragment. Both draw a small class bar at the top of the page (rounds, answers,
results).

Everything people typed (nicknames, guesses, prompts) is drawn with st.text, st.code, dataframes
or escaped Plotly text: never as markdown or HTML.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from urllib.parse import urlencode

import streamlit as st
from streamlit.errors import StreamlitAPIException

from tinygpt_app import settings
from tinygpt_app.compute.models import available_models, is_session_model
from tinygpt_app.kit import browser_token, navigation, projector
from tinygpt_app.kit import state as s
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot, forget_all
from tinygpt_hosting import streamlit_internals
from tinygpt_hosting.classroom import links as class_links
from tinygpt_hosting.classroom import push as class_push
from tinygpt_hosting.classroom import resume
from tinygpt_hosting.classroom import rules as cr
from tinygpt_hosting.classroom.client import who
from tinygpt_hosting.classroom.store import data_dir

# what this session keeps of the class (kit.slots: typed, each bounded in bytes); a view or a
# round holds a prompt of at most Limits.max_prompt_chars and details of max_state_bytes
_VIEW_BYTES = 64 * 2**10
CODE: Slot[str | None] = Slot("class.code", None)
SECRET: Slot[str | None] = Slot("class.secret", None)
STUDENT: Slot[str | None] = Slot("class.student", None)
FOLLOWING: Slot[bool] = Slot("class.following", False)
APPLIED: Slot[int | None] = Slot("class.applied_version", None)  # the teacher's view taken
PUBLISHED: Slot[str | None] = Slot("class.published", None, max_bytes=_VIEW_BYTES)  # last sent
VIEW: Slot[cr.StudentView | None] = Slot("class.last_poll", None, max_bytes=_VIEW_BYTES)
DRAWN: Slot[tuple] = Slot("class.drawn", ())  # what the class bar showed (see _heartbeat)
POLLED: Slot[bool] = Slot("class.polled", False)  # this page run's catch_up asked the store
RUNS: Slot[int] = Slot("class.page_runs", 0)  # full page runs of this tab (catch_up counts)
HEARTBEAT_RUN: Slot[int | None] = Slot("class.heartbeat_run", None)  # the heartbeat's page run
SEEN: Slot[tuple | None] = Slot("class.seen", None)  # (monotonic time, following) last said
# revealed rounds already fetched, {number: RoundResult}: at most max_rounds of them
RESULTS: Slot[dict] = Slot("class.results", {}, max_bytes=2**20)
SHOW_LINK: Slot[bool] = Slot("class.show_teacher_link", False)
# the teacher's last TeacherView: every round's question (max_rounds) and the nicknames
TEACHER_VIEW: Slot[cr.TeacherView | None] = Slot("class.teacher_view", None, max_bytes=2**20)
NOTICE: Slot[str | None] = Slot("class.notice", None)
ELSEWHERE: Slot[str | None] = Slot("class.elsewhere", None)  # the teacher's page, not switched to
OFFER: Slot[tuple | None] = Slot("class.offer", None)  # (browser token, role, code) after a reload
URL_CLASS, URL_TEACHER = class_links.URL_CLASS, class_links.URL_TEACHER
POLL_SECONDS = settings.class_poll_seconds()  # a student's heartbeat (read once, at import)
_WATCHER: class_push.Watcher | None = None  # this process's, made by the first student's run
_WATCHER_LOCK = threading.Lock()
TEACHER_SECONDS = 2.0  # the teacher's counters
DEFAULT_TOP_P = 0.9  # the Sampling page's default top-p, when the teacher has not set one
CLASS_PAGE = "pages/16_Class.py"


_ROOMS: dict[tuple[str, str], cr.Classroom] = {}  # (store address, data directory) -> open
_ROOMS_LOCK = threading.Lock()
MAX_ROOMS = 4


def open_classroom() -> cr.Classroom:
    """The class store of this process: opened once per store address and data directory
    (a connection: a resource of the process, like a model, not a cache). A server has one;
    a test process that moves the data directory keeps its last MAX_ROOMS."""
    place = (settings.class_store_url(), str(data_dir()))
    with _ROOMS_LOCK:
        if place not in _ROOMS:
            if len(_ROOMS) >= MAX_ROOMS:  # a test process: the earlier directories are gone
                _ROOMS.clear()
            _ROOMS[place] = cr.open_classroom(place[0] or None)
        return _ROOMS[place]


# ----------------------------------------------------------------------------- who am I


def role() -> str | None:
    """"teacher", "student", or None when this session is in no class."""
    if SECRET.get():
        return "teacher"
    if STUDENT.get():
        return "student"
    return None


def following() -> bool:
    """Whether this session is a student following the teacher."""
    return role() == "student" and bool(FOLLOWING.get())


def code() -> str | None:
    return CODE.get()


def leave() -> None:
    """Forget the class in this session (the class itself goes on)."""
    if _WATCHER is not None and (session := streamlit_internals.session_id()):
        _WATCHER.forget(session)
    forget_all("class.")


def start_class(teacher_key: str | None = None) -> cr.NewClass:
    """Create a class with this session as its teacher (its browser's earlier class ends,
    and this browser keeps its way back)."""
    new = open_classroom().create_class(teacher_key, **who())
    leave()
    CODE.set(new.code)
    SECRET.set(new.secret)
    _keep_way_back()
    return new


def join(class_code: str, nickname: str = "") -> None:
    """Take a seat in a class as a student, following the teacher. Raises ClassError.
    A browser that reported its token takes its own seat (the same one on every join)."""
    normalized = cr.normalize_code(class_code)
    student = open_classroom().join(normalized, nickname, **who())
    leave()
    CODE.set(normalized)
    STUDENT.set(student)
    FOLLOWING.set(True)
    _keep_way_back()


def leave_class() -> None:
    """A student's "Leave the class": forget it here, and this browser's way back to it."""
    token = browser_token.browser_token()
    if token and role() == "student":
        try:
            resume.forget(open_classroom(), resume.STUDENT, token)
        except cr.ClassError:
            pass  # the store is away: the seat is forgotten when the class ends
    leave()


def _keep_way_back() -> None:
    """Keep this browser's way back into the class it just took (teacher or student), so a
    reload is one click from here; without a browser token there is none."""
    token = browser_token.browser_token()
    if token is None:
        return
    try:
        if role() == "teacher":
            resume.keep_teacher(open_classroom(), code(), SECRET.get(), token)
        elif role() == "student":
            resume.keep_student(open_classroom(), code(), token)
    except cr.ClassError:
        pass  # the class is there all the same; only the reload's one click is lost


def take_teacher_link() -> None:
    """A teacher link (?class=CODE&teacher=SECRET) makes this session the teacher, once the
    secret is checked; the secret then leaves the address bar. A wrong one is refused."""
    secret = st.query_params.get(URL_TEACHER)
    if secret is None:
        return
    del st.query_params[URL_TEACHER]
    given_code = st.query_params.get(URL_CLASS, "")
    try:
        view = open_classroom().teacher_view(given_code, secret)
    except cr.ClassError as err:
        NOTICE.set(str(err))
        return
    leave()
    CODE.set(view.code)
    SECRET.set(secret)
    _keep_way_back()


def class_address() -> class_links.ClassAddress:
    """Where this class's links point: an address students' phones can open (class_links)."""
    return class_links.choose_address(settings.public_url(), st.context.url,
                                      streamlit_internals.network_url())


def links(class_code: str, secret: str | None = None) -> tuple[str, str | None]:
    """(join link, teacher link) at class_address()."""
    address = class_address()
    teacher = class_links.teacher_link(address, class_code, secret) if secret else None
    return class_links.join_link(address, class_code), teacher


# ----------------------------------------------------------------------------- the page frame


def sync() -> None:
    """The class's part of every page after the sidebar (classroom.hooks then draws the bar of
    rounds): take a teacher link, say what happened, and start this role's timer."""
    take_teacher_link()
    offer_way_back()
    if NOTICE.is_set():
        st.error(plain(NOTICE.pop()))
    if ELSEWHERE.is_set():
        st.info(plain(ELSEWHERE.pop()))
    if role() == "teacher":
        _teacher_counts()
    elif role() == "student":
        _heartbeat()


def after_page() -> None:
    """The teacher's view once the page has drawn its controls (called by the frame at the end
    of a page run): a control changed there reaches the class now, not at the next tick."""
    if role() == "teacher":
        _publish_if_changed()


def current_page() -> str:
    """The URL path of the page this run draws ("" for Home)."""
    return navigation.current_url_path()


def view_state() -> dict:
    """What the teacher shows now, as Classroom.publish takes it: the page, and this session's
    view (kit.state.View) with a list control as its link says it."""
    view = s.current_view()
    controls = {name: s.url_text(value) if isinstance(value, list) else value
                for name, value in view.controls.items()
                if isinstance(value, (bool, int, float, str, list)) and not _device_only(name)}
    here = set(st.query_params)  # this page's controls first: its link holds them
    controls = dict(sorted(controls.items(), key=lambda item: item[0] not in here)
                    [:cr.Limits().max_controls - 1])
    if view.model_id and not is_session_model(view.model_id):  # a model trained here stays
        controls["model"] = view.model_id
    return {"page": current_page(), "prompt": view.prompt,
            "position": view.position if view.position >= 0 else None, "controls": controls}


def _device_only(name: str) -> bool:
    """A setting of this screen, not of the view: the teacher's projector mode is not put on
    the students' phones."""
    return name == projector.PARAM


def _publish_if_changed() -> None:
    view = view_state()
    text = json.dumps(view, sort_keys=True)
    if PUBLISHED.get() == text:
        return
    try:
        open_classroom().publish(code(), SECRET.get(), **view)
    except cr.ClassError as err:
        st.warning(f"Your view was not shared with the class: {plain(err)}")
        return
    PUBLISHED.set(text)


@st.fragment(run_every=TEACHER_SECONDS)
def _teacher_counts() -> None:
    """Publish the teacher's view if it changed, and show how many are here, every few seconds
    (counts only, never who answered what; the Class page lists the names). A page's controls
    are drawn after this runs in the page's own run: the next tick publishes them."""
    _publish_if_changed()
    try:
        view = open_classroom().teacher_view(code(), SECRET.get())
    except cr.ClassError as err:
        st.warning(plain(err))
        return
    latest = view.rounds[-1] if view.rounds else None
    answers = f" · round {latest.number}: {latest.answers} answered" if latest else ""
    st.text(f"Class {view.code} · {view.connected} connected · {view.following} following"
            f"{answers}")
    TEACHER_VIEW.set(view)  # the Class page's roll call reads it


# ----------------------------------------------------------------------------- after a reload


def offer_way_back() -> None:
    """A session in no class whose browser teaches one or has a seat in one (a reload, a tab
    the phone reopened) is offered the way back: one click. Asked once per browser token."""
    token = browser_token.browser_token()
    if token is None or role() is not None:
        return
    offer = OFFER.get()
    if offer is None or offer[0] != token:
        offer = OFFER.set((token, *_way_back(token)))
    _, kind, class_code = offer
    if kind is None:
        return
    with st.container(border=True, key="class_way_back"):
        left, right = st.columns([3, 2], vertical_alignment="center")
        if kind == resume.TEACHER:
            left.markdown(f"You are teaching class **{plain(class_code)}** in this browser.")
            left.button(f"Resume class {class_code}", key="class.resume", type="primary",
                        on_click=_take_way_back, args=(kind,))
            right.button("Forget this browser", key="class.forget", on_click=_forget_way_back,
                         args=(kind,), help="This browser will no longer resume the class "
                                            "(your teacher link still works).")
        else:
            left.markdown(f"You have a seat in class **{plain(class_code)}**.")
            left.button(f"Back to class {class_code}", key="class.resume", type="primary",
                        on_click=_take_way_back, args=(kind,))
            right.button("Not now", key="class.forget", on_click=_dismiss_way_back)


def _way_back(token: str) -> tuple[str | None, str | None]:
    """(role, class code) this browser can take back, teaching first; (None, None) if none."""
    room = open_classroom()
    try:
        taught = resume.teacher_for_browser(room, token)
        if taught:
            return resume.TEACHER, taught[0]
        seat = resume.student_for_browser(room, token)
        return (resume.STUDENT, seat[0]) if seat else (None, None)
    except cr.ClassError:  # the store is away: no offer this time
        return None, None


def _take_way_back(kind: str) -> None:
    """The "Resume" / "Back to class" click: checked again now (the class may have ended)."""
    token, room = browser_token.browser_token(), open_classroom()
    try:
        found = (resume.teacher_for_browser(room, token) if kind == resume.TEACHER
                 else resume.student_for_browser(room, token)) if token else None
    except cr.ClassError:
        found = None
    leave()
    if found is None:
        NOTICE.set("That class has ended (or this browser left it).")
        return
    CODE.set(found[0])
    if kind == resume.TEACHER:
        SECRET.set(found[1])
    else:
        STUDENT.set(found[1])
        FOLLOWING.set(True)


def _forget_way_back(kind: str) -> None:
    """Revoke this browser's way back (the class goes on)."""
    token = browser_token.browser_token()
    if token:
        try:
            resume.forget(open_classroom(), kind, token)
        except cr.ClassError:
            pass
    _dismiss_way_back()


def _dismiss_way_back() -> None:
    token = browser_token.browser_token()
    OFFER.set((token, None, None))


# ----------------------------------------------------------------------------- following


def catch_up() -> None:
    """A student's news, read before the sidebar is drawn (called by the page frame): a
    following student takes the teacher's new view here, so one page run shows it."""
    if role() != "student":
        return
    RUNS.set(RUNS.get() + 1)
    view = _poll(heartbeat=_heartbeat_due())
    POLLED.set(view is not None)  # the heartbeat of this run need not ask
    if view is None:
        return
    if _new_teacher_view(view):
        APPLIED.set(view.state.version)
        follow(view.state)
    DRAWN.set(_signature(view))


@st.fragment(run_every=POLL_SECONDS)
def _heartbeat() -> None:
    """A student's timer: every POLL_SECONDS it asks for news (and so says "still here"), and
    anything new reruns the page, whose catch_up takes it. In a page's own run catch_up has
    asked already. Between heartbeats, this process's watcher (class_push) wakes the session as
    soon as its class changes."""
    fragment_run = _ran_in_this_page_run()
    if not fragment_run and POLLED.get():
        return
    view = _poll(heartbeat=True)
    if view is None or _new_teacher_view(view) \
            or _signature(view) != DRAWN.get():
        if fragment_run:
            st.rerun(scope="app")


def _ran_in_this_page_run() -> bool:
    """Is this the heartbeat's own rerun (True), not its first call inside a page run? A page
    run counts itself in catch_up; the heartbeat's first call in it takes that number."""
    page_run = RUNS.get()
    own_rerun = HEARTBEAT_RUN.get() == page_run
    HEARTBEAT_RUN.set(page_run)
    return own_rerun


def _poll(*, heartbeat: bool) -> cr.StudentView | None:
    """Ask the class store for news (None, with a notice, when it refuses). A heartbeat also
    says "still here, following or not"; otherwise the store is only read: sixty students
    woken at once then do not queue for its write lock."""
    following = bool(FOLLOWING.get())
    room, student = open_classroom(), STUDENT.get()
    try:
        if heartbeat:
            view = room.poll(code(), student, following=following)
            SEEN.set((time.monotonic(), following))
        else:
            view = room.peek(code(), student)
    except cr.ClassError as err:
        if err.reason in ("not_member", "no_class"):
            leave()  # the class ended (or this seat went to someone else): start again
        NOTICE.set(str(err))
        return None
    VIEW.set(view)
    _watch(view, following)
    return view


def _heartbeat_due() -> bool:
    """Whether this run must say "still here": the heartbeat fragment has not (a tab whose
    full runs keep restarting its timer), or the student just chose to follow or not."""
    last = SEEN.get()
    following = bool(FOLLOWING.get())
    return last is None or last[1] != following or time.monotonic() - last[0] > POLL_SECONDS


def _new_teacher_view(view: cr.StudentView) -> bool:
    return bool(FOLLOWING.get() and view.state
                and view.state.version != APPLIED.get())


def _watch(view: cr.StudentView, following: bool) -> None:
    """Tell this process's watcher what this session has now, so it is woken when that changes."""
    if not streamlit_internals.serves_browsers():
        return
    latest = view.round
    drawn = cr.Pulse(view.state.version if view.state else 0, latest.number if latest else 0,
                     bool(latest and latest.revealed))
    _watcher().watch(streamlit_internals.session_id(), code(), drawn, following=following)


def _watcher() -> class_push.Watcher:
    global _WATCHER
    with _WATCHER_LOCK:
        if _WATCHER is None:
            _WATCHER = class_push.Watcher(
                open_classroom().pulse, _wake,
                interval=settings.class_push_seconds(), forget_after=max(30.0, 4 * POLL_SECONDS))
        return _WATCHER


def _wake(session_id: str, class_code: str, pulse: cr.Pulse, following: bool) -> bool:
    """Rerun a student's session; one that follows opens the teacher's page right away (its
    catch_up then takes the prompt and controls in that same run)."""
    page_hash = navigation.script_hash(pulse.page) if following else None
    return streamlit_internals.wake_session(session_id, page_hash=page_hash,
                                            query_string=urlencode({URL_CLASS: class_code}))


def mark_answered() -> None:
    """This student's guess for the latest round was taken: show it now, and do not let the next
    poll (which says so too) redraw the whole page for it."""
    view = VIEW.get()
    if view is not None and view.round is not None:
        view = dataclasses.replace(view, answered=True)
        VIEW.set(view)
        DRAWN.set(_signature(view))


def _signature(view: cr.StudentView) -> tuple:
    latest = view.round
    return (latest.number, latest.revealed, view.answered) if latest else ()


def follow(teacher: cr.ViewState) -> None:
    """Take the teacher's view: prompt, position, controls, model, and go to the page (this
    run goes on when it is the page already)."""
    s.take_view(as_view(teacher), models=available_models() if "model" in teacher.controls
                else ())
    if teacher.page != current_page():
        try:
            st.switch_page(navigation.page(navigation.page_file(teacher.page)),
                           query_params={URL_CLASS: code()})
        except StreamlitAPIException:  # a page run on its own (tests) knows no other page
            ELSEWHERE.set(f"The teacher is on the page “{teacher.page.replace('_', ' ')}”.")


def as_view(shown: cr.ViewState) -> s.View:
    """The kit's view of what the teacher published (its model travels as a control)."""
    controls = dict(shown.controls)
    model_id = controls.pop("model", None)
    return s.View(model_id if isinstance(model_id, str) else None, shown.prompt,
                  -1 if shown.position is None else shown.position, controls)


def set_following(following: bool) -> None:
    """"Explore on my own" (False) / "Follow again" (True: catch up with the teacher now)."""
    FOLLOWING.set(following)
    if following:
        APPLIED.pop()


def qr_png(link: str) -> bytes:
    """A QR code of `link` as PNG bytes, drawn here (segno), never fetched."""
    import io

    import segno

    buffer = io.BytesIO()
    segno.make(link, error="m").save(buffer, kind="png", scale=12, border=2)
    return buffer.getvalue()
