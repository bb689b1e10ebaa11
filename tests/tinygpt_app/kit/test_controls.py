"""The page controls' declarations: the parsers keep their ranges, a model-bound top is given
where the model is known, and the Sampling and Decoding pages read these declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinygpt_app.kit import controls

ROOT = Path(__file__).resolve().parents[3]


def test_a_fixed_range_is_checked():
    parse = controls.TOP_P.parse()
    assert parse("0.5") == 0.5 and parse(1) == 1.0
    with pytest.raises(ValueError, match="outside 0.01 … 1"):
        parse(1.5)


def test_a_model_bound_top_is_given_by_the_caller():
    assert controls.TOP_K.parse()(100_000) == 100_000  # unknown model: no top checked
    with pytest.raises(ValueError):
        controls.TOP_K.parse(4096)(4097)
    with pytest.raises(ValueError, match="whole number"):
        controls.TOP_K.parse(4096)(2.5)


def test_a_choice_and_the_words_for_each_range():
    assert controls.STRATEGY.parse()("greedy") == "greedy"
    with pytest.raises(ValueError):
        controls.STRATEGY.parse()("beam")
    assert controls.TEMPERATURE.describe() == "a number from 0 to 3"
    assert controls.TOP_K.describe().startswith("a whole number from 0 to the model's")
    assert set(controls.CONTROLS) >= {"temperature", "top_k", "top_p", "seed"}


@pytest.mark.parametrize("page", ["Softmax_and_sampling.py", "Decoding.py"])
def test_the_pages_read_these_declarations(page):
    (path,) = [p for p in ROOT.glob("pages/**/*.py") if p.name.split("_", 1)[1] == page]
    text = path.read_text(encoding="utf-8")
    for spec in ("TEMPERATURE", "TOP_K", "TOP_P", "SEED"):
        assert f"{spec}.parse(" in text
    assert "in_range(0.0, 3.0)" not in text and "in_range(0.01, 1.0)" not in text
