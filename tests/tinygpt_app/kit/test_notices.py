"""tinygpt_app.kit.notices: a page error shows a short box and logs its traceback once per
kind and interval (issue 27: ~3.9 KB per bad request, unthrottled); user text echoed in a
message is cut (a 10 MB model name was echoed twice); a model whose numbers overflow gets one
plain warning on every page."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    TINY,
    assert_clean,
    open_page,
    send_widget_value,
)
from tinygpt.checkpoint.files import load, save  # noqa: E402
from tinygpt_app.kit.notices import NUMBERS_WARNING, ThrottledTracebacks  # noqa: E402
from tinygpt_app.kit.plain_text import ECHO_CHARS, cut  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def raised(message: str, kind: type = ValueError) -> BaseException:
    try:
        raise kind(message)
    except Exception as err:  # noqa: BLE001
        return err


def errors(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tinygpt.app"]


def test_a_repeated_error_is_logged_once_then_counted(caplog):
    caplog.set_level(logging.ERROR, logger="tinygpt.app")
    clock = Clock()
    log = ThrottledTracebacks(interval=60.0, max_kinds=5, clock=clock)
    for i in range(1000):  # one client, a bad request after another (messages differ)
        log.report(raised(f"must be real number, not str {i}"))
        clock.now += 0.01
    assert len(errors(caplog)) == 1 and "Traceback" not in errors(caplog)[0]
    assert "test_notices.py" in errors(caplog)[0]  # the traceback's frames are there
    clock.now += 60.0
    log.report(raised("again"))
    logged = errors(caplog)
    assert len(logged) == 3 and "repeated 999 more times" in logged[1]
    assert sum(len(m) for m in logged) < 4_000


def test_many_kinds_are_bounded_too(caplog):
    caplog.set_level(logging.ERROR, logger="tinygpt.app")
    clock = Clock()
    log = ThrottledTracebacks(interval=60.0, max_kinds=3, clock=clock)
    kinds = [type(f"Error{i}", (Exception,), {}) for i in range(20)]
    for kind in kinds:
        log.report(raised("x", kind))
    assert len(errors(caplog)) == 3
    clock.now += 61.0
    log.report(raised("y"))
    assert any("17 more page errors" in m for m in errors(caplog))


def test_a_huge_message_is_cut_in_the_log(caplog):
    caplog.set_level(logging.ERROR, logger="tinygpt.app")
    ThrottledTracebacks().report(raised("x" * 10_000_000))
    assert sum(len(m) for m in errors(caplog)) < 2_000


def test_cut():
    assert cut("short") == "short"
    long = cut("m" * 10_000_000)
    assert len(long) == ECHO_CHARS and long.endswith("…")


# ----------------------------------------------------------------------------- on the pages



@pytest.mark.usefixtures("tiny_models")
def test_a_10_mb_model_name_is_not_echoed():
    at = open_page("pages/1_Lesson.py", prompt="Hello there")
    at = send_widget_value(at, "sidebar.model", "string_value", "m" * 10_000_000)
    assert not at.exception
    shown = [e.value for e in at.error]
    assert shown and sum(len(e) for e in shown) < 600, sum(len(e) for e in shown)
    assert at.sidebar.selectbox[0].value == "tiny.npz"


@pytest.mark.usefixtures("tiny_models")
def test_an_error_box_is_short_whatever_the_message(monkeypatch):
    from tinygpt_app.sections import lesson

    def fail(*args, **kwargs):
        raise ValueError("y" * 1_000_000)

    monkeypatch.setattr(lesson, "draw_step", fail)
    at = open_page("pages/1_Lesson.py", prompt="Hello there")
    assert len(at.error) == 1 and len(at.error[0].value) < 600
    assert at.error[0].value.startswith("Sorry, this view could not be drawn (ValueError")


@pytest.fixture
def huge_model(tmp_path, monkeypatch):
    """A models folder with tiny.npz and huge.npz: tiny's weights times 1e18 (all finite)."""
    model, tok = load(TINY)
    model.load_parameters({k: v * np.float32(1e18) for k, v in model.parameters().items()})
    assert all(np.isfinite(v).all() for v in model.parameters().values())
    save(model, tok, tmp_path / "huge.npz")
    shutil.copy(TINY, tmp_path / "tiny.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return "huge.npz"


@pytest.mark.parametrize("page", ["app.py", "pages/4_Attention.py",
                                  "pages/8_Decoding.py",
                                  "pages/12_Training.py", "pages/1_Lesson.py"])
def test_every_page_says_once_that_an_overflowing_models_numbers_are_meaningless(huge_model,
                                                                                  page):
    at = open_page(page, prompt="Hello there", model=huge_model)
    said = [w.value for w in at.warning if w.value == NUMBERS_WARNING]
    assert len(said) == 1
    at = open_page(page, prompt="Hello there", model="tiny.npz")
    assert not [w for w in at.warning if w.value == NUMBERS_WARNING]
    assert_clean(at)


@pytest.mark.usefixtures("tiny_models")
def test_a_page_failing_on_every_rerun_logs_one_traceback(monkeypatch, caplog):
    from tinygpt_app.kit import notices
    from tinygpt_app.sections import lesson

    def fail(*args, **kwargs):
        raise TypeError("must be real number, not str")

    monkeypatch.setattr(lesson, "draw_step", fail)
    monkeypatch.setattr(notices, "TRACEBACKS", ThrottledTracebacks())
    caplog.set_level(logging.ERROR, logger="tinygpt.app")
    at = open_page("pages/1_Lesson.py", prompt="Hello there")
    for _ in range(5):
        at.run()
        assert len(at.error) == 1  # each run still says it failed
    assert len(errors(caplog)) == 1
