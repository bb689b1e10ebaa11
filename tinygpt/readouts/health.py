"""Are a run's numbers still numbers? A model whose weights are finite but huge (every matrix
times 1e18) loads like any other, but its activations overflow float32 and turn into inf and
NaN: every chart would show meaningless values. This readout looks at a run's logits and its
trace and says whether any value overflowed float32 or stopped being finite, and where first.

Masked attention scores are -inf on purpose (a key the query may not see): -inf is allowed in
the masked arrays only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

FLOAT32_MAX = float(np.finfo(np.float32).max)  # 3.4e38: beyond it float32 holds only inf


@dataclass(frozen=True)
class NumbersHealth:
    """What a run's arrays hold: all finite and within float32, or not (and where first)."""

    ok: bool
    first_bad: str | None  # the first array (trace name) with an inf, a NaN or an overflow
    largest: float  # the largest finite |value| seen


def _bad(name: str, array: np.ndarray) -> tuple[bool, float]:
    """(does `array` hold a value that is not a float32 number?, its largest finite |value|)
    One pass each for the max and the min, no copy: a GPT-2 trace's logits are 40 MB."""
    values = np.asarray(array)
    if values.dtype.kind != "f" or values.size == 0:
        return False, 0.0  # token ids, empty arrays
    high, low = values.max(), values.min()  # NaN if any NaN; ±inf if any infinity
    if np.isfinite(high) and np.isfinite(low):
        largest = max(abs(float(high)), abs(float(low)))
        return largest > FLOAT32_MAX, largest
    finite = np.isfinite(values)  # the rare path: name the bad array, measure the rest
    largest = float(np.abs(values[finite]).max()) if finite.any() else 0.0
    allowed = "masked" in name and not np.any(np.isnan(values) | (values == np.inf))
    return not allowed, largest  # -inf in masked scores is the mask itself


def check_arrays(arrays: Iterable[tuple[str, np.ndarray]]) -> NumbersHealth:
    """Look at every (name, array); the first that overflows or is not finite is named."""
    first_bad, largest = None, 0.0
    for name, array in arrays:
        bad, biggest = _bad(name, array)
        largest = max(largest, biggest)
        if bad and first_bad is None:
            first_bad = name
    return NumbersHealth(first_bad is None, first_bad, largest)


def check_run(logits: np.ndarray, trace: Mapping | None = None) -> NumbersHealth:
    """A forward's health: its logits, and every array of `trace` when it is a plain dict; of a
    lazy Trace, the arrays it keeps (the residual stream after every sublayer and what each
    sublayer wrote), never made to compute parts nobody asked for."""
    if isinstance(trace, dict):
        arrays = list(trace.items())
    else:
        arrays = list(trace.stored().items()) if hasattr(trace, "stored") else []
    return check_arrays([*arrays, ("logits", logits)])
