"""The page controls' declarations (kit.controls): every one parses its own default and
refuses what lies outside its range, a model-bound top is given where the model is known, the
lesson files may set those whose range is known without the page, and docs/lessons.md names
them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinygpt_app.kit import controls

ROOT = Path(__file__).resolve().parents[3]
SPECS = sorted(controls.SPECS.items())
PAGE_TOP = 200  # the top a page gives a control declared with hi=None (a model's last layer)


def page_parser(spec: controls.ControlSpec):
    """The parser as a page makes it: its top, its choices, its second bound."""
    choices = [spec.default] if spec.choice and spec.kind is not list else None
    if spec.kind is list and spec.choice:
        choices = ["a.npz", "b.npz"]
    return spec.parse(PAGE_TOP if spec.hi is None else None, choices=choices, per=4)


@pytest.mark.parametrize(("name", "spec"), SPECS)
def test_every_declaration_takes_its_default(name, spec):
    value = page_parser(spec)(spec.default)
    assert value == spec.default or (spec.kind is tuple and list(value) == list(spec.default))
    assert spec.describe() and name.isupper() and spec.name.isidentifier()


@pytest.mark.parametrize(("name", "spec"), SPECS)
def test_every_declaration_refuses_what_is_outside_its_range(name, spec):
    parse = page_parser(spec)
    top = spec.hi if spec.hi is not None else PAGE_TOP
    if spec.kind is bool:
        bad = ["maybe", "2", ""]
    elif spec.kind is tuple:
        bad = ["3,1", f"0,{top + 1}", "1", "a,b"]
    elif spec.kind is list:
        bad = ["nope", ",".join(str(i) for i in range(spec.cap + 1))] if not spec.item else \
            [f"{PAGE_TOP}.0", "0.4", "x"]
    elif spec.options or spec.choice:
        bad = ["not one of them", "999999"]
    elif spec.max_chars:  # a text is cut, not refused
        assert len(parse("x" * (spec.max_chars + 5))) == spec.max_chars
        return
    else:
        bad = [spec.lo - 1, top + 1, "inf", "1e309", "NaN", "٣"]
        if spec.kind is int:
            bad.append(spec.lo + 0.5)
    for value in bad:
        with pytest.raises(ValueError):
            parse(value)


def test_the_words_for_each_range():
    assert controls.TEMPERATURE.describe() == "a number from 0 to 3"
    assert controls.TOP_K.describe().startswith("a whole number from 0 to the model's")
    assert controls.NORM_VIEW.describe().startswith("one of 'heatmap")
    assert controls.MEAN.describe() == "on or off (true or false)"


def test_a_lesson_sets_what_a_file_can_be_checked_against():
    settable = controls.CONTROLS
    assert {"temperature", "top_k", "top_p", "seed", "logits_k", "norm_view", "mean",
            "no_causal_mask", "coefficient"} <= set(settable)
    assert not {"token", "heads", "models", "tree_window", "prompt2", "projector"} & set(settable)
    names = [spec.name for spec in controls.SPECS.values()]
    shared = {"layer", "head"}  # one name, one value, on several pages
    assert all(names.count(n) == 1 or n in shared for n in names)


def test_the_lesson_docs_name_every_control_a_lesson_sets():
    text = (ROOT / "docs" / "lessons.md").read_text(encoding="utf-8")
    for name in controls.CONTROLS:
        assert f"`{name}`" in text, name
