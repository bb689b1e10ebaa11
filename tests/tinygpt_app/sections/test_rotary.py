"""The Rotary positions section of the Attention page, on a random Llama-shaped folder: its
charts hold the folder's own q and k (loaded and traced apart from the app), the live shift
check passes and follows its control; on a learned-position model it draws nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
pytest.importorskip("safetensors.numpy", reason="the folders are written with safetensors")

from tests.apptest_support import (  # noqa: E402
    assert_clean,
    chart,
    charts,
    decode,
    markup_left,
    open_page,
)
from tests.pages.modern_folders import PROMPT, choose, traced  # noqa: E402
from tinygpt.readouts.modern import rotary as ro  # noqa: E402

PAGE = "pages/4_Attention.py"
POSITION = 6


def opened(name: str, **params):
    return choose(open_page(PAGE, PROMPT, pos=str(POSITION), **params), name)


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_the_pair_drawn_is_the_models_own(modern_models, name):
    at = opened(name)
    assert_clean(at)
    model, _, trace = traced(modern_models, name)
    at.selectbox(key="attention.rope_pair").set_value(2).run()
    at.selectbox(key="attention.head").set_value(3).run()
    assert_clean(at)
    pair = ro.rotary_pair(model, trace, 0, 3, 2)
    spec = chart(at, "Pair 2, head 3, block 0")
    keys = next(d for d in spec["data"] if d.get("name") == "k after its turn")
    np.testing.assert_allclose(decode(keys["x"], float), pair.k_rot[: POSITION + 1, 0],
                               rtol=1e-6)
    turned = next(d for d in spec["data"] if d.get("name") == "q after the turn")
    np.testing.assert_allclose(decode(turned["y"], float)[1], pair.q_rot[POSITION, 1], rtol=1e-6)


def test_the_shift_check_passes_for_every_shift_asked(modern_models):
    at = opened("llama")
    assert at.success and "Unchanged, to float rounding" in at.success[0].value
    for shift in (1, 37, 128):
        at.number_input(key="attention.rope_shift").set_value(shift).run()
        assert_clean(at)
        assert at.success and not at.warning
        change = next(m for m in at.metric if m.label == "largest change of a score")
        assert float(change.value) < 1e-4


def test_no_rope_scores_are_plain_products(modern_models):
    at = opened("llama")
    model, _, trace = traced(modern_models, "llama")
    spec = chart(at, "The scores of")
    q = trace["blocks.0.attn.q"][0, POSITION]
    k = trace["blocks.0.attn.k"][0, : POSITION + 1]
    np.testing.assert_allclose(decode(spec["data"][1]["y"], float), k @ q / np.sqrt(len(q)),
                               rtol=1e-5)
    np.testing.assert_allclose(decode(spec["data"][0]["y"], float),
                               trace["blocks.0.attn.scores"][0, POSITION, : POSITION + 1],
                               rtol=1e-6)


def test_a_learned_position_model_gets_words_not_charts(modern_models):
    """One line, no section: it says what the model does instead, and names the model of the
    folder whose card says it has rotary positions (none: how to fetch one)."""
    at = open_page(PAGE, PROMPT)
    assert_clean(at)
    said = [m.value.replace("\\", "") for m in at.markdown]
    said = [m for m in said if "Rotary positions (RoPE)" in m]
    assert len(said) == 1 and "not in this model" in said[0] and "tinygpt.models get" in said[0]
    assert not [h for h in at.header if "RoPE" in h.value]
    assert not [c for c in charts(at) if "RoPE" in str(c["layout"].get("title"))]
    card = modern_models / "llama.card.json"
    card.write_text(json.dumps({"config": {"position": "rope", "n_head": 4, "n_kv_head": 2}}))
    try:
        at = open_page(PAGE, PROMPT)
    finally:
        card.unlink()
    said = [m.value.replace("\\", "") for m in at.markdown]
    said = [m for m in said if "Rotary positions (RoPE)" in m]
    assert "*llama* has them: choose one in the sidebar's Model list" in said[0]


def test_token_labels_open_no_math_or_code(modern_models):
    """`?prompt=x $y$ z&pos=2` put "$" labels in the section's markdown: a math span opened
    across them (and a backtick a code span). Every label is escaped now."""
    at = choose(open_page(PAGE, "x $y$ z `c` ![i](http://e.vl/a.png) w", pos="2"), "llama")
    assert_clean(at)
    assert any("RoPE" in h.value for h in at.header)
    assert markup_left(at) == []


def test_a_turning_speed_of_one_is_one_radian():
    from tinygpt_app.sections.rotary import per_position

    assert per_position(1.0) == "1 radian per position"
    assert per_position(0.31622) == "0.316 radians per position"
