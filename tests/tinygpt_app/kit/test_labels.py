"""Token labels (issue 25): a character that the tokenizer spells in several byte tokens ("🍕":
four bytes in UTF-8) is grouped and said, in chip captions and axis labels, checked against the
text's own UTF-8 bytes."""

from __future__ import annotations

import pytest

from tests.apptest_support import TINY
from tinygpt.checkpoint.files import load
from tinygpt_app.kit.labels import (
    byte_note,
    byte_pieces,
    chip_captions,
    prompt_labels,
    token_label,
)


@pytest.fixture(scope="module")
def tok():
    return load(TINY)[1]


def test_pieces_of_one_character_are_grouped_and_make_it(tok):
    text = "I love 🍕 and 世界"
    ids = tok.encode(text)
    pieces = byte_pieces(tok, ids)
    for character in ("🍕", "世", "界"):
        group = [i for i, p in enumerate(pieces) if p and p.character == character]
        assert group, character
        joined = b"".join(tok.token_bytes(ids[i]) for i in group)
        assert joined.decode("utf-8").strip() == character  # the tokens' bytes are the char's
        assert [pieces[i].part for i in group] == list(range(1, len(group) + 1))
        assert all(pieces[i].of == len(group) > 1 for i in group)
        assert group == list(range(group[0], group[-1] + 1))  # side by side
    for i, p in enumerate(pieces):  # every other token is whole text by itself
        if p is None:
            tok.token_bytes(ids[i]).decode("utf-8")


def test_plain_text_has_no_pieces_and_the_labels_stay_as_they_were(tok):
    ids = tok.encode("ROMEO:\nBut soft, what light")
    assert byte_pieces(tok, ids) == [None] * len(ids)
    assert prompt_labels(tok, ids) == [token_label(tok, t, position=i) for i, t in enumerate(ids)]
    assert chip_captions(tok, ids) == [f"id {t}" for t in ids]
    assert byte_note(byte_pieces(tok, ids)) is None


def test_chips_labels_and_the_note_say_which_piece(tok):
    ids = tok.encode("🍕")
    pieces = byte_pieces(tok, ids)
    n = len(ids)
    assert n > 1 and all(p is not None for p in pieces)
    assert chip_captions(tok, ids)[0] == f"id {ids[0]} · 🍕: token 1 of {n}"
    assert prompt_labels(tok, ids)[-1].endswith(f"(🍕 {n}/{n})")
    assert prompt_labels(tok, ids)[0].startswith("0:")  # still unique per position
    note = byte_note(pieces)
    assert f"“🍕” ({n} tokens)" in note and "One character in several bytes" in note
