"""tinygpt_hosting.classroom.hooks: the teacher's extra CPU share is earned by a class following
(issue 26: "Start a class" alone no longer escapes the heavy-tab limit)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import ROOT, assert_clean  # noqa: E402
from tinygpt_hosting.classroom import hooks as class_hooks  # noqa: E402
from tinygpt_hosting.serving import fair_share  # noqa: E402

CLASS = "pages/16_Class.py"


@pytest.fixture(autouse=True)
def class_store(tiny_models, monkeypatch, tmp_path):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_FAIR_SHARE", "0.1")
    monkeypatch.delenv("TINYGPT_CLASS_STORE", raising=False)
    monkeypatch.delenv("TINYGPT_TEACHER_KEY", raising=False)
    activity = fair_share.Activity()
    monkeypatch.setattr(fair_share, "RUNS", activity)
    for student in range(30):  # a busy server: a tab's share is the process divided
        with activity.running(f"student {student}"):
            pass
    class_hooks.register()


def page(**params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / CLASS), default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def test_a_teacher_gets_the_full_share_only_while_students_follow():
    teacher = page()
    teacher.button(key="class.start").click().run()
    teacher.run()
    assert_clean(teacher)
    assert teacher.session_state["fair_share.bucket"].share < 0.1  # nobody follows yet
    code = teacher.session_state["class.code"]
    pupil = page(**{"class": code})
    next(b for b in pupil.button if b.label.startswith("Join")).click().run()
    pupil.run()  # its heartbeat: connected and following
    teacher.run()  # the teacher's counters see the follower...
    teacher.run()  # ...and the next run has the teacher's share
    assert teacher.session_state["fair_share.bucket"].share == 0.1
