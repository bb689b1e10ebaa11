"""Charts of charts/neurons.py, drawn from the fixture model's own neuron effects."""

from __future__ import annotations

import numpy as np

from tinygpt.readouts.attribution import neuron_effects, neuron_token_effects
from tinygpt.readouts.neurons import neuron_activations, pushed_tokens, top_neurons
from tinygpt_app.charts import neurons as charts


def test_top_neurons_bars_are_effects_and_activations(run):
    position = len(run.ids) - 1
    token = int(np.argmax(run.logits[position]))
    effects = neuron_effects(run.model, run.ids, position, 1, token, trace=run.trace)
    top = top_neurons(effects, 6)
    fig = charts.top_neurons([f"n{j}" for j in top], effects.activations[top],
                             effects.effects[top], "t")
    np.testing.assert_allclose(fig.data[0].y, effects.effects[top])
    np.testing.assert_allclose(fig.data[1].y, effects.activations[top], rtol=1e-6)
    assert fig.data[1].yaxis == "y2" and list(fig.data[0].x) == [f"n{j}" for j in top]
    # the largest bar is the largest |effect| of the block
    assert abs(fig.data[0].y[0]) == np.abs(effects.effects).max()


def test_activation_over_positions_highlights_the_inspected_token(run):
    acts = neuron_activations(run.trace, 0, 3)
    fig = charts.activation_over_positions(acts, run.labels, 2, "t")
    np.testing.assert_allclose(fig.data[0].y, acts, rtol=1e-6)
    colours = fig.data[0].marker.color
    assert len(set(colours)) == 2 and colours[2] != colours[0]


def test_pushed_tokens_up_first_then_down(run):
    values = neuron_token_effects(run.model, run.ids, 1, 0, 5, trace=run.trace)
    up, down = pushed_tokens(values, 4)
    fig = charts.pushed_tokens([str(t) for t in up], values[up], [str(t) for t in down],
                               values[down], "t")
    x = np.asarray(fig.data[0].x)
    assert x[0] == values.max() and x[-1] == values.min()
    assert list(fig.layout.yaxis.ticktext) == [str(t) for t in (*up, *down[::-1])]


def test_top_neurons_axes_share_their_zero(run):
    fig = charts.top_neurons(["n0", "n1"], np.array([3.0, -0.5]), np.array([0.2, -0.1]), "t")
    lo, hi = fig.layout.yaxis.range
    lo2, hi2 = fig.layout.yaxis2.range
    assert lo == -hi and lo2 == -hi2 and hi >= 0.2 and hi2 >= 3.0


def test_gate_and_up_bars_are_swiglus_parts():
    from tests.tinygpt.readouts.modern_models import LLAMA, prompt, random_model
    from tinygpt.readouts.modern.swiglu import swiglu_parts, top_products

    model = random_model(LLAMA)
    _, trace = model.run_with_trace(prompt())
    parts = swiglu_parts(model, trace, 1, 4)
    top = top_products(parts, 5)
    fig = charts.gate_and_up([f"n{j}" for j in top], parts.gate_silu[top], parts.up[top],
                             parts.product[top], "t")
    gate, up, product = (np.asarray(d.y) for d in fig.data)
    np.testing.assert_allclose(gate * up, product, rtol=1e-10)
    np.testing.assert_allclose(product, trace["blocks.1.ffn.post"][4, top])


def test_the_highlighted_bar_is_named(run):
    """The orange bar was unlabelled (issue 25): an arrow onto it names the inspected token,
    and the axis keeps room for the arrow's text on the side the bar points to."""
    acts = np.array([0.5, -0.2, 1.0, 0.1])
    labels = ["a", "<b>", "c", "d"]
    for position in (1, 2):
        fig = charts.activation_over_positions(acts, labels, position, "t")
        (mark,) = fig.layout.annotations
        assert (mark.x, mark.y) == (position, acts[position]) and mark.showarrow
        assert mark.text == "inspected: " + ("&lt;b&gt;" if position == 1 else "c")
        lo, hi = fig.layout.yaxis.range
        assert lo <= acts.min() and hi >= acts.max()
        if acts[position] < 0:
            assert mark.ay > 0 and lo < acts.min()
        else:
            assert mark.ay < 0 and hi > acts.max()
