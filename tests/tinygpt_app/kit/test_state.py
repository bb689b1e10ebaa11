"""Session state helpers without a running app: prompts are cut as documented, and the parsers
of link values take what fits and refuse the rest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.kit.state uses streamlit's session state")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt.readouts.lesson import confidence  # noqa: E402
from tinygpt_app.kit import state  # noqa: E402
from tinygpt_app.kit.state import (  # noqa: E402
    DEFAULT_PROMPT,
    MAX_URL_PROMPT_CHARS,
    encode_prompt,
    in_range,
    link_note,
    one_of,
)


def test_encode_prompt_keeps_the_last_tokens():
    _, tok = load(TINY)
    text = "to be or not to be " * 40
    ids, notes = encode_prompt(tok, text, 16)
    assert list(ids) == tok.encode(text)[-16:] and len(notes) == 1
    ids, notes = encode_prompt(tok, "hi", 16)
    assert list(ids) == tok.encode("hi") and notes == [] and ids.dtype == np.int64


@pytest.mark.parametrize("raw, ok", [("0.5", True), ("3", True), ("-1", False), ("nan", False),
                                     ("abc", False), ("3.5", False), ("inf", False),
                                     ("1e309", False)])
def test_float_parser_refuses_impossible_values(raw, ok):
    parse = in_range(0.0, 3.0)
    if ok:
        assert parse(raw) == float(raw)
    else:
        with pytest.raises(ValueError):
            parse(raw)


def test_int_and_choice_parsers():
    assert in_range(0, 10, int)("7") == 7
    for bad in ("2.5", "inf", "-inf", "1e309", "nan"):
        with pytest.raises(ValueError):
            in_range(0, 10**12, int)(bad)
    assert one_of(["greedy", "sample"])("sample") == "sample"
    with pytest.raises(ValueError):
        one_of(["greedy", "sample"])("beam")


SHIPPED = Path(__file__).resolve().parents[3] / "models" / "shakespeare.npz"


@pytest.mark.skipif(not SHIPPED.is_file(), reason="the shipped model is not here")
def test_the_default_prompt_gives_the_shipped_model_something_to_say():
    """Issue 25, finding 4, computed on the shipped model: at the default position (the last)
    the model is clearly confident, one click back (the position before) it is not, and
    greedy decoding writes at least 20 tokens before it stops."""
    model, tok = load(SHIPPED)
    ids = np.array(tok.encode(DEFAULT_PROMPT))
    here = confidence(model.forward(ids), len(ids) - 1)  # the default position: the last
    assert here.p >= 0.3, (tok.decode([here.token]), here.p)
    assert here.before_p < 0.15, (tok.decode([here.before_token]), here.before_p)
    run = generate(model, ids, 20, "greedy", eos_token_id=tok.eos_token_id, record_steps=False)
    assert len(run.tokens) == 20 and run.stop_reason == "max_new_tokens", \
        tok.decode(list(run.tokens))


def test_link_note_says_when_the_prompt_is_too_long_for_the_link():
    assert link_note("x" * MAX_URL_PROMPT_CHARS) is None
    note = link_note("x" * (MAX_URL_PROMPT_CHARS + 5))
    assert f"{MAX_URL_PROMPT_CHARS + 5:,} characters" in note
    assert f"{MAX_URL_PROMPT_CHARS:,}" in note


@pytest.mark.usefixtures("tiny_models")
@pytest.mark.parametrize("page", ["pages/4_Attention.py",
                                  "pages/8_Decoding.py",
                                  "pages/7_Softmax_and_sampling.py",
                                  "pages/16_Class.py"])
def test_a_sessions_state_is_bounded_in_bytes(page):
    """The heaviest pages, with the longest prompt a session keeps: what the session holds
    stays under SESSION_STATE_BYTES (its results live in the shared caches)."""
    from tests.apptest_support import open_page
    from tinygpt_app.compute.shared_cache import nbytes_of
    from tinygpt_app.kit.slots import SESSION_MODELS
    from tinygpt_app.kit.state import MAX_PROMPT_CHARS, SESSION_STATE_BYTES

    at = open_page(page, "to be or not " * (MAX_PROMPT_CHARS // 13 + 50))
    assert not at.exception
    kept = at.session_state.to_dict() if hasattr(at.session_state, "to_dict") else {}
    # what the session weighs, its trained models apart (they have their own bound)
    weight = sum(nbytes_of(key) + nbytes_of(value) for key, value in kept.items()
                 if key != SESSION_MODELS.key)
    assert kept and MAX_PROMPT_CHARS < weight < SESSION_STATE_BYTES


def test_a_list_control_keeps_the_entries_that_fit_and_says_how_many_it_dropped():
    parse = state.many(state.pair_in(2, 4), 3, "blocks 0 … 1, heads 0 … 3")
    assert parse("") == [] and parse([]) == []
    assert parse("1.3,0.0") == ["1.3", "0.0"] and parse(["01.3", "1.3"]) == ["1.3"]
    with pytest.raises(state.PartlyRefused, match="2 entries outside blocks") as err:
        parse("0.1,99.99,2.0")
    assert err.value.kept == ["0.1"]
    for bad in ("0.4", "-1.0", "1", "1.2.3", "١.٢", " 0.1", "0.1e0", "9" * 40 + ".0"):
        with pytest.raises(ValueError):
            state.pair_in(2, 4)(bad)
    with pytest.raises(state.PartlyRefused, match="more than 3") as err:
        parse(",".join(["0.0", "0.1", "0.2", "0.3"] * 1000))  # only the first entries read
    assert err.value.kept == ["0.0", "0.1", "0.2"]
    assert state.url_text(["0.1", "1.3"]) == "0.1,1.3" and state.url_text([]) == ""


def test_a_views_link_holds_its_model_position_prompt_and_controls():
    from tinygpt_app.kit.state import MAX_URL_PROMPT_CHARS, View

    view = View("tiny.npz", "To be", 2, {"temperature": 0.7, "heads": ["0.1", "2.3"],
                                          "projector": True})
    assert view.url_params() == {"model": "tiny.npz", "pos": "2", "prompt": "To be",
                                 "temperature": "0.7", "heads": "0.1,2.3", "projector": "1"}
    long = View("tiny.npz", "x" * (MAX_URL_PROMPT_CHARS + 1))
    assert "prompt" not in long.url_params() and long.url_params()["pos"] == "-1"


def _take_and_read_a_view():
    import streamlit as st

    from tinygpt_app.kit import state

    if st.button("take", key="demo.take"):
        state.take_view(state.View("b.npz", "It is the east", 3, {"top_p": 0.5}),
                        models=["a.npz", "b.npz"])
        state.take_view(state.View("elsewhere.npz", "It is the east", 3, {}),
                        models=["a.npz", "b.npz"])  # a model not on this server: not taken
    st.text(repr(state.current_view()))
    shown = state.AppState("b.npz", None, None, "It is", [], 0)  # a page's state: its view
    st.text(repr(shown.view))


def test_a_view_taken_is_the_sessions_view():
    """take_view (a class's follow, a lesson step) and current_view (the class's publish) are
    the two directions of one serialisation."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_take_and_read_a_view, default_timeout=30).run()
    assert at.text[0].value == "View(model_id=None, prompt='', position=-1, controls={})"
    at.button[0].click().run()
    assert at.text[0].value == ("View(model_id='b.npz', prompt='It is the east', position=3, "
                                "controls={'top_p': 0.5})")
    assert at.session_state["control.top_p.url"] == "0.5"  # as if this session wrote its link
    assert at.text[1].value == ("View(model_id='b.npz', prompt='It is', position=0, "
                                "controls={'top_p': 0.5})")
