"""Readouts for the feed-forward neurons: which ones matter at a position, how one neuron
fires along the prompt, and which tokens its output pushes up and down.

The effects themselves come from tinygpt.readouts.attribution (neuron_effects,
neuron_token_effects);
these helpers only pick and slice, so the numbers a page shows are exactly those.
"""

from __future__ import annotations

import numpy as np

from tinygpt.readouts.attribution import NeuronEffects


def neuron_activations(trace, layer: int, neuron: int) -> np.ndarray:
    """Neuron `neuron` of block `layer` after GELU at every position: (T,) from the trace."""
    post = trace[f"blocks.{int(layer)}.ffn.post"]  # (T, 4C)
    if not 0 <= int(neuron) < post.shape[-1]:
        raise ValueError(f"neuron must be in 0..{post.shape[-1] - 1}, got {neuron!r}")
    return np.array(post[:, int(neuron)])  # a copy: the trace may be shared and read-only


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
