"""Which models give meaningless numbers: every trace the app makes is checked
(tinygpt.readouts.health), and each model once on a one-token probe, so that every page, even
one that makes no trace, can say it. Bounded: VERDICT_BYTES of verdicts, a few hundred bytes
each."""

from __future__ import annotations

import numpy as np

from tinygpt.readouts.health import NumbersHealth, check_run
from tinygpt_app.compute.shared_cache import SharedCache

VERDICT_BYTES = 64 * 2**10  # the verdicts of a few hundred models, least recently used out

_verdicts = SharedCache(VERDICT_BYTES)  # (model id, version) -> NumbersHealth


def note_run(model_id: str, version: float, logits: np.ndarray, trace) -> NumbersHealth:
    """Check a run of the model and remember a bad one (a good run changes no verdict: another
    prompt of the same model may still overflow)."""
    health = check_run(logits, trace)
    if not health.ok:
        _verdicts.put((model_id, version), health)
    return health


def model_health(model_id: str, version: float, model) -> NumbersHealth:
    """The model's verdict: a bad run seen, else a one-token probe (run once per model)."""
    key = (model_id, version)
    known = _verdicts.get(key)
    if known is not None:
        return known
    with np.errstate(all="ignore"):  # an overflow is what we look for: said on the page
        logits, trace = model.run_with_trace(np.zeros(1, dtype=np.int64))
    health = check_run(logits, trace)
    return _verdicts.setdefault(key, health)  # a bad run noted meanwhile wins

