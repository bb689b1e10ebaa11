"""The Interventions page: the patching grid only on the button, its cells the model's own
patched runs, ablation and steering changing the guess, and plain messages for prompts that
cannot be patched (empty, 8,000 characters, unequal lengths)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    chart,
    charts,
    decode,
    open_page,
    widget,
)
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/11_Interventions.py"
CLEAN, CORRUPT = "ROMEO:\nBut soft, what light", "ROMEO:\nBut hard, what light"


def _same_length_pair():
    _, tok = load(TINY)
    clean, corrupt = tok.encode(CLEAN), tok.encode(CORRUPT)
    assert len(clean) == len(corrupt), "the test's prompts must have as many tokens"
    return np.array(clean), np.array(corrupt)


def test_the_grid_waits_for_the_button_then_matches_the_api():
    model, _ = load(TINY)
    clean, corrupt = _same_length_pair()
    at = open_page(PAGE, NORMAL)
    widget(at.text_area, "Clean prompt").set_value(CLEAN).run()
    widget(at.text_area, "Corrupted prompt").set_value(CORRUPT).run()
    assert_clean(at)
    assert not [c for c in charts(at) if "brings back" in str(c)]  # not on opening
    answer = widget(at.selectbox, "Answer token").value
    at.button(key="interventions.run").click().run()
    assert_clean(at)
    z = decode(chart(at, "brings back")["data"][0]["z"]).astype(float)
    expected = ti.activation_patching(model, clean, corrupt, answer, max_positions=16)
    assert len(expected.positions) == 16  # the tiny model: the whole prompt
    cols = expected.positions
    np.testing.assert_allclose(z, expected.recovered[:, cols], atol=1e-5, equal_nan=True)
    # choosing a cell shows the three runs
    widget(at.selectbox, "Block of the cell").set_value(1).run()
    assert_clean(at)
    fig = chart(at, "patched at block 1")
    assert [d["name"] for d in fig["data"]] == ["clean", "corrupted", "patched"]


@pytest.mark.parametrize("text, message", [
    ("", "Type both prompts"),
    ("x " * 4000, "at most 64"),
    ("ROMEO: a much longer prompt than the other one", "same number of tokens"),
])
def test_prompts_that_cannot_be_patched_get_a_plain_message(text, message):
    at = open_page(PAGE, NORMAL)
    widget(at.text_area, "Corrupted prompt").set_value(text).run()
    assert_clean(at)
    shown = [m.value for m in (*at.info, *at.warning)]
    assert any(message in m for m in shown), shown
    assert not [b for b in at.button if b.key == "interventions.run"]  # no grid to run


def test_ablation_changes_the_guess_as_the_api_does():
    model, tok = load(TINY)
    at = open_page(PAGE, NORMAL)
    widget(at.radio, "Experiment").set_value("Ablation").run()
    widget(at.multiselect, "Heads to ablate").set_value([(0, 0), (0, 1), (1, 2)]).run()
    assert_clean(at)
    fig = chart(at, "normal and ablated")
    normal, ablated = decode(fig["data"][0]["y"]), decode(fig["data"][1]["y"])
    assert not np.allclose(normal, ablated)
    ids = np.array(tok.encode(NORMAL))
    p = ti.probabilities(ti.ablated_logits(model, ids, heads=[(0, 0), (0, 1), (1, 2)]))
    assert ablated.max() == pytest.approx(np.sort(p)[::-1][:len(ablated)].max(), rel=1e-4)
    widget(at.toggle, "Mean instead of zero").set_value(True).run()
    assert_clean(at)


def test_steering_changes_distribution_and_continuation():
    at = open_page(PAGE, NORMAL)
    widget(at.radio, "Experiment").set_value("Steering").run()
    widget(at.slider, "Coefficient").set_value(10.0).run()
    assert_clean(at)
    fig = chart(at, "normal and steered")
    assert not np.allclose(decode(fig["data"][0]["y"]), decode(fig["data"][1]["y"]))
    lines = [m.value for m in at.markdown if "Greedy continuation" in m.value]
    assert len(lines) == 2
    widget(at.text_area, "Prompt A").set_value("").run()
    assert_clean(at)
    assert any("Type both prompts" in m.value for m in at.info)
