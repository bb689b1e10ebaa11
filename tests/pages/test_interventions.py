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
    query_param,
    widget,
)
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/11_Interventions.py"
TOP = 5
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
    widget(at.multiselect, "Heads to ablate").set_value(["0.0", "0.1", "1.2"]).run()
    assert_clean(at)
    fig = chart(at, "normal and ablated")
    normal, ablated = decode(fig["data"][0]["y"]), decode(fig["data"][1]["y"])
    assert not np.allclose(normal, ablated)
    ids = np.array(tok.encode(NORMAL))
    p = ti.probabilities(ti.ablated_logits(model, ids, heads=[(0, 0), (0, 1), (1, 2)]))
    assert ablated.max() == pytest.approx(np.sort(p)[::-1][:len(ablated)].max(), rel=1e-4)
    widget(at.toggle, "Mean instead of zero").set_value(True).run()
    assert_clean(at)


def _top(row, k: int = TOP) -> list[int]:
    return [int(t) for t in ti.top_k(row, k)[0]]


def test_a_link_opens_the_ablation_it_names():
    """?heads=&neurons=&mean= (what a class shares): the page ablates them, and its chart is
    the model's own ablated run, whose top tokens differ from the normal run's."""
    model, tok = load(TINY)
    ids = np.array(tok.encode(NORMAL))
    heads, neurons = [(0, 0), (1, 1)], [(1, 5)]
    at = open_page(PAGE, NORMAL, experiment="Ablation", heads="0.0,1.1", neurons="1.5",
                   mean="0")
    assert_clean(at)
    assert not at.warning
    assert widget(at.multiselect, "Heads to ablate").value == ["0.0", "1.1"]
    assert widget(at.multiselect, "Neurons to ablate").value == ["1.5"]
    assert widget(at.toggle, "Mean instead of zero").value is False
    normal = ti.probabilities(ti.ablated_logits(model, ids, heads=[], neurons=[]))
    p = ti.probabilities(ti.ablated_logits(model, ids, heads=heads, neurons=neurons))
    assert _top(p) != _top(normal)  # the ablation reorders the model's guesses
    fig = chart(at, "normal and ablated")
    shown = {name: decode(d["y"]) for name, d in zip(("normal", "ablated"), fig["data"],
                                                       strict=True)}
    np.testing.assert_allclose(np.sort(shown["ablated"])[::-1][:TOP], np.sort(p)[::-1][:TOP],
                               rtol=1e-4)
    np.testing.assert_allclose(np.sort(shown["normal"])[::-1][:TOP],
                               np.sort(normal)[::-1][:TOP], rtol=1e-4)
    assert "(2 heads, 1 neurons)" in str(fig["layout"]["title"])
    # the mean toggle travels too, and changes the numbers
    at = open_page(PAGE, NORMAL, experiment="Ablation", heads="0.0,1.1", neurons="1.5",
                   mean="1")
    assert widget(at.toggle, "Mean instead of zero").value is True
    p_mean = ti.probabilities(ti.ablated_logits(model, ids, heads=heads, neurons=neurons,
                                                mean=True))
    ablated = decode(chart(at, "normal and ablated")["data"][1]["y"])
    np.testing.assert_allclose(np.sort(ablated)[::-1][:TOP], np.sort(p_mean)[::-1][:TOP],
                               rtol=1e-4)


@pytest.mark.parametrize(("name", "raw", "kept", "said"), [
    ("heads", "0.1,99.99", ["0.1"], "1 entry outside blocks 0 … 1, heads 0 … 3"),
    ("heads", "x,,0.4,-1.0,1.3,1.3", ["1.3"], "4 entries outside"),
    ("heads", ",".join(["0.0"] * 40), ["0.0"], "more than 32 entries"),
    ("neurons", "1.5,2.0,1.999999999", ["1.5"], "2 entries outside blocks 0 … 1, neurons"),
    ("mean", "maybe", False, "is not 1 or 0"),
])
def test_a_hostile_ablation_link_keeps_what_fits_and_says_so(name, raw, kept, said):
    at = open_page(PAGE, NORMAL, experiment="Ablation", **{name: raw})
    assert_clean(at)
    value = at.session_state[f"control.{name}"]
    assert value == kept
    warnings = [w.value.replace("\\", "") for w in at.warning if name in w.value]
    assert len(warnings) == 1 and said in warnings[0], warnings
    assert raw not in warnings[0]  # a link's text is never repeated
    assert query_param(at, name) == ("0" if kept is False else ",".join(kept))
    at.run()
    assert_clean(at)  # said again on the visit's later runs (kit.link_notes), once each
    assert [w.value.replace("\\", "") for w in at.warning if name in w.value] == warnings


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
