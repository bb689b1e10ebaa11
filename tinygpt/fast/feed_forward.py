"""The feed-forward's neurons read in part: one position's neurons, or one neuron along the
prompt, from the block's stored residual after attention (blocks.i.resid_attn, which a Trace
keeps), without running the block's attention again. The same numbers as the block's forward
records (blocks.i.ffn.post), to float rounding (tests/tinygpt/fast/test_feed_forward.py).

On GPT-2 small at 200 tokens, reading ffn.post from a lean trace re-runs the whole block
(attention over every position, both feed-forward products: ~1/12 of the forward); one
position's neurons are one (C, I) product of one row, one neuron along the prompt a (T, C)
by (C,) product.
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.functional import gelu_forward, linear, silu_forward
from tinygpt.network.layers import TransformerBlock
from tinygpt.network.mlp import SwiGLU
from tinygpt.network.trace import Trace


def neurons_of(block: TransformerBlock, x: np.ndarray, neuron: int | None = None) -> np.ndarray:
    """The neurons (..., I) of the block's feed-forward for its residual after attention x
    (B, T, C): ln2, then the first half of the feed-forward (GELU of the up projection, or
    SiLU(gate) * up). With `neuron`, that neuron alone: (B, T)."""
    h = block.ln2.forward(x)  # (B, T, C), each row alone
    ffn = block.ffn
    cols = slice(None) if neuron is None else slice(neuron, neuron + 1)
    if isinstance(ffn, SwiGLU):
        gate = linear(h, ffn.W_gate[:, cols], _part(ffn.b_gate, cols))  # (B, T, I or 1)
        up = linear(h, ffn.W_up[:, cols], _part(ffn.b_up, cols))
        post = silu_forward(gate)[0] * up  # as the traced forward makes it
    else:
        pre = linear(h, ffn.W1[:, cols], _part(ffn.b1, cols))  # (B, T, I or 1)
        post = gelu_forward(pre, approximate=ffn.approximate)[0]
    return post if neuron is None else post[..., 0]


def _part(bias: np.ndarray | None, cols: slice) -> np.ndarray | None:
    return None if bias is None else bias[cols]


# ----------------------------------------------------------------------------- on a trace


def trace_neurons_at(trace: Trace, layer: int, position: int) -> np.ndarray:
    """trace["blocks.<layer>.ffn.post"][position] (I,): without interventions, from the
    stored residual after attention at that one position (the part the trace kept last, if it
    is this block, is read as it is)."""
    name = f"blocks.{layer}.ffn.post"
    if not _lean(trace):
        return trace[name][position]
    kept = trace.kept_part(f"blocks.{layer}")
    if kept is not None:
        return kept[name][position]
    x = trace[f"blocks.{layer}.resid_attn"][None, position:position + 1]  # (1, 1, C) stored
    return neurons_of(trace.model.blocks[layer], x)[0, 0]


def trace_neuron_along(trace: Trace, layer: int, neuron: int) -> np.ndarray:
    """trace["blocks.<layer>.ffn.post"][:, neuron] (T,): without interventions, one column of
    the feed-forward's up projection over the stored residual after attention."""
    name = f"blocks.{layer}.ffn.post"
    if not _lean(trace):
        return trace[name][:, neuron]
    kept = trace.kept_part(f"blocks.{layer}")
    if kept is not None:
        return kept[name][:, neuron]
    x = trace[f"blocks.{layer}.resid_attn"][None]  # (1, T, C) stored
    return neurons_of(trace.model.blocks[layer], x, neuron)[0]


def _lean(trace) -> bool:
    """A Trace without interventions: its neurons can be read off its stored residual (any
    other mapping of trace names, or a forward with edits, is read as it is)."""
    return isinstance(trace, Trace) and not trace.interventions.active
