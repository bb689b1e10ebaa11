"""RMSNorm taken apart (Llama, Qwen2): each token's root mean square, the learned scale γ, and
what LayerNorm would have done to the same vector (the mean it would have removed).

RMSNorm divides a token's vector x (d numbers) by its root mean square and scales it by γ:

    rms = sqrt(mean(x²) + ε),   x̂ = x / rms,   y = γ · x̂          (no mean removed, no β)

LayerNorm (GPT-2) would first subtract the mean μ and divide by the standard deviation. The
two agree when μ = 0; the further μ is from 0, the more they differ. The RMS comes from the
trace (`.rms`, what the model divided by); the LayerNorm numbers are computed here, on the
same input, and are nobody's forward: a comparison, not the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.network.model import GPT
from tinygpt.network.norms import RMSNorm
from tinygpt.network.trace import Trace
from tinygpt.readouts.forward_pass import find_layer_norm


@dataclass(frozen=True)
class RMSNormStatistics:
    """What one RMSNorm computed for every token, and what LayerNorm would have. (T,) arrays."""

    name: str
    rms: np.ndarray  # sqrt(mean(x²) + ε): what the model divided each vector by (the trace's)
    mean_square: np.ndarray  # mean(x²): the RMS before ε and the root
    eps: float
    gamma: np.ndarray  # (C,) the learned scale; there is no shift
    mean: np.ndarray  # μ: the mean LayerNorm would have removed (RMSNorm keeps it)
    layer_norm_denominator: np.ndarray  # sqrt(var + ε): LayerNorm's divisor for the same x


def rms_norm_statistics(model: GPT, trace: Trace, name: str) -> RMSNormStatistics:
    """The statistics of RMSNorm `name` ("blocks.0.ln1", ..., "ln_f") in this trace."""
    norm = find_layer_norm(model, name)
    if not isinstance(norm, RMSNorm):
        raise ValueError(f"{name} is a LayerNorm: use layer_norm_statistics")
    x = trace[f"{name}.input"].astype(np.float64)  # (T, C)
    mean = x.mean(axis=-1)  # (T,)
    var = ((x - mean[:, None]) ** 2).mean(axis=-1)  # (T,) biased, as LayerNorm's
    return RMSNormStatistics(
        name=name,
        rms=trace[f"{name}.rms"].astype(np.float64),
        mean_square=(x * x).mean(axis=-1),
        eps=float(norm.eps),
        gamma=norm.gamma,
        mean=mean,
        layer_norm_denominator=np.sqrt(var + norm.eps),
    )


def layer_norm_instead(x: np.ndarray, eps: float) -> np.ndarray:
    """What LayerNorm (before its γ and β) would make of one vector x (C,): (x − μ) / √(σ² + ε).

    Beside RMSNorm's x / rms, it shows the one thing RMSNorm leaves out: the mean."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean()  # (C,)
    return centred / np.sqrt((centred * centred).mean() + eps)
