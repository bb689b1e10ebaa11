"""What the Interventions page computes and shares: patching grids, one patched cell's
distribution, ablated and steered predictions and a steered greedy continuation, each once per
(model, token ids, settings), in caches bounded in bytes.

A grid is n_layer x T floats and every other entry a vocabulary-sized row at most: small.
Each entry is made by tinygpt.readouts (the model's own forwards); nothing here computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tinygpt import readouts as ti
from tinygpt.decoding.generation import generate
from tinygpt_app.compute.models import model_version
from tinygpt_app.compute.shared_cache import SharedCache
from tinygpt_app.compute.subject import Subject

PAGE_POSITIONS = 16  # the page's grid patches the last 16 positions at most
MAX_PATCH_TOKENS = 64  # and takes prompts of at most 64 tokens
# and at most this many multiply-adds (SmolLM2-135M: about 20 s on one busy core here), so the
# positions of a large model's grid are fewer: 7 at 8 tokens, 3 at 16
GRID_MACS = 10**11
CONTINUATION_TOKENS = 12  # the steered greedy continuation's length
GRID_BYTES = 8 * 2**20  # grids: (n_layer, T) floats each, a few kB
ROW_BYTES = 64 * 2**20  # rows of logits: V floats each (GPT-2: 200 kB)
_grids = SharedCache(GRID_BYTES)  # (model, version, clean, corrupt, answer, site) -> Patching
_rows = SharedCache(ROW_BYTES)  # (kind, model, version, ...) -> logits (V,) or a generation


def _key(state: Subject, *rest) -> tuple:
    return (state.model_id, model_version(state.model_id), *rest)


def _ids(ids: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in ids)


def _shared(cache: SharedCache, key: tuple, make: Callable[[], object]):
    hit = cache.get(key)
    if hit is not None:
        return hit
    value = make()
    if isinstance(value, np.ndarray):
        value.flags.writeable = False  # shared by every session: read-only
    return cache.setdefault(key, value)


def grid_positions(state: Subject, T: int) -> int:
    """How many positions (the last ones) the page's grid patches for a prompt of T tokens:
    at most PAGE_POSITIONS and as many as GRID_MACS allows. One position costs, per patched
    block L, blocks L.. on T tokens, and one row of the output layer."""
    c = state.model.config
    block = sum(array.size for name, array in state.model.parameters().items()
                if name.startswith("blocks.0."))  # multiply-adds of one block for one token
    per_position = T * block * c.n_layer * (c.n_layer + 1) // 2 + (
        c.n_layer * c.embedding_dim * c.vocab_size)
    return int(max(1, min(PAGE_POSITIONS, T, GRID_MACS // per_position)))


def patching_cached(state: Subject, clean: Sequence[int], corrupt: Sequence[int], answer: int,
                    site: str) -> ti.Patching | None:
    """The grid if some session made it already, else None (the page offers the button)."""
    return _grids.get(_key(state, _ids(clean), _ids(corrupt), int(answer), site))



def patching(state: Subject, clean: Sequence[int], corrupt: Sequence[int], answer: int,
             site: str, progress: Callable[[int, int], None] | None = None) -> ti.Patching:
    """The patching grid over the last grid_positions positions, made once and shared."""
    key = _key(state, _ids(clean), _ids(corrupt), int(answer), site)
    return _shared(_grids, key, lambda: ti.activation_patching(
        state.model, np.asarray(clean), np.asarray(corrupt), int(answer), site,
        max_positions=grid_positions(state, len(clean)), progress=progress))


def patched_row(state: Subject, clean: Sequence[int], corrupt: Sequence[int], layer: int,
                position: int, site: str) -> np.ndarray:
    """The (V,) logits of one cell's patched run (a forward of its own)."""
    key = _key(state, "patched", _ids(clean), _ids(corrupt), int(layer), int(position), site)
    return _shared(_rows, key, lambda: ti.patched_logits(
        state.model, np.asarray(clean), np.asarray(corrupt), int(layer), int(position), site))


def last_row(state: Subject, ids: Sequence[int]) -> np.ndarray:
    """The plain (V,) logits after `ids` (the corrupted prompt's, or any prompt's)."""
    key = _key(state, "plain", _ids(ids))
    return _shared(_rows, key, lambda: state.model.forward(np.asarray(ids))[-1])


def ablated_row(state: Subject, heads: Sequence[tuple[int, int]],
                neurons: Sequence[tuple[int, int]], mean: bool) -> np.ndarray:
    """The (V,) logits after the prompt with those heads and neurons ablated."""
    heads, neurons = sorted(set(map(tuple, heads))), sorted(set(map(tuple, neurons)))
    key = _key(state, "ablated", _ids(state.ids), tuple(heads), tuple(neurons), bool(mean))
    return _shared(_rows, key, lambda: ti.ablated_logits(state.model, state.ids, heads=heads,
                                                         neurons=neurons, mean=mean))


def steering_vector(state: Subject, ids_a: Sequence[int], ids_b: Sequence[int],
                    layer: int) -> np.ndarray:
    key = _key(state, "vector", _ids(ids_a), _ids(ids_b), int(layer))
    return _shared(_rows, key, lambda: ti.steering_vector(
        state.model, np.asarray(ids_a), np.asarray(ids_b), int(layer)))


def steered(state: Subject, ids_a: Sequence[int], ids_b: Sequence[int], layer: int,
            coefficient: float) -> tuple[np.ndarray, np.ndarray]:
    """(the (V,) steered logits after the prompt, the steered greedy continuation's ids)."""
    vector = steering_vector(state, ids_a, ids_b, layer)
    key = _key(state, "steered", _ids(state.ids), _ids(ids_a), _ids(ids_b), int(layer),
               float(coefficient))

    def make() -> tuple[np.ndarray, np.ndarray]:
        iv = ti.steering(state.model, vector, int(layer), float(coefficient))
        logits = state.model.forward(state.ids, iv)[-1]
        new = generate(state.model, state.ids, CONTINUATION_TOKENS, interventions=iv,
                       record_steps=False).tokens
        return logits, new

    return _shared(_rows, key, make)


def continuation(state: Subject) -> np.ndarray:
    """The plain greedy continuation of the prompt (CONTINUATION_TOKENS ids)."""
    key = _key(state, "greedy", _ids(state.ids))
    return _shared(_rows, key, lambda: generate(state.model, state.ids, CONTINUATION_TOKENS,
                                                record_steps=False).tokens)
