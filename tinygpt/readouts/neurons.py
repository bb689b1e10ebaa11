"""Readouts for the feed-forward neurons: which ones matter at a position, how one neuron
fires along the prompt, and which tokens its output pushes up and down.

The effects themselves come from tinygpt.readouts.attribution (neuron_effects,
neuron_token_effects);
these helpers only pick and slice, so the numbers a page shows are exactly those.
"""

from __future__ import annotations

import numpy as np

from tinygpt.fast.feed_forward import trace_neuron_along
from tinygpt.network.trace import Trace
from tinygpt.readouts.attribution import NeuronEffects


def neuron_activations(trace, layer: int, neuron: int) -> np.ndarray:
    """Neuron `neuron` of block `layer` after GELU at every position: (T,) from the trace
    (a lean trace's residual after attention, not the whole block again: fast.feed_forward)."""
    layer, neuron = int(layer), int(neuron)
    inner = (trace.model.config.inner_dim if isinstance(trace, Trace)
             else trace[f"blocks.{layer}.ffn.post"].shape[-1])  # (T, 4C)
    if not 0 <= neuron < inner:
        raise ValueError(f"neuron must be in 0..{inner - 1}, got {neuron!r}")
    return np.array(trace_neuron_along(trace, layer, neuron))  # a copy: the trace is shared


def top_neurons(effects: NeuronEffects, k: int) -> np.ndarray:
    """The k neurons with the largest |direct effect| on the logit, largest first: (k,)."""
    k = max(0, min(int(k), len(effects.effects)))
    order = np.argsort(-np.abs(effects.effects), kind="stable")  # ties: lower index first
    return order[:k]


def pushed_tokens(token_effects: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(up, down): the k tokens a neuron pushes up most (largest first) and down most.

    token_effects (V,) is neuron_token_effects's output.
    """
    k = max(0, min(int(k), len(token_effects)))
    order = np.argsort(-token_effects, kind="stable")  # (V,) largest effect first
    return order[:k], order[::-1][:k]
