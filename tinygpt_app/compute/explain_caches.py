"""The explain pages' caches: attributions, occlusions and surprise, computed once per
(model, token ids, position, token) and shared between sessions.

Keys are small values; the model and the trace are underscore arguments (never hashed). Each
entry is small (an attribution is P floats, an occlusion n floats), and max_entries bounds
their number, so each cache stays under a megabyte or so even for GPT-2 small at 256 tokens.
A click that changes nothing (a chart's legend, a download) hits the cache: no forward.
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.model import GPT
from tinygpt.readouts.attribution import (
    Attribution,
    logit_attribution,
    logit_difference_attribution,
)
from tinygpt.readouts.occlusion import Occlusion, occlusion
from tinygpt.readouts.occlusion import occlusion_cost as _macs_of_occlusion
from tinygpt.readouts.surprise import surprise
from tinygpt_app.compute import caches
from tinygpt_app.compute.models import model_version
from tinygpt_app.compute.shared_cache import shared
from tinygpt_app.compute.subject import Subject


def _ids_key(state: Subject) -> tuple[int, ...]:
    return tuple(int(i) for i in state.ids)


@shared(32 * 2**20)  # an Attribution: a few arrays of (parts,)
def _attribution_cached(model_id: str, version: float, ids: tuple[int, ...], position: int,
                        token: int, versus: int | None, _model: GPT, _trace) -> Attribution:
    array = np.asarray(ids, dtype=np.int64)
    if versus is None:
        return logit_attribution(_model, array, position, token, trace=_trace)
    return logit_difference_attribution(_model, array, position, token, versus, trace=_trace)


def attribution(state: Subject, token: int, versus: int | None = None) -> Attribution:
    """The logit of `token` at the inspected position as parts (or token's minus versus's)."""
    _, trace = caches.get_trace(state)
    return _attribution_cached(state.model_id, model_version(state.model_id), _ids_key(state),
                               int(state.position), int(token),
                               None if versus is None else int(versus), state.model, trace)


@shared(16 * 2**20, spinner="Removing each word in turn…")
def _occlusion_cached(model_id: str, version: float, ids: tuple[int, ...], position: int,
                      token: int, _model: GPT, _base_logits: np.ndarray) -> Occlusion:
    return occlusion(_model, np.asarray(ids, dtype=np.int64), position, token,
                     base_logits=_base_logits)


# Occlusion at position p is p + 1 new prompts of p tokens: it grows as p squared, and no trace
# of the prompt can stand in for it (without a token every later vector changes). A move of the
# inspected position is a click, held to half a forward of the prompt (bench/gpt2_pages.py): on
# GPT-2 small at 200 tokens occlusion ran by itself up to 10^11 multiply-adds, 0.75 forwards at
# position 9 and 4 at position 27. So it runs by itself only when it costs at most
# AUTO_OCCLUSION_FORWARDS forwards of the prompt, or at most AUTO_OCCLUSION_MACS multiply-adds
# whatever the prompt (a small model's occlusion is cheap: the shipped one runs at every
# position); above both, the page asks first, saying what it costs.
AUTO_OCCLUSION_FORWARDS = 0.25
AUTO_OCCLUSION_MACS = 4 * 10**9


def occlusion_cost(state: Subject) -> tuple[int, float]:
    """(multiply-adds, in forwards of the prompt) of occlusion at the inspected position."""
    macs = _macs_of_occlusion(state.model, state.position)
    forward = max(1, state.n * state.model.num_parameters())
    return macs, macs / forward


def occlusion_runs_itself(state: Subject) -> bool:
    """Is occlusion at the inspected position cheap enough to run on a click that moved the
    position (see AUTO_OCCLUSION_FORWARDS)?"""
    macs, forwards = occlusion_cost(state)
    return macs <= AUTO_OCCLUSION_MACS or forwards <= AUTO_OCCLUSION_FORWARDS


def occlusion_for(state: Subject, token: int) -> Occlusion:
    """Occlusion at the inspected position (>= 1), watching `token`: one batched forward
    (the unchanged prompt's prediction is the cached trace's row, not a forward again).

    Only the tokens up to the position matter, so the key holds only those.
    """
    ids = _ids_key(state)[: state.position + 1]
    logits, _ = caches.get_trace(state)
    return _occlusion_cached(state.model_id, model_version(state.model_id), ids,
                             int(state.position), int(token), state.model,
                             logits[state.position])


@shared(4 * 2**20)  # (n-1,) nats each
def _surprise_cached(model_id: str, version: float, ids: tuple[int, ...], _model: GPT,
                     _logits) -> np.ndarray:
    nats = surprise(_model, np.asarray(ids, dtype=np.int64), logits=_logits)
    nats.flags.writeable = False
    return nats


def surprise_for(state: Subject) -> np.ndarray:
    """-log p of each real next token of the prompt, (n-1,) nats, from the cached forward."""
    logits, _ = caches.get_trace(state)
    return _surprise_cached(state.model_id, model_version(state.model_id), _ids_key(state),
                            state.model, logits)
