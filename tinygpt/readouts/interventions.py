"""Causal experiments on a model: activation patching, ablation of heads and neurons, steering.

Each one changes a forward at a named point (tinygpt.network.config.Interventions.edits) and
reads what the model then says:

    activation_patching  run the corrupted prompt, but take one activation (one layer, one
                         position) from the clean prompt: how much of the clean answer comes back?
    ablated_logits       set some heads' outputs or some neurons to zero (or to their mean over
                         the prompt's positions): what does the model say without them?
    steering_vector      the residual stream of prompt a minus that of prompt b, at one layer
    steered_logits       add a multiple of that vector at every position: where does it push?

Layers are 0-based block indices. Scores are log-probabilities (natural log) of one token at
the prompt's last position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

import numpy as np

from tinygpt.network.config import NO_INTERVENTIONS, Interventions
from tinygpt.network.functional import log_softmax

SITES = ("resid_pre", "attn_out", "mlp_out")
_POINTS = {"resid_pre": "resid_pre", "attn_out": "attn.output", "mlp_out": "ffn.output"}
MAX_PATCH_POSITIONS = 32  # the grid patches at most the last 32 positions
PATCH_BATCH_BYTES = 64 * 2**20  # the patched runs of one layer go in batches of about this


@dataclass(frozen=True)
class Patching:
    """An activation-patching grid: scores[layer, t] is the log-probability of answer_id at the
    last position of the corrupted run with the activation at (layer, t) taken from the clean
    run (NaN at positions the grid does not cover: those before `positions`)."""

    scores: np.ndarray  # (n_layer, T) float64
    clean_score: float
    corrupt_score: float
    positions: np.ndarray  # (P,) the positions patched: the last P of T
    site: str
    answer_id: int

    @property
    def recovered(self) -> np.ndarray:
        """(n_layer, T): how far each patch moves the score from corrupted (0) to clean (1).
        All NaN when the two runs score the same (there is nothing to recover)."""
        gap = self.clean_score - self.corrupt_score
        if abs(gap) < 1e-9:
            return np.full_like(self.scores, np.nan)
        return (self.scores - self.corrupt_score) / gap

    def best_cell(self) -> tuple[int, int] | None:
        """(layer, i): the patch that brings back the most, i indexing `positions`; None when
        there is nothing to recover."""
        shown = self.recovered[:, self.positions]  # (n_layer, P)
        if np.isnan(shown).all():
            return None
        layer, i = np.unravel_index(int(np.nanargmax(shown)), shown.shape)
        return int(layer), int(i)


# ----------------------------------------------------------------------------- checks


def _ids(model, ids, what: str = "ids") -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"{what} must be a non-empty 1-D sequence of token ids, got shape "
                         f"{ids.shape}")
    return model._check_ids(ids)[0][0]  # the model's own checks (integers, vocabulary, context)


def _layer(model, layer) -> int:
    n = model.config.n_layer
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < n:
        raise ValueError(f"layer must be 0 .. {n - 1}, got {layer!r}")
    return int(layer)


def _pairs(model, pairs: Iterable, size: int, what: str) -> list[tuple[int, int]]:
    """[(layer, index), ...] checked: index in 0 .. size - 1."""
    checked = []
    for pair in pairs:
        layer, index = pair
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not (
                0 <= index < size):
            raise ValueError(f"{what} must be 0 .. {size - 1}, got {index!r}")
        checked.append((_layer(model, layer), int(index)))
    return checked


# ----------------------------------------------------------------------------- patching


def resid_pre(trace, layer: int) -> np.ndarray:
    """The residual stream entering block `layer` (T, C), read off a trace."""
    return trace["embed.sum"] if layer == 0 else trace[f"blocks.{layer - 1}.resid_ffn"]


def site_activation(trace, layer: int, site: str) -> np.ndarray:
    """The activation (T, C) a patch at `site` of block `layer` takes, read off a trace."""
    if site == "resid_pre":
        return resid_pre(trace, layer)
    return trace[f"blocks.{layer}.{_POINTS[site]}"]


def _put_rows(activation: np.ndarray, positions: np.ndarray, source: np.ndarray) -> np.ndarray:
    """activation (B, T, C) with row b's position positions[b] replaced by source[positions[b]]."""
    patched = activation.copy()
    patched[np.arange(len(positions)), positions] = source[positions]
    return patched


def patch(layer: int, site: str, positions: np.ndarray, source: np.ndarray) -> Interventions:
    """The edit of a batch of patched runs: row b takes source (T, C) at positions[b], at
    `site` of block `layer`."""
    point = f"blocks.{layer}.{_POINTS[site]}"
    return Interventions(edits=((point, partial(_put_rows, positions=positions,
                                                source=source)),))


