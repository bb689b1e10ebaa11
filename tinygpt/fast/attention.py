"""Attention read in part: one position's heads, and the weights alone, for less than the
block's whole forward. Each gives the numbers Attention.forward (through a Trace) gives, bit
for bit or to float rounding (tests/tinygpt/fast/test_attention.py, and on whole models
tests/tinygpt/network/test_trace.py).
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.attention import Attention, attend, scaled_scores, weigh
from tinygpt.network.trace import Trace


def weights_of(attn: Attention, h: np.ndarray) -> np.ndarray:
    """The causal attention weights (B, H, T, T) of the normalized input h (B, T, C): the same
    products and softmax as Attention.forward makes them, without the values, the heads'
    outputs and the projection."""
    _, _, _, q, k = attn.heads_of(h)
    return weigh(scaled_scores(q, k), True, 0, copy=False)


# ----------------------------------------------------------------------------- on a trace


def trace_heads_at(trace: Trace, layer: int, position: int) -> np.ndarray:
    """trace["blocks.<layer>.attn.heads"][:, position] (H, hs): without interventions, one
    query (its row of the block's stored input through ln1) against the layer's keys and
    values of the whole prompt, computed once per layer and kept (keys_values): moving to
    another position costs one query per layer, not the keys and values of every earlier one."""
    if trace.interventions.active:
        return trace[f"blocks.{layer}.attn.heads"][:, position]
    block = trace.model.blocks[layer]
    k, v = keys_values(trace, layer)  # (1, KV, T, hs) each
    x = trace.block_input(layer)
    h = block.ln1.forward(x[None, position:position + 1])  # (1, 1, C): each row alone
    q = block.attn.heads_of(h, start=position)[3]  # (1, H, 1, hs), rotated for `position`
    end = position + 1
    return attend(q, k[:, :, :end], v[:, :, :end], start=position).heads[0, :, 0]


def keys_values(trace: Trace, layer: int) -> tuple[np.ndarray, np.ndarray]:
    """The keys (rotated, for a rotary model) and values (1, KV, T, hs) of block `layer`'s
    attention, without interventions: computed from the stored input once, then kept with the
    trace (2 T KV hs numbers a layer: GPT-2 small at 200 tokens, 15 MB for all 12)."""
    def make() -> tuple[np.ndarray, np.ndarray]:
        _, _, v, _, k = trace.model.blocks[layer].attn.heads_of(_attention_input(trace, layer))
        return k, v

    return trace.keep(("keys_values", layer), make)


def trace_attention_weights(trace: Trace, layer: int) -> np.ndarray:
    """trace["blocks.<layer>.attn.weights"] (H, T, T). Without interventions, from the block's
    stored input through ln1 and the scores only (weights_of): no values and no feed-forward,
    about a sixth of the block's work, and the part the trace kept last stays."""
    name = f"blocks.{layer}.attn.weights"
    if trace.interventions.active:
        return trace[name]
    kept = trace.kept_part(f"blocks.{layer}")
    if kept is not None:
        return kept[name]
    return weights_of(trace.model.blocks[layer].attn, _attention_input(trace, layer))[0]


def _attention_input(trace: Trace, layer: int) -> np.ndarray:
    """What block `layer`'s attention reads, (1, T, C): its stored input through ln1."""
    return trace.model.blocks[layer].ln1.forward(trace.block_input(layer)[None])
