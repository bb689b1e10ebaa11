"""tinygpt.fast.feed_forward: the neurons read off a lean trace's stored residual equal the
ones a separate full forward records (GELU MLP and SwiGLU), and the readouts that use them
(neuron effects, one neuron along the prompt) give the full forward's numbers."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig
from tinygpt.fast.feed_forward import neurons_of, trace_neuron_along, trace_neurons_at
from tinygpt.network.model import Interventions
from tinygpt.readouts.attribution import neuron_effects, neuron_token_effects
from tinygpt.readouts.neurons import neuron_activations

CONFIGS = {
    "gpt2": GPTConfig(vocab_size=61, n_ctx=32, n_embd=16, n_head=2, n_layer=2),
    "llama": GPTConfig(vocab_size=61, n_ctx=32, n_embd=16, n_head=4, n_layer=2,
                       norm="rmsnorm", position="rope", n_kv_head=2, mlp="swiglu", n_inner=24,
                       attn_bias=False, proj_bias=False, mlp_bias=False),
}


def full_forward_neurons(model: GPT, ids: np.ndarray) -> dict[int, np.ndarray]:
    """Each block's ffn.post (T, I) as a separate full forward records it, block by block."""
    record: dict = {}
    x = model.embedding.forward(ids[None])
    for i, block in enumerate(model.blocks):
        x = block.forward(x, index=i, trace=record)
    return {i: record[f"blocks.{i}.ffn.post"][0] for i in range(model.config.n_layer)}


@pytest.fixture(params=list(CONFIGS))
def run(request):
    model = GPT(CONFIGS[request.param], seed=3)
    if model.config.mlp == "gelu":  # non-zero biases: the shortcut must add them too
        for block in model.blocks:
            block.ffn.b1[:] = np.random.default_rng(1).standard_normal(block.ffn.b1.shape)
    ids = np.random.default_rng(2).integers(0, 61, 20)
    _, trace = model.run_with_trace(ids)
    return model, ids, trace, full_forward_neurons(model, ids)


def test_the_neurons_off_the_trace_equal_a_full_forwards(run):
    model, ids, trace, full = run
    for layer in range(model.config.n_layer):
        for position in (0, 7, len(ids) - 1):
            np.testing.assert_allclose(trace_neurons_at(trace, layer, position),
                                       full[layer][position], rtol=1e-5, atol=1e-6)
        for neuron in (0, model.config.inner_dim - 1):
            np.testing.assert_allclose(trace_neuron_along(trace, layer, neuron),
                                       full[layer][:, neuron], rtol=1e-5, atol=1e-6)
        resid = trace[f"blocks.{layer}.resid_attn"][None]
        np.testing.assert_allclose(neurons_of(model.blocks[layer], resid)[0], full[layer],
                                   rtol=1e-5, atol=1e-6)


def test_the_readouts_read_the_full_forwards_neurons(run):
    model, ids, trace, full = run
    layer, position = 1, 11
    effects = neuron_effects(model, ids, position, layer, 5, trace=trace)
    np.testing.assert_allclose(effects.activations, full[layer][position], rtol=1e-5,
                               atol=1e-6)
    neuron = int(np.argmax(np.abs(effects.effects)))
    np.testing.assert_allclose(neuron_activations(trace, layer, neuron),
                               full[layer][:, neuron], rtol=1e-5, atol=1e-6)
    dense = dict(trace.items())  # every name computed the readable way, block by block
    np.testing.assert_allclose(neuron_token_effects(model, ids, position, layer, neuron,
                                                    trace=trace),
                               neuron_token_effects(model, ids, position, layer, neuron,
                                                    trace=dense_trace(trace, dense)),
                               rtol=1e-5, atol=1e-7)


def dense_trace(trace, dense: dict):
    """A plain mapping of every trace name, with the trace's model (what the readouts read
    when they are handed a dict)."""
    class Dense(dict):
        model = trace.model
        interventions = trace.interventions
    return Dense(dense)


def test_a_trace_with_interventions_is_read_as_it_is():
    model = GPT(CONFIGS["gpt2"], seed=3)
    ids = np.arange(12) % 61
    _, trace = model.run_with_trace(ids, interventions=Interventions(skip_attn=frozenset({0})))
    np.testing.assert_array_equal(trace_neurons_at(trace, 1, 4),
                                  trace["blocks.1.ffn.post"][4])
    np.testing.assert_array_equal(trace_neuron_along(trace, 1, 3),
                                  trace["blocks.1.ffn.post"][:, 3])
