"""Read-outs for the guided lesson: the one or two numbers each step of the tour states about
the student's own prompt ("the strongest look from *the* goes to *Juliet*, 0.42").

Everything takes a trace from `GPT.run_with_trace` (or its logits) and returns small
dataclasses; nothing here draws. Shapes: T tokens, C = embedding_dim, L = n_layer,
H = n_head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.network.trace import Trace
from tinygpt.readouts.forward_pass import (
    probabilities,
    residual_norms,
    sublayer_stages,
    sublayer_write_norms,
)


@dataclass(frozen=True)
class AttentionLook:
    """The strongest look of one query token at an earlier token, over every layer and head."""

    layer: int
    head: int
    key: int  # the key position looked at (the query itself when it is the first token)
    weight: float  # its attention weight, 0..1


def strongest_look(trace: Trace, n_layer: int, n_head: int, query: int) -> AttentionLook:
    """The (layer, head, key) with the largest weight from `query` to an earlier token.

    A token's look at itself is left out when there is an earlier token to look at (it says
    nothing about how tokens share information); the first token can only look at itself.
    """
    best = AttentionLook(0, 0, query, -1.0)
    for layer in range(n_layer):
        weights = trace[f"blocks.{layer}.attn.weights"][:, query, :]  # (H, T)
        earlier = weights[:, :query] if query > 0 else weights[:, :1]  # (H, keys)
        head, key = np.unravel_index(int(np.argmax(earlier)), earlier.shape)
        weight = float(earlier[head, key])
        if weight > best.weight:
            best = AttentionLook(layer, int(head), int(key), weight)
    return best


@dataclass(frozen=True)
class ResidualGrowth:
    """One token's residual vector down the model: its length after every stage, and the
    sublayer that wrote the most into it."""

    norms: np.ndarray  # (1 + 2L,) ||x|| after the embeddings, then after each sublayer
    writes: np.ndarray  # (2L,) ||what each sublayer added||
    write_labels: list[str]  # "attn 0", "ffn 0", ...
    biggest: int  # index into writes / write_labels of the largest write

    @property
    def first(self) -> float:
        return float(self.norms[0])

    @property
    def last(self) -> float:
        return float(self.norms[-1])


def residual_growth(trace: Trace, n_layer: int, position: int) -> ResidualGrowth:
    """The residual stream of the token at `position`, stage by stage."""
    norms = residual_norms(trace, n_layer)[:, position]  # (S,)
    writes = sublayer_write_norms(trace, n_layer)[:, position]  # (2L,)
    labels = [label for label, _ in sublayer_stages(n_layer)]
    return ResidualGrowth(norms=norms, writes=writes, write_labels=labels,
                          biggest=int(np.argmax(writes)))


@dataclass(frozen=True)
class LogitSpread:
    """One row of logits (V,) summed up: its highest and lowest score and their tokens."""

    top_token: int
    top: float
    bottom_token: int
    bottom: float
    mean: float


def logit_spread(row: np.ndarray) -> LogitSpread:
    """The extremes of one logits row (V,) (ties: the lowest id)."""
    row = np.asarray(row, dtype=np.float64)
    hi, lo = int(np.argmax(row)), int(np.argmin(row))
    return LogitSpread(top_token=hi, top=float(row[hi]), bottom_token=lo, bottom=float(row[lo]),
                       mean=float(row.mean()))


@dataclass(frozen=True)
class Confidence:
    """How sure the model is at one position, beside how sure it is one position earlier."""

    token: int  # the most likely next token at the position
    p: float  # its probability (top-1), 0..1
    before_token: int | None  # the same one position earlier (None at position 0)
    before_p: float | None


def confidence(logits: np.ndarray, position: int) -> Confidence:
    """Top-1 token and probability at `position` and at `position - 1`, from logits (T, V)."""
    def top1(row: np.ndarray) -> tuple[int, float]:
        p = probabilities(row)  # (V,)
        best = int(np.argmax(p))
        return best, float(p[best])

    token, p = top1(logits[position])
    before = top1(logits[position - 1]) if position > 0 else (None, None)
    return Confidence(token=token, p=p, before_token=before[0], before_p=before[1])
