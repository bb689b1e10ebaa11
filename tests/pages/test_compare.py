"""The Compare prompts page: two prompts side by side at every stage, the second prompt in the
link, and the attribution difference adding up to the difference of the logits."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    TINY,
    assert_clean,
    chart,
    decode,
    open_page,
    query_param,
)
from tinygpt.checkpoint.files import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/15_Compare_prompts.py"
FIRST, SECOND = "The doctor said that he", "The doctor said that she"


def last_logits(text: str) -> np.ndarray:
    model, tok = load(TINY)
    return model.forward(np.array(tok.encode(text)))[-1]


def test_every_stage_is_drawn_for_both_prompts():
    at = open_page(PAGE, FIRST, prompt2=SECOND)
    assert_clean(at)
    bars = chart(at, "p(next token) after each prompt")["data"]
    assert [b["name"] for b in bars] == ["first", "second"]
    for title in ("logit(", "‖x‖ at the last token", "p(the guess", "first: where",
                  "second: where"):
        assert chart(at, title)
    assert query_param(at, "prompt2") == SECOND


def test_attribution_difference_adds_up_to_the_two_logits():
    at = open_page(PAGE, FIRST, prompt2=SECOND)
    token = int(query_param(at, "token"))
    expected = float(last_logits(FIRST)[token] - last_logits(SECOND)[token])
    bars = chart(at, "logit(")["data"][0]
    *parts, total = decode(bars["x"], float)  # a horizontal waterfall: values along x
    assert abs(sum(parts) - total) < 1e-3 and abs(total - expected) < 1e-3


def test_second_prompt_typed_and_restored_from_the_link():
    at = open_page(PAGE, FIRST)
    at.text_area(key="compare.prompt2").set_value("ROMEO:\nBut soft").run()
    assert_clean(at)
    assert query_param(at, "prompt2") == "ROMEO:\nBut soft"
    again = open_page(PAGE, FIRST, prompt2="ROMEO:\nBut soft")
    assert again.text_area(key="compare.prompt2").value == "ROMEO:\nBut soft"


def test_empty_second_prompt_asks_for_one():
    at = open_page(PAGE, FIRST, prompt2="")
    assert_clean(at)
    assert any("second prompt" in i.value for i in at.info)


def test_the_stages_are_tabs():
    """One part at a time (issue 49: the page ran to ~5,900 px on a projector)."""
    at = open_page(PAGE, FIRST, prompt2=SECOND)
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["1. Next-token distributions",
                                          "2. The logit's difference", "3. Lengths",
                                          "4. Logit lens", "5. One head"]
