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


def test_the_whole_run_takes_one_turn(monkeypatch):
    """app.py's run, navigation and sidebar included, runs inside one fair turn (one page slot,
    its CPU charged): issue 26's floods of new sessions ran all that outside the line."""
    from tinygpt_app.kit import navigation
    from tinygpt_hosting.serving import fair_share, turn

    navigate, seen, slots = navigation.navigate, [], []

    def watched(home):
        seen.append(fair_share.current_cost() is not None)
        return navigate(home)

    acquire = turn.ADMISSION._acquire

    def counted(*args, **kwargs):
        slots.append(1)
        return acquire(*args, **kwargs)

    open_page("app.py", "ROMEO:\nBut soft, what light")  # the model's first load waits
    # outside the line (compute.models) and queues again: a second slot, once per server
    monkeypatch.setattr(navigation, "navigate", watched)
    monkeypatch.setattr(turn.ADMISSION, "_acquire", counted)
    at = open_page("app.py", "ROMEO:\nBut soft, what light")
    assert_clean(at)
    assert seen == [True] and len(slots) == 1  # in a turn from the start; page() took no second


def test_the_picker_and_home_say_what_each_model_is(tmp_path, monkeypatch):
    """Issue 49: each model's card file says what it was trained on, its size and what it can
    and cannot know; the picker and Home read it (never typed in the page), and a model
    without a card says so in one line."""
    import json
    import shutil

    from tests.apptest_support import TINY
    from tinygpt_app.compute.model_cards import NO_CARD

    for name in ("tiny.npz", "bare.npz"):
        shutil.copy(TINY, tmp_path / name)
    (tmp_path / "tiny.card.json").write_text(json.dumps({
        "name": "tiny <b>test</b> model", "trained_on": "a few lines of *test* text",
        "parameters": 52_000, "knows": "those lines", "cannot_know": "anything else"}))
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    at = open_page("app.py", "ROMEO:")
    assert_clean(at)
    sidebar = " ".join(c.value for c in at.sidebar.caption).replace("\\", "")
    assert "52,000 parameters, trained on a few lines of *test* text" in sidebar
    said = "\n".join(m.value for m in at.main.markdown)
    assert "tiny <b>test</b> model" not in said  # plain text: escaped, never HTML
    said = said.replace("\\", "")
    assert "**Cannot know:** anything else" in said and "**Can know:** those lines" in said
    assert "**bare.npz**" in said
    captions = [c.value.replace("\\", "") for c in at.main.caption]
    assert NO_CARD.replace("\\", "") in captions
    assert "This model: 52,000 parameters" in " ".join(captions)
