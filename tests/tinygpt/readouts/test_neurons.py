"""Neuron readouts: activations are the trace's, the top neurons are the largest |effects|,
and the pushed tokens are the extremes of neuron_token_effects."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core_support import TINY
from tinygpt.checkpoint.files import load
from tinygpt.readouts.attribution import neuron_effects, neuron_token_effects
from tinygpt.readouts.neurons import neuron_activations, pushed_tokens, top_neurons


@pytest.fixture(scope="module")
def run():
    model, tok = load(TINY)
    ids = np.array(tok.encode("ROMEO:\nBut soft, what light"))
    _, trace = model.run_with_trace(ids)
    return model, ids, trace


def test_activations_are_the_ffn_post_column(run):
    model, ids, trace = run
    post = trace["blocks.1.ffn.post"]
    acts = neuron_activations(trace, 1, 7)
    assert acts.shape == (len(ids),)
    np.testing.assert_array_equal(acts, post[:, 7])
    effects = neuron_effects(model, ids, 3, 1, 5, trace=trace)
    assert acts[3] == effects.activations[7]
    with pytest.raises(ValueError):
        neuron_activations(trace, 1, post.shape[1])


def test_top_neurons_are_the_largest_absolute_effects(run):
    model, ids, trace = run
    effects = neuron_effects(model, ids, len(ids) - 1, 0, 3, trace=trace)
    top = top_neurons(effects, 5)
    brute = sorted(range(len(effects.effects)), key=lambda j: -abs(effects.effects[j]))[:5]
    assert list(top) == brute
    assert len(top_neurons(effects, 10**6)) == len(effects.effects)


def test_pushed_tokens_are_the_extremes(run):
    model, ids, trace = run
    values = neuron_token_effects(model, ids, 2, 1, 4, trace=trace)
    up, down = pushed_tokens(values, 3)
    assert values[up[0]] == values.max() and values[down[0]] == values.min()
    assert list(values[up]) == sorted(values[up], reverse=True)
    assert list(values[down]) == sorted(values[down])
