"""Running a lesson in a live class: the pure parts (which model a step runs on, what its round
carries), then a teacher running a lesson with two students in AppTest (one SQLite class store,
the pages run on their own, so the step's page is named rather than opened).
"""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import ROOT, assert_clean  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt_app.compute.models import load_model  # noqa: E402
from tinygpt_hosting.classroom import hooks as class_hooks  # noqa: E402
from tinygpt_hosting.classroom import rounds  # noqa: E402
from tinygpt_hosting.classroom.lesson import loader as lf  # noqa: E402
from tinygpt_hosting.classroom.lesson import report as lesson_report  # noqa: E402
from tinygpt_hosting.classroom.lesson import reveal as lesson_reveal  # noqa: E402
from tinygpt_hosting.classroom.lesson import runner as lesson_run  # noqa: E402
from tinygpt_hosting.classroom.session import open_classroom  # noqa: E402

CLASS = "pages/16_Class.py"
FIRST = "ROMEO:\nBut soft, what light through yonder"
SECOND = "JULIET:\nO Romeo, Romeo!"
LESSON = f'''title = "A test lesson"

[[step]]
page = "Softmax_and_sampling"
prompt = """{FIRST}"""
model = ["absent.gguf", "tiny.npz"]
question = "What comes next?"
choices = [" the", " a", " window"]
true_next = " the"
notes = "Only for the teacher: ask them first."

[[step]]
page = "Decoding"
prompt = """{SECOND}"""
temperature = 0.5
top_p = 0.8
notes = "Step two's note."
'''


def test_the_first_model_present_is_used_and_a_fallback_is_said():
    assert lesson_run.choose_model(("a.gguf", "b.npz"), ["b.npz"], "c.npz")[0] == "b.npz"
    model, note = lesson_run.choose_model(("a.gguf", "b.npz"), ["b.npz"], "c.npz")
    assert "asks for a.gguf, which is not installed" in note and "runs on b.npz" in note
    assert lesson_run.choose_model(("b.npz",), ["b.npz"], "c.npz") == ("b.npz", None)
    assert lesson_run.choose_model((), ["b.npz"], "c.npz") == ("c.npz", None)
    model, note = lesson_run.choose_model(("x.npz",), ["b.npz"], "c.npz")
    assert model == "c.npz" and "None of this step's models" in note


def test_a_steps_round_carries_its_question_choices_and_true_token():
    step = lf.read_lesson(LESSON.encode()).steps[0]
    details = lesson_run.round_details(step, "tiny.npz", 0.9)
    assert details == {"top_p": 0.9, "lesson_step": 1, "question": "What comes next?",
                       "model": "tiny.npz", "true_next": " the", "choice0": " the",
                       "choice1": " a", "choice2": " window"}
    assert rounds.choices_of(details) == [" the", " a", " window"]


@pytest.fixture
def lesson_class(tiny_models, monkeypatch, tmp_path):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TINYGPT_CLASS_STORE", raising=False)
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "test_lesson.toml").write_text(LESSON, encoding="utf-8")
    monkeypatch.setattr(lf, "LESSONS_DIR", folder)
    class_hooks.register()


def run_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def joined(code: str, nickname: str) -> AppTest:
    at = run_page(CLASS, **{"class": code})
    at.text_input(key="class.join_nickname").input(nickname)
    next(b for b in at.button if b.label == "Join the class").click().run()
    assert_clean(at)
    return at


def shown(at: AppTest) -> str:
    parts = [t.value for t in at.text] + [m.value for m in at.markdown]
    parts += [n.value for kind in (at.info, at.caption, at.success) for n in kind]
    return "\n".join(parts).replace("\\", "")  # plain() escapes markdown


def pick(at: AppTest, text: str) -> None:
    """A student picks the choice `text` and sends it."""
    _, tokenizer = load_model("tiny.npz")
    at.button_group(key="class.pick").set_value(ti.first_token(tokenizer, text))
    next(b for b in at.button if b.label == "Send my guess").click().run()
    assert_clean(at)


def true_probability() -> float:
    model, tokenizer = load_model("tiny.npz")
    probs = ti.probabilities(model.forward(np.asarray(tokenizer.encode(FIRST)))[-1])  # (V,)
    return float(probs[ti.first_token(tokenizer, " the")])


