"""kit.link_notes: what a page says about its link is said again on each later run of the page
visit (a browser's first run is often cut short, and its notes with it), once per run, and not
on another page's visit."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import assert_clean, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
SAMPLING = "pages/7_Softmax_and_sampling.py"


def _notes(at, word: str) -> list[str]:
    return [w.value for w in at.warning if word in w.value.replace("\\", "")]


def test_a_refused_link_value_is_said_on_every_run_of_the_visit_once():
    at = open_page(SAMPLING, prompt="Hello there", temperature="99")
    assert_clean(at)
    assert len(_notes(at, "temperature")) == 1
    for _ in range(2):  # the reruns that follow a cut first run, a slider's move
        at.run()
        assert_clean(at)
        assert len(_notes(at, "temperature")) == 1  # said again, not twice


def test_a_link_to_a_model_that_is_not_here_says_which_model_is_used():
    at = open_page(SAMPLING, prompt="Hello there", model="no such model [x](y).npz")
    assert_clean(at)
    notes = _notes(at, "There is no model")
    assert len(notes) == 1 and "no such model" in notes[0].replace("\\", "")
    at.run()
    assert len(_notes(at, "There is no model")) == 1


def test_a_page_without_a_bad_link_says_nothing_about_its_link():
    at = open_page(SAMPLING, prompt="Hello there", temperature="0.5")
    at.run()
    assert not _notes(at, "link") and not _notes(at, "There is no model")
