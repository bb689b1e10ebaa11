"""Readouts computed once per trace and shared by every rerun and session: the logit lens and
each position's top tokens. On GPT-2 small a logit-lens column is 13-25 products with the
768 x 50,257 output matrix and a softmax over 50,257 tokens; recomputing them on every click
cost more than the forward pass itself (bench/gpt2_pages.py).

Keys are small values (model id, file version, token ids, stage set); the model and the trace
are underscore-style arguments that are never hashed. Every entry is small (top-k ids and
probabilities, no vocabulary-sized array) but the attention maps, and each store is bounded in
bytes (shared_cache.SharedCache).
"""

from __future__ import annotations

import numpy as np

from tinygpt import readouts as ti
from tinygpt.network.model import Interventions
from tinygpt.readouts import explain
from tinygpt_app.compute.caches import interventions_key
from tinygpt_app.compute.models import model_version
from tinygpt_app.compute.shared_cache import SharedCache
from tinygpt_app.compute.subject import Subject

LENS_K = 5  # the most tokens per lens cell a page lists (the page's slider goes up to 5)
TOP_K = 50  # the most top tokens per position a page asks for (the Logits page's slider)
# Each store holds what 16 traces' readouts hold at most (each at most ~1.5 MB for GPT-2: the
# bound was 16 traces before it was in bytes); the attention maps of 3 traces (GPT-2 at 256
# tokens: 38 MB each).
READOUT_BYTES = 16 * 3 * 2**19
HEAD_MAP_BYTES = 3 * 38 * 2**20
_lens = SharedCache(READOUT_BYTES)  # key -> {position: (ids (S, K), probs (S, K), entropy (S,))}
_top = SharedCache(READOUT_BYTES)  # key -> ti.TopTokens
_heads = SharedCache(HEAD_MAP_BYTES)  # key -> (L, H, n, n) attention maps


def trace_key(state: Subject) -> tuple:
    return (state.model_id, model_version(state.model_id), tuple(int(i) for i in state.ids))


# A move of the inspected position to a far place slides the lens window onto positions never
# computed: every one of its columns is new, S stages x (a product with the C x V output matrix
# and a softmax over V). On GPT-2 small at 200 tokens 24 columns after each block cost more than
# a whole forward (bench/gpt2_pages.py: 1.13 forwards). So the window is as wide as a click may
# afford: its columns cost at most LENS_CLICK_FORWARDS forwards of the prompt, or
# LENS_FREE_MACS multiply-adds (a small model's lens is cheap whatever the prompt).
LENS_CLICK_FORWARDS = 0.3
LENS_FREE_MACS = 2 * 10**9
LENS_SOFTMAX_FACTOR = 2  # measured: a lens cell costs about twice its C x V product
LENS_MIN_POSITIONS = 3


def lens_width(state: Subject, most: int, sublayers: bool = False) -> int:
    """How many positions the logit-lens window may show (at most `most`), so that a window
    of new columns costs a click at most LENS_CLICK_FORWARDS forwards (see above)."""
    c = state.config
    stages = len(ti.residual_stages(c.n_layer, sublayers))
    forward_macs = state.n * state.model.num_parameters()
    budget = max(LENS_CLICK_FORWARDS * forward_macs, LENS_FREE_MACS)
    per_column = stages * c.n_embd * c.vocab_size * LENS_SOFTMAX_FACTOR
    return int(max(LENS_MIN_POSITIONS, min(most, budget // per_column)))


def logit_lens(state: Subject, trace, positions: list[int], k: int,
               sublayers: bool = False, interventions: Interventions | None = None
               ) -> ti.LogitLens:
    """ti.logit_lens of the current prompt's trace (run with `interventions`) at `positions`,
    top k <= LENS_K per cell.

    Each position's column is computed once per trace (the positions not seen yet in one
    batched product), so sliding the window computes only the new columns.
    """
    key = (*trace_key(state), interventions_key(interventions), sublayers)
    columns = dict(_lens.get(key, {}))
    missing = [p for p in positions if p not in columns]
    if missing:
        lens = ti.logit_lens(state.model, trace, k=LENS_K, sublayers=sublayers, positions=missing)
        for j, p in enumerate(missing):
            columns[p] = (lens.ids[:, j], lens.probs[:, j], lens.entropy[:, j])
        _lens.put(key, {**_lens.get(key, {}), **columns})  # with another session's new columns
    k = max(1, min(int(k), LENS_K))
    labels = [label for label, _ in ti.residual_stages(state.n_layer, sublayers)]
    return ti.LogitLens(
        labels=labels,
        ids=np.stack([columns[p][0][:, :k] for p in positions], axis=1),  # (S, m, k)
        probs=np.stack([columns[p][1][:, :k] for p in positions], axis=1),
        entropy=np.stack([columns[p][2] for p in positions], axis=1),  # (S, m)
    )


def top_tokens(state: Subject, logits: np.ndarray,
               interventions: Interventions | None = None) -> ti.TopTokens:
    """ti.top_tokens of the current prompt's logits (top TOP_K per row and shift by one),
    from the run with `interventions` (None: the normal run), computed once per trace: one
    softmax over (n, v), not one per rerun."""
    key = trace_key(state)
    if interventions is not None and interventions.active:
        key = (*key, interventions_key(interventions))
    hit = _top.get(key)
    if hit is None:
        hit = _top.setdefault(key, ti.top_tokens(logits, state.ids, TOP_K))
    return hit


def attention_maps(state: Subject, trace) -> np.ndarray:
    """Every head's attention weights (L, H, n, n), masked cells NaN, read-only: computed once
    per trace (each block's detail is derived again from a lean trace on every read)."""
    key = trace_key(state)
    hit = _heads.get(key)
    if hit is None:
        hit = explain.attention_maps(trace, state.n_layer)
        hit.flags.writeable = False
        hit = _heads.setdefault(key, hit)
    return hit
