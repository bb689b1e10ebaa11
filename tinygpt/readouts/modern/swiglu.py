"""SwiGLU taken apart for one token (Llama, Qwen2): the gate after SiLU, the up projection,
their product (the neurons) and what the down projection writes into the residual stream.

    gate = x W_gate,  up = x W_up,  neuron_n = SiLU(gate_n) · up_n,  out = Σ_n neuron_n W_down[n]

x is the token's vector after the block's second RMSNorm. The gate, the up projection and the
product come from the trace (ffn.gate, ffn.up, ffn.post: the model's own); SiLU of the gate
and the rows of W_down are read here. `written` sums the neurons' writes: it equals the
trace's ffn.output up to float rounding (`difference` says by how much).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.network.functional import silu_forward
from tinygpt.network.mlp import SwiGLU
from tinygpt.network.model import GPT
from tinygpt.network.trace import Trace


@dataclass(frozen=True)
class SwiGLUParts:
    """One token's feed-forward in block `layer`, part by part. I = config.inner_dim."""

    layer: int
    position: int
    gate: np.ndarray  # (I,) x W_gate (+ b_gate), before SiLU
    gate_silu: np.ndarray  # (I,) SiLU(gate) = gate · sigmoid(gate): how much of up passes
    up: np.ndarray  # (I,) x W_up (+ b_up)
    product: np.ndarray  # (I,) SiLU(gate) · up: the neurons (the trace's ffn.post)
    written: np.ndarray  # (C,) Σ_n product_n W_down[n] (+ b_down): what goes into the stream
    output: np.ndarray  # (C,) the trace's ffn.output, the model's own
    difference: float  # largest |written - output|: float rounding, nothing more


def swiglu_parts(model: GPT, trace: Trace, layer: int, position: int) -> SwiGLUParts:
    """The gate, up, product and write of block `layer` at `position`, from the trace."""
    ffn = model.blocks[int(layer)].ffn
    if not isinstance(ffn, SwiGLU):
        raise ValueError("this model's feed-forward is GPT-2's GELU MLP: it has no gate")
    p, t = f"blocks.{int(layer)}.ffn", int(position)
    gate = np.array(trace[f"{p}.gate"][t])  # (I,)
    product = np.array(trace[f"{p}.post"][t])  # (I,)
    W_down = ffn.W_down.astype(np.float64)  # (I, C): row n is what neuron n writes per unit
    written = product.astype(np.float64) @ W_down  # (C,)
    if ffn.b_down is not None:
        written += ffn.b_down
    output = np.array(trace[f"{p}.output"][t])  # (C,)
    return SwiGLUParts(layer=int(layer), position=t, gate=gate, gate_silu=silu_forward(gate)[0],
                       up=np.array(trace[f"{p}.up"][t]), product=product, written=written,
                       output=output, difference=float(np.abs(written - output).max()))


def top_products(parts: SwiGLUParts, k: int) -> np.ndarray:
    """The k neurons with the largest |SiLU(gate) · up|, largest first (ties: lower index)."""
    k = max(0, min(int(k), len(parts.product)))
    return np.argsort(-np.abs(parts.product), kind="stable")[:k]