@pytest.mark.usefixtures("lesson_class")
def test_a_teacher_runs_a_lesson_from_the_first_step_to_the_report():
    new = open_classroom().create_class()
    teacher = run_page(CLASS, **{"class": new.code, "teacher": new.secret})
    alice, bob = joined(new.code, "alice"), joined(new.code, "bob")

    teacher.selectbox(key=lesson_run.W_CHOSEN).set_value("test_lesson.toml")
    teacher.button(key="class.lesson_open").click().run()
    assert_clean(teacher)
    said = shown(teacher)
    assert "Lesson: A test lesson · step 1 of 2 · Softmax and sampling" in said
    assert "asks for absent.gguf, which is not installed" in said  # the fallback is said
    assert "Only for the teacher: ask them first." in said  # the notes, on this screen
    assert teacher.session_state["prompt"] == FIRST

    for pupil in (alice, bob):  # the step's question is a round, with its choices
        pupil.run()
        assert "Round 1: What comes next?" in shown(pupil)
        assert "Only for the teacher" not in shown(pupil)
        assert pupil.session_state["prompt"] == FIRST  # followers take the step's prompt
    pick(alice, " the")
    pick(bob, " a")
    teacher.run()
    teacher.button(key="class.reveal").click().run()
    assert_clean(teacher)

    # two guesses over three choices, one of them the true token: (1 + 1/2) / (2 + 3/2)
    room, model = 1.5 / 3.5, true_probability()
    metrics = {m.label: m.value for m in teacher.metric}
    assert metrics["The room's probability for it"] == f"{room:.1%}"
    assert metrics["The model's probability for it"] == f"{model:.1%}"
    assert (f"the class averaged {-math.log2(room):.2f} bits per token and the model "
            f"{-math.log2(model):.2f}") in shown(teacher)
    alice.run()
    bob.run()
    assert "You guessed 1 of 1 true tokens so far." in shown(alice)
    assert "You guessed 0 of 1 true tokens so far." in shown(bob)
    assert "bits per token" not in shown(alice)  # the running score is the teacher's

    teacher.button(key="class.lesson_next").click().run()  # step 2 for the whole class
    assert_clean(teacher)
    assert teacher.session_state["prompt"] == SECOND
    assert teacher.session_state["control.temperature"] == 0.5
    assert "Step two's note." in shown(teacher)
    teacher.toggle(key=lesson_run.W_LOCK).set_value(True).run()
    teacher.run()  # the lock is published with the view
    alice.run()
    assert alice.session_state["prompt"] == SECOND
    assert alice.session_state["control.temperature"] == 0.5
    assert rounds.LOCKED_NOTE in shown(alice)
    assert not any(b.label == "Explore on my own" for b in alice.button)

    csv_text = lesson_report.to_csv([lesson_reveal.report_row(r, _state(teacher))
                                     for r in _revealed(teacher)])
    row = list(csv.DictReader(io.StringIO(csv_text)))[0]
    assert row["true token"] == "' the'" and row["answers"] == "2"
    assert row["class guesses"] in ("' the' ×1; ' a' ×1", "' a' ×1; ' the' ×1")
    assert row["room p(true)"] == f"{room:.4f}"
    labels = [b.proto.label for b in teacher.get("download_button")]
    assert [label for label in labels if label.startswith("Download the")] == [
        "Download the report (CSV)", "Download the summary (HTML)"]


def _revealed(teacher: AppTest):
    view = teacher.session_state["class.teacher_view"]
    room = open_classroom()
    code, secret = teacher.session_state["class.code"], teacher.session_state["class.secret"]
    return [room.round_result(code, r.number, secret=secret) for r in view.rounds if r.revealed]


def _state(teacher: AppTest):
    from tinygpt_app.kit import state as s

    model, tokenizer = load_model("tiny.npz")
    ids = np.asarray(tokenizer.encode(FIRST), dtype=np.int64)
    return s.AppState("tiny.npz", model, tokenizer, FIRST, ids, len(ids) - 1, [])


@pytest.mark.usefixtures("lesson_class")
def test_notes_are_never_projected():
    new = open_classroom().create_class()
    teacher = run_page(CLASS, **{"class": new.code, "teacher": new.secret, "projector": "1"})
    teacher.selectbox(key=lesson_run.W_CHOSEN).set_value("test_lesson.toml")
    teacher.button(key="class.lesson_open").click().run()
    assert_clean(teacher)
    assert "step 1 of 2" in shown(teacher)
    assert "Only for the teacher" not in shown(teacher)
    assert not any("Notes for you" in e.label for e in teacher.expander)
