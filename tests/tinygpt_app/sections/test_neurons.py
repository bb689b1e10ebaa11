"""The Neurons section of the Residual stream page: its bars are tinygpt's neuron_effects,
activations and neuron_token_effects for the top token at the inspected position; the block
and neuron controls change them and live in the link."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    chart,
    decode,
    open_page,
    query_param,
    widget,
)
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.readouts.attribution import neuron_effects, neuron_token_effects  # noqa: E402
from tinygpt.readouts.neurons import pushed_tokens, top_neurons  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/5_Residual_stream.py"


def reference(layer: int):
    model, tok = load(TINY)
    ids = np.array(tok.encode(NORMAL))
    logits, trace = model.run_with_trace(ids)
    position = len(ids) - 1  # the page inspects the last token by default
    token = int(np.argmax(logits[position]))
    return model, ids, trace, position, neuron_effects(model, ids, position, layer, token,
                                                        trace=trace)


def test_neurons_section_shows_the_core_numbers():
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    model, ids, trace, position, effects = reference(layer=1)  # the default: the last block
    top = top_neurons(effects, 10)
    spec = chart(at, "neurons with the largest direct effect")
    np.testing.assert_allclose(decode(spec["data"][0]["y"], float), effects.effects[top],
                               rtol=1e-6)
    np.testing.assert_allclose(decode(spec["data"][1]["y"], float), effects.activations[top],
                               rtol=1e-6)
    neuron = int(top[0])
    acts = decode(chart(at, f"Neuron n{neuron} of block 1")["data"][0]["y"], float)
    # read off the stored residual (tinygpt.fast.feed_forward): float32 sums in another order
    np.testing.assert_allclose(acts, trace["blocks.1.ffn.post"][:, neuron], rtol=1e-5,
                               atol=1e-7)
    values = neuron_token_effects(model, ids, position, 1, neuron, trace=trace)
    up, down = pushed_tokens(values, 8)
    pushed = decode(chart(at, f"What n{neuron} writes")["data"][0]["x"], float)
    np.testing.assert_allclose(pushed, np.concatenate([values[up], values[down][::-1]]), rtol=1e-6)


def test_block_and_neuron_controls_change_the_charts_and_the_link():
    at = open_page(PAGE, NORMAL)
    widget(at.selectbox, "Block").set_value(0).run()
    assert_clean(at)
    assert query_param(at, "neuron_layer") == "0"
    _, _, _, _, effects = reference(layer=0)
    top = top_neurons(effects, 10)
    spec = chart(at, "Block 0: the 10")
    np.testing.assert_allclose(decode(spec["data"][0]["y"], float), effects.effects[top],
                               rtol=1e-6)
    widget(at.selectbox, "Neuron").set_value(int(top[2])).run()
    assert_clean(at)
    assert chart(at, f"Neuron n{int(top[2])} of block 0")
    assert query_param(at, "neuron") == str(int(top[2]))


def test_swiglu_parts_are_the_folders_own(modern_models):
    """On a Llama-shaped folder: the gate·up bars are the trace's neurons, and what the down
    projection writes is the block's feed-forward output."""
    from tests.apptest_support import chart as find_chart
    from tests.pages.modern_folders import PROMPT, choose, traced

    at = choose(open_page(PAGE, PROMPT, pos="3"), "llama")
    assert_clean(at)
    _, _, trace = traced(modern_models, "llama")
    spec = find_chart(at, "neurons by |SiLU(gate)·up|")
    names = spec["data"][2]["x"]
    product = decode(spec["data"][2]["y"], float)
    neurons = [int(n[1:]) for n in names]
    layer = int(query_param(at, "neuron_layer"))
    np.testing.assert_allclose(product, trace[f"blocks.{layer}.ffn.post"][3, neurons], rtol=1e-6)
    written = decode(find_chart(at, "What the down projection writes")["data"][0]["y"], float)
    np.testing.assert_allclose(written, trace[f"blocks.{layer}.ffn.output"][3], rtol=1e-4,
                               atol=1e-5)
