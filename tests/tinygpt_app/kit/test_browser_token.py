"""The browser token (issue 25): the server keeps only a string of the right shape, whatever
the browser sends, and the page frame mounts the component on every page without a rerun of
its own (AppTest has no browser: the token stays None, as on a session's first run)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import NORMAL, assert_clean, open_page  # noqa: E402
from tinygpt_app.kit import browser_token  # noqa: E402

GOOD = "wxUnUZhDikmO4hDyStn4FWhLbS0yBMiEeXdtwBsB2iI"  # what the browser's script made once


@pytest.mark.parametrize("token", [GOOD, "A" * 43, "-" * 43, "a_b-" * 10 + "xyz"])
def test_a_token_of_the_right_shape_is_valid(token):
    assert browser_token.valid(token)


@pytest.mark.parametrize("token", [
    None, 42, b"A" * 43, "", "A" * 42, "A" * 44, GOOD[:-1] + "=", GOOD[:-1] + "+",
    GOOD[:-1] + "/", GOOD[:-1] + " ", GOOD + "\n", "<script>alert(1)</script>" + "A" * 18,
    "é" * 43,
])
def test_anything_else_is_not(token):
    assert not browser_token.valid(token)


def remembering(reported):
    """A script that mounts the component and then hands `reported` to remember()."""
    def script():
        import streamlit as st

        from tinygpt_app.kit import browser_token

        browser_token.render()
        browser_token.remember(st.session_state.get("reported"))
        st.write(f"token={browser_token.browser_token()}")
    at = AppTest.from_function(script)
    at.session_state["reported"] = reported
    return at.run()


def test_a_valid_report_is_kept_under_the_fixed_key():
    at = remembering(GOOD)
    assert_clean(at)
    assert at.session_state[browser_token.KEY] == GOOD
    assert at.markdown[0].value == f"token={GOOD}"


@pytest.mark.parametrize("reported", ["../../etc/passwd", "A" * 42, None])
def test_a_bad_report_leaves_no_token(reported):
    at = remembering(reported)
    assert_clean(at)
    assert browser_token.KEY not in at.session_state
    assert at.markdown[0].value == "token=None"


@pytest.mark.usefixtures("tiny_models")
def test_every_page_mounts_it_and_knows_no_token_before_the_browser_reports():
    at = open_page("app.py", NORMAL)
    assert_clean(at)
    assert browser_token.KEY not in at.session_state
    mounted = [c.key for c in at.get("bidi_component")]
    assert mounted.count(browser_token.WIDGET_KEY) == 1
