"""tinygpt_app.kit.wire_check and state.control: a widget value of the wrong type, sent over
the websocket instead of clicked, falls back to the default with a plain note, and the session
keeps working (issue 27: it showed "TypeError: must be real number, not str" on every later
run of Compare prompts and Lesson)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    assert_clean,
    charts,
    open_page,
    query_param,
    send_widget_value,
)

pytestmark = pytest.mark.usefixtures("tiny_models")

LESSON, COMPARE = "pages/1_Lesson.py", "pages/15_Compare_prompts.py"
# every field a WidgetState can carry, with a value that is not the widget's
WRONG = [("string_value", "x"), ("int_value", 7), ("double_value", 2.5), ("bool_value", True),
         ("string_array_value", ["x"]), ("double_array_value", [1.0, 2.0]),
         ("int_array_value", [5, 9])]


def refused(at) -> bool:
    return any("could not be used" in w.value for w in at.warning)


def still_works(at) -> None:
    """Later reruns draw the page with no error box (the session is not stuck)."""
    for _ in range(2):
        at.run()
        assert_clean(at)
        assert charts(at)


@pytest.mark.parametrize("field, value", WRONG)
def test_a_wrong_type_for_the_lesson_step_falls_back_with_a_note(field, value):
    at = open_page(LESSON, prompt="Hello there", lesson_step="3")
    at = send_widget_value(at, "lesson.lesson_step", field, value)
    assert_clean(at)
    assert refused(at)
    assert at.selectbox(key="lesson.lesson_step").value == 1
    assert query_param(at, "lesson_step") == "1"
    still_works(at)
    at.button(key="lesson.next").click().run()  # the controls still work
    assert_clean(at) and at.selectbox(key="lesson.lesson_step").value == 2


@pytest.mark.parametrize("key", ["compare.layer", "compare.head"])
@pytest.mark.parametrize("field, value", [WRONG[0], WRONG[2], WRONG[4]])
def test_a_wrong_type_for_compare_layer_or_head_falls_back(key, field, value):
    at = open_page(COMPARE, prompt="Hello there")
    at = send_widget_value(at, key, field, value)
    assert_clean(at)
    assert refused(at)
    assert at.selectbox(key=key).value == 0
    still_works(at)


@pytest.mark.parametrize("key", ["sidebar.prompt", "sidebar.position", "sidebar.model",
                                 "sidebar.projector"])
@pytest.mark.parametrize("field, value", [WRONG[1], WRONG[2], WRONG[5]])
def test_wrong_types_for_the_sidebar_leave_the_session_working(key, field, value):
    at = open_page(LESSON, prompt="Hello there")
    at = send_widget_value(at, key, field, value)
    assert not at.exception, [e.value for e in at.exception]
    assert_clean(at)
    assert refused(at)
    assert at.sidebar.text_area[0].value == "Hello there"
    still_works(at)


def test_text_sent_for_a_slider_gives_its_default_and_a_note():
    at = open_page("pages/8_Decoding.py", prompt="Hello there", new="5")
    at = send_widget_value(at, "decoding.new", "string_value", "a lot")
    assert_clean(at)
    assert any("New tokens could not be used" in w.value and "back at 40" in w.value
               for w in at.warning)
    assert at.slider(key="decoding.new").value == 40  # the page's default for a small model
    assert query_param(at, "new") == "40"
    still_works(at)


def test_a_value_fits_only_its_widgets_field():
    from tinygpt_app.kit import wire_check

    assert wire_check.fits("double_value", "double_value")
    assert not wire_check.fits("string_value", "double_array_value")
    assert wire_check.fits(None, "string_value")  # nothing sent: the widget's own value
    assert wire_check.fits("int_value", None)  # no metadata yet: the deserializer decides
    # a number input is registered as "double_value"; the browser sends an integer one's
    # value as "int_value": it fits; a number for an integer widget (an index) does not
    assert wire_check.fits("int_value", "double_value")
    assert not wire_check.fits("double_value", "int_value")
    assert not wire_check.fits("string_value", "double_value")


def test_refusals_are_said_by_widget_key_bounded_per_session(monkeypatch):
    from tinygpt_app.kit import wire_check

    monkeypatch.setattr(wire_check, "_refused", type(wire_check._refused)(wire_check.REFUSED_BYTES))
    assert wire_check.widget_key("$$ID-4f2a-lesson.lesson_step") == "lesson.lesson_step"
    assert wire_check.widget_key("no-prefix") == "a control"
    assert len(wire_check.widget_key("$$ID-x-" + "k" * 500)) == wire_check.MAX_KEY_CHARS
    for i in range(wire_check.MAX_PER_SESSION + 5):
        wire_check.remember_refused(f"$$ID-h-key{i}")
    said = wire_check.take_refused()  # outside a run: the session "" (as before)
    assert len(said) == wire_check.MAX_PER_SESSION and "key0" in said
    assert wire_check.take_refused() == []  # said once
