"""tinygpt_hosting.classroom.rounds, the model's side of a round: the question's prompt and position
under the session's model, the asked head kept inside the model's sizes, the text the class
reads, and a guess as it is sent. (The drawing is covered by tests/pages/test_class.py.)"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt_app.kit import state as s  # noqa: E402
from tinygpt_hosting.classroom import rounds  # noqa: E402
from tinygpt_hosting.classroom import rules as cr  # noqa: E402

PROMPT = "ROMEO:\nBut soft, what light"


@pytest.fixture(scope="module")
def session() -> s.AppState:
    model, tok = load(TINY)
    ids = np.array(tok.encode(PROMPT), dtype=np.int64)
    return s.AppState("tiny.npz", model, tok, PROMPT, ids, 0, [str(i) for i in ids])


def question(position: int | None, kind: str = rounds.NEXT_TOKEN, **details) -> cr.Question:
    return cr.Question(prompt=PROMPT, position=position, kind=kind, details=details)


def test_the_question_is_read_at_its_position_clamped_to_the_prompt(session):
    last = len(session.ids) - 1
    assert rounds.question_model(question(None), session).position == last
    assert rounds.question_model(question(2), session).position == 2
    asked = rounds.question_model(question(10_000), session)
    assert asked.position == last and asked.model is session.model
    np.testing.assert_array_equal(asked.ids, session.ids)
    assert len(asked.labels) == len(asked.ids)


def test_the_asked_head_stays_inside_the_model(session):
    n_layer, n_head = session.n_layer, session.n_head
    assert rounds.asked_head(question(0, rounds.ATTENTION, layer=0, head=1), session) == (0, 1)
    assert rounds.asked_head(question(0, rounds.ATTENTION, layer=99, head=-4),
                             session) == (n_layer - 1, 0)
    assert rounds.asked_head(question(0, rounds.ATTENTION, layer=-1, head=99),
                             session) == (0, n_head - 1)
    assert rounds.asked_head(question(0, rounds.ATTENTION, layer="1", head=None),
                             session) == (0, 0)  # not a whole number: the first


def test_the_class_reads_the_prompt_up_to_the_asked_token(session):
    asked = rounds.question_model(question(2), session)
    text = session.tokenizer.decode([int(i) for i in session.ids[:3]])
    assert rounds.question_text(asked) == text
    assert rounds.question_line(4, question(2), asked) == (
        f"Round 4: what comes next after “{text}”?")
    line = rounds.question_line(1, question(2, rounds.ATTENTION, layer=0, head=1), asked)
    assert line.startswith("Round 1: in layer 0, head 1,") and "(position 2)" in line


def test_a_long_prompt_is_cut_to_its_last_80_characters(session):
    long_ids = np.array(session.tokenizer.encode("To be or not to be. " * 20), dtype=np.int64)
    long = s.AppState("tiny.npz", session.model, session.tokenizer, "x", long_ids,
                      len(long_ids) - 1, [])
    text = rounds.question_text(long)
    assert text.startswith("…") and len(text) == 81 and text.endswith("to be. ")


def test_a_position_guess_is_a_plain_number_in_range():
    assert rounds.position_guess(" 3 ", last=5) == 3
    assert rounds.position_guess("6", last=5) is None
    for bad in ("-1", "2.0", "٣", "", "three"):
        assert rounds.position_guess(bad, last=5) is None
