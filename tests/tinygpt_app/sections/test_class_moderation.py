"""The teacher's moderation panel (sections.class_moderation) on the Class page, with the
classroom's moderator (classroom.moderation) and who a session is (classroom.client): AppTest
sessions sharing one SQLite class store; a browser is its token in the session (as
kit.browser_token keeps it once the browser reported it)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import ROOT, assert_clean, markup_left  # noqa: E402
from tinygpt_app.kit.browser_token import KEY as TOKEN  # noqa: E402
from tinygpt_app.sections.class_moderation import seat_label  # noqa: E402
from tinygpt_hosting.classroom import client, moderation  # noqa: E402
from tinygpt_hosting.classroom import hooks as class_hooks  # noqa: E402

CLASS = "pages/16_Class.py"
PHONE, PRANKSTER, LAPTOP = "P" * 43, "X" * 43, "L" * 43


@pytest.fixture(autouse=True)
def class_store(tiny_models, monkeypatch, tmp_path):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TINYGPT_CLASS_STORE", raising=False)
    monkeypatch.delenv("TINYGPT_TEACHER_KEY", raising=False)
    class_hooks.register()


def session(browser: str | None = None, **params: str) -> AppTest:
    """A new session of the Class page, from a browser whose token is known (or none)."""
    at = AppTest.from_file(str(ROOT / CLASS), default_timeout=90)
    if browser:
        at.session_state[TOKEN] = browser
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def teacher(browser: str = LAPTOP) -> AppTest:
    at = session(browser)
    at.button(key="class.start").click().run()
    assert_clean(at)
    return at


def join(code: str, browser: str | None, nickname: str = "") -> AppTest:
    at = session(browser, **{"class": code})
    at.text_input(key="class.join_nickname").input(nickname)
    next(b for b in at.button if b.label.startswith("Join")).click().run()
    return at


def errors(at: AppTest) -> str:
    return "\n".join(e.value for e in at.error)


def test_a_reload_from_the_same_browser_keeps_its_seat():
    lead = teacher()
    code = lead.session_state["class.code"]
    first = join(code, PHONE, "ada")
    again = join(code, PHONE, "ada")  # F5: a new session, the same browser
    assert_clean(again)
    assert again.session_state["class.student"] == first.session_state["class.student"]


def test_a_locked_class_refuses_a_new_student():
    lead = teacher()
    code = lead.session_state["class.code"]
    lead.toggle(key="class.moderation.lock").set_value(True).run()
    assert_clean(lead)
    refused = join(code, PHONE)
    assert "locked" in errors(refused) and "class.student" not in refused.session_state


def test_a_removed_browser_cannot_rejoin():
    lead = teacher()
    code = lead.session_state["class.code"]
    join(code, PHONE, "ada")
    join(code, PRANKSTER, "lol")
    lead.run()
    options = lead.selectbox(key="class.moderation.choice").options
    assert any("lol" in option for option in options)
    prank = next(o for o in options if "lol" in o)
    lead.selectbox(key="class.moderation.choice").select(prank).run()
    lead.button(key="class.moderation.remove").click().run()
    assert_clean(lead)
    assert any("cannot join again" in s.value for s in lead.success)
    assert "removed" in errors(join(code, PRANKSTER, "back again"))
    assert_clean(join(code, PHONE, "ada"))  # the others are not touched


def test_hidden_names_leave_the_projected_roll_call():
    lead = teacher()
    code = lead.session_state["class.code"]
    join(code, PHONE, "rude name").run()  # its heartbeat: connected
    lead.run()
    assert "rude name" in "\n".join(t.value for t in lead.text)
    lead.toggle(key="class.moderation.hide").set_value(True).run()
    lead.run()
    assert "rude name" not in "\n".join(t.value for t in lead.text)
    assert all("rude name" not in o for o in lead.selectbox(key="class.moderation.choice").options)


def test_starting_a_class_needs_the_teacher_key_when_the_server_has_one(monkeypatch):
    monkeypatch.setenv("TINYGPT_TEACHER_KEY", "correct horse battery")
    at = session(LAPTOP)
    at.button(key="class.start").click().run()
    assert "teacher key" in errors(at) and "class.secret" not in at.session_state
    at.text_input(key="class.teacher_key").input("correct horse battery")
    at.button(key="class.start").click().run()
    assert_clean(at)
    assert at.session_state["class.secret"]


def test_a_teacher_browser_leads_one_class_at_a_time():
    first = teacher(LAPTOP)
    old = first.session_state["class.code"]
    second = teacher(LAPTOP)  # another tab of the same browser starts a class
    assert second.session_state["class.code"] != old
    assert "no class" in errors(join(old, PHONE)).lower()


def test_a_student_session_has_no_moderator_and_this_machine_no_address():
    at = session(PHONE)
    assert_clean(at)
    assert "class.moderation.lock" not in [t.key for t in at.toggle]  # a teacher's panel only
    assert moderation.SessionModerator and client.who  # (their use: the tests above)


def test_how_a_seat_is_listed():
    class Seat:
        student, nickname, connected = "id", "<b>x</b>", False

    assert seat_label(3, Seat, True) == "Seat 3 · <b>x</b> (away)"
    assert seat_label(3, Seat, False) == "Seat 3 (away)"


@pytest.mark.parametrize("nickname", ["![](http://e.vl/a.png)", "**X**[y](http://e.vl)",
                                      "$x$ `y` <img src=z>"])
def test_a_removed_nickname_reaches_the_projector_as_text(nickname):
    """The "Removed …" message quotes the seat's label: the nickname, typed by a student, was
    rendered as markdown (an image the projected page fetched, a live link)."""
    lead = teacher()
    code = lead.session_state["class.code"]
    join(code, PRANKSTER, nickname)
    lead.run()
    chosen = next(o for o in lead.selectbox(key="class.moderation.choice").options
                  if "Seat 1" in o)
    lead.selectbox(key="class.moderation.choice").select(chosen).run()
    lead.button(key="class.moderation.remove").click().run()
    assert_clean(lead)
    assert any("cannot join again" in s.value for s in lead.success)
    assert markup_left(lead) == []
