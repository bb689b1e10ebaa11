"""Session state helpers without a running app: prompts are cut as documented, and the parsers
of link values take what fits and refuse the rest."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.kit.state uses streamlit's session state")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt_app.kit.state import encode_prompt, in_range, one_of  # noqa: E402


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
