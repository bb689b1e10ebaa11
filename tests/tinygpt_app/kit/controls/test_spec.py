"""A control declared as data (kit.controls.spec.ControlSpec): a list keeps the entries that
fit, a span is two ends in order, a top the model bounds is the page's, and a page may lower a
declared top."""

from __future__ import annotations

import pytest

from tinygpt_app.kit import controls
from tinygpt_app.kit.controls.spec import ControlSpec
from tinygpt_app.kit.state import PartlyRefused


def test_a_list_keeps_what_fits():
    parse = controls.HEADS.parse(2, per=4)
    with pytest.raises(PartlyRefused, match="outside blocks 0 … 1, heads 0 … 3") as err:
        parse("0.1,7.0,1.3")
    assert err.value.kept == ["0.1", "1.3"]
    assert controls.pairs(["0.1", "1.3"]) == [(0, 1), (1, 3)]
    assert controls.SKIP_ATTN.parse(3)("0,2") == [0, 2]


def test_a_span_is_two_ends_in_order():
    parse = controls.STEPS_SHOWN.parse(30)
    assert parse("2,9") == (2, 9) and parse((0, 24)) == (0, 24) and parse("4,4") == (4, 4)


def test_a_model_bound_top_is_given_by_the_caller_and_a_page_may_lower_a_top():
    assert controls.TOP_K.parse()(100_000) == 100_000  # unknown model: no top checked
    with pytest.raises(ValueError):
        controls.TOP_K.parse(4096)(4097)
    with pytest.raises(ValueError, match="whole number"):
        controls.TOP_K.parse(4096)(2.5)
    assert controls.NEW.parse()(100) == 100
    with pytest.raises(ValueError):
        controls.NEW.parse(64)(65)  # Chat's answer: at most 64


def test_a_choice_is_among_what_the_page_offers():
    spec = ControlSpec("pick", int, 0, choice=True, bound="the offered tokens")
    assert spec.parse(choices=[3, 5])("5") == 5
    with pytest.raises(ValueError, match="not one of 3, 5"):
        spec.parse(choices=[3, 5])("4")
    assert not spec.settable and spec.describe() == "one of the offered tokens"