def _batch_rows(model, T: int) -> int:
    """How many patched runs go in one batch: about PATCH_BATCH_BYTES of activations."""
    c = model.config
    widest = max(c.inner_dim, 3 * c.embedding_dim) + c.n_head * T  # per position and row
    return max(1, PATCH_BATCH_BYTES // (T * widest * model.dtype.itemsize))


def _answer_scores(logits: np.ndarray, answer_id: int) -> np.ndarray:
    """logits (..., V) -> the log-probability of answer_id (...), in float64."""
    return log_softmax(logits.astype(np.float64))[..., answer_id]


def answer_score(logits: np.ndarray, answer_id: int) -> float:
    """log p(answer_id) of one row of logits (V,), in float64: what the grid's cells score."""
    return float(_answer_scores(np.asarray(logits), answer_id))


def activation_patching(
    model,
    clean_ids,
    corrupt_ids,
    answer_id: int,
    site: str = "resid_pre",
    *,
    max_positions: int = MAX_PATCH_POSITIONS,
    progress: Callable[[int, int], None] | None = None,
) -> Patching:
    """Patch every (layer, position) of the corrupted run with the clean run's activation.

    The corrupted run is made once; each patched run starts from its residual stream entering
    the patched block (everything below is the same) and runs the blocks from there, the
    patched positions of one layer side by side as a batch. progress(done, total) is called
    after each layer. Both prompts need the same number of tokens.
    """
    clean = _ids(model, clean_ids, "clean_ids")
    corrupt = _ids(model, corrupt_ids, "corrupt_ids")
    if len(clean) != len(corrupt):
        raise ValueError(
            f"the clean prompt has {len(clean)} tokens and the corrupted one {len(corrupt)}: "
            "patching swaps activations position by position, so both need the same number "
            "of tokens")
    if site not in SITES:
        raise ValueError(f"site must be one of {SITES}, got {site!r}")
    answer_id = _pairs(model, [(0, answer_id)], model.config.vocab_size, "answer_id")[0][1]
    if isinstance(max_positions, bool) or not isinstance(max_positions, (int, np.integer)) or (
            max_positions < 1):
        raise ValueError(f"max_positions must be a positive integer, got {max_positions!r}")
    clean_logits, clean_trace = model.run_with_trace(clean)
    corrupt_logits, corrupt_trace = model.run_with_trace(corrupt)
    T, n_layer = len(clean), model.config.n_layer
    positions = np.arange(max(0, T - max_positions), T)
    scores = np.full((n_layer, T), np.nan)
    rows = _batch_rows(model, T)
    for layer in range(n_layer):
        stream = resid_pre(corrupt_trace, layer)  # (T, C): the same in every patched run
        source = site_activation(clean_trace, layer, site)  # (T, C)
        for first in range(0, len(positions), rows):
            batch = positions[first:first + rows]  # (b,) one patched run per position
            x = np.broadcast_to(stream, (len(batch), *stream.shape))  # (b, T, C), not copied
            iv = patch(layer, site, batch, source)
            logits = model.forward_from(x, layer, iv, last_only=True)[:, -1]  # (b, V)
            scores[layer, batch] = _answer_scores(logits, answer_id)
        if progress is not None:
            progress(layer + 1, n_layer)
    return Patching(scores, float(_answer_scores(clean_logits[-1], answer_id)),
                    float(_answer_scores(corrupt_logits[-1], answer_id)), positions, site,
                    answer_id)


def patched_logits(model, clean_ids, corrupt_ids, layer: int, position: int,
                   site: str = "resid_pre") -> np.ndarray:
    """The (V,) last-position logits of one patched run: the corrupted prompt with the clean
    activation at (layer, position). A whole forward (the grid's cell, made apart)."""
    clean, corrupt = _ids(model, clean_ids, "clean_ids"), _ids(model, corrupt_ids, "corrupt_ids")
    if len(clean) != len(corrupt):
        raise ValueError("both prompts need the same number of tokens")
    if site not in SITES:
        raise ValueError(f"site must be one of {SITES}, got {site!r}")
    layer = _layer(model, layer)
    if not 0 <= position < len(clean):
        raise ValueError(f"position must be 0 .. {len(clean) - 1}, got {position!r}")
    source = site_activation(model.run_with_trace(clean)[1], layer, site)
    return model.forward(corrupt, patch(layer, site, np.array([position]), source))[-1]


# ----------------------------------------------------------------------------- ablation


def _to_zero(a: np.ndarray, index: list[int], axis: int) -> np.ndarray:
    out = a.copy()
    np.moveaxis(out, axis, -1)[..., index] = 0.0
    return out


def _to_mean(a: np.ndarray, index: list[int], axis: int, over: int) -> np.ndarray:
    """a with the entries `index` along `axis` replaced by their mean along `over` (positions)."""
    out = a.copy()
    picked = np.take(a, index, axis=axis)
    mean = np.broadcast_to(picked.mean(axis=over, keepdims=True), picked.shape)
    view = np.moveaxis(out, axis, 0)
    view[index] = np.moveaxis(mean, axis, 0)
    return out


def ablation(model, heads: Iterable = (), neurons: Iterable = (), *,
             mean: bool = False) -> Interventions:
    """The Interventions that ablate these heads [(layer, head)] and neurons [(layer, index)]:
    zeroed (heads through the What-if switch zero_heads), or with mean=True replaced by their
    mean over the prompt's positions in the same run."""
    c = model.config
    heads = _pairs(model, heads, c.n_head, "head")
    neurons = _pairs(model, neurons, c.inner_dim, "neuron")
    edits = []
    for layer in sorted({layer for layer, _ in neurons}):
        index = sorted({n for lay, n in neurons if lay == layer})
        f = partial(_to_mean, over=1) if mean else _to_zero
        edits.append((f"blocks.{layer}.ffn.post", partial(f, index=index, axis=2)))  # (B,T,I)
    if not mean:
        return Interventions(zero_heads=frozenset(heads), edits=tuple(edits))
    for layer in sorted({layer for layer, _ in heads}):
        index = sorted({h for lay, h in heads if lay == layer})
        edits.append((f"blocks.{layer}.attn.heads",
                      partial(_to_mean, index=index, axis=1, over=2)))  # (B, H, T, hs)
    return Interventions(edits=tuple(edits))


def ablated_logits(model, ids, heads: Iterable = (), neurons: Iterable = (), *,
                   mean: bool = False) -> np.ndarray:
    """The (V,) logits at the last position with these heads' outputs (before the output
    projection) and these neurons (the inputs of the down projection) set to zero, or to
    their mean over the prompt's positions with mean=True."""
    ids = _ids(model, ids)
    return model.forward(ids, ablation(model, heads, neurons, mean=mean))[-1]


# ----------------------------------------------------------------------------- steering


def steering_vector(model, ids_a, ids_b, layer: int) -> np.ndarray:
    """(C,): the residual stream entering `layer` at the last position of a, minus b's."""
    layer = _layer(model, layer)
    a = resid_pre(model.run_with_trace(_ids(model, ids_a, "ids_a"))[1], layer)[-1]
    b = resid_pre(model.run_with_trace(_ids(model, ids_b, "ids_b"))[1], layer)[-1]
    return a - b


def vector_length(vector: np.ndarray) -> float:
    """||vector||: a steering direction's length."""
    return float(np.linalg.norm(np.asarray(vector, dtype=np.float64)))


def most_active(activations: np.ndarray, k: int) -> list[int]:
    """The k units (neurons) of largest |activation|, largest first (ties: lower index)."""
    return [int(n) for n in np.argsort(-np.abs(activations), kind="stable")[:k]]


def _add(x: np.ndarray, vector: np.ndarray) -> np.ndarray:
    return x + vector


def steering(model, vector, layer: int, coefficient: float) -> Interventions:
    """The Interventions that add coefficient x vector to the residual stream entering `layer`
    at every position: for steered_logits, and for generate(..., interventions=...)."""
    layer = _layer(model, layer)
    vector = np.asarray(vector, dtype=np.float64)
    if vector.shape != (model.config.embedding_dim,) or not np.isfinite(vector).all():
        raise ValueError(f"vector must be {model.config.embedding_dim} finite numbers, got "
                         f"shape {vector.shape}")
    if not np.isfinite(coefficient):
        raise ValueError(f"coefficient must be a finite number, got {coefficient!r}")
    if coefficient == 0:
        return NO_INTERVENTIONS
    push = (float(coefficient) * vector).astype(model.dtype)  # (C,)
    return Interventions(edits=((f"blocks.{layer}.resid_pre", partial(_add, vector=push)),))


def steered_logits(model, ids, vector, layer: int, coefficient: float) -> np.ndarray:
    """(T, V) logits with coefficient x vector added to the residual stream entering `layer`
    at every position."""
    return model.forward(_ids(model, ids), steering(model, vector, layer, coefficient))
