"""The home page: the next-token guess follows the position."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import assert_clean, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


def test_home_predictions_follow_the_position():
    at = open_page("app.py", "ROMEO:\nBut soft, what light")
    before = at.dataframe[0].value
    assert before["probability"].is_monotonic_decreasing
    at.sidebar.select_slider[0].set_value(1).run()
    assert_clean(at)
    assert not before.equals(at.dataframe[0].value)
