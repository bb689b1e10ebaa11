"""Which models give meaningless numbers: every trace the app makes is checked
(tinygpt.readouts.health), and each model once on a one-token probe, so that every page, even
one that makes no trace, can say it. Bounded: the verdicts of at most MAX_MODELS models."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from tinygpt.readouts.health import NumbersHealth, check_run

MAX_MODELS = 64

_verdicts: OrderedDict[tuple[str, float], NumbersHealth] = OrderedDict()
_lock = threading.Lock()


def note_run(model_id: str, version: float, logits: np.ndarray, trace) -> NumbersHealth:
    """Check a run of the model and remember a bad one (a good run changes no verdict: another
    prompt of the same model may still overflow)."""
    health = check_run(logits, trace)
    if not health.ok:
        _remember((model_id, version), health)
    return health


def model_health(model_id: str, version: float, model) -> NumbersHealth:
    """The model's verdict: a bad run seen, else a one-token probe (run once per model)."""
    key = (model_id, version)
    with _lock:
        known = _verdicts.get(key)
    if known is not None:
        return known
    with np.errstate(all="ignore"):  # an overflow is what we look for: said on the page
        logits, trace = model.run_with_trace(np.zeros(1, dtype=np.int64))
    health = check_run(logits, trace)
    with _lock:
        if key not in _verdicts:  # a bad run noted meanwhile wins
            _keep(key, health)
        return _verdicts[key]


def _remember(key: tuple[str, float], health: NumbersHealth) -> None:
    with _lock:
        _keep(key, health)


def _keep(key: tuple[str, float], health: NumbersHealth) -> None:
    """Store a verdict (the caller holds the lock), forgetting the oldest beyond MAX_MODELS."""
    _verdicts[key] = health
    _verdicts.move_to_end(key)
    while len(_verdicts) > MAX_MODELS:
        _verdicts.popitem(last=False)
