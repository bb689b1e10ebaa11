"""What every layer shares: how weights start, and how a forward records its tensors.

A forward may be given `trace`, a dict it writes its intermediate tensors into by name (the
names are listed in docs/ARCHITECTURE.md and docs/model_parts.md). That dict is a `Record`;
the read-only object a model's `run_with_trace` returns is a tinygpt.network.trace.Trace.
"""

from __future__ import annotations

import numpy as np

Record = dict[str, np.ndarray]


def init_normal(rng: np.random.Generator | None, shape: tuple, std: float, dtype) -> np.ndarray:
    """Weights drawn from N(0, std^2); zeros when rng is None (weights about to be loaded)."""
    if rng is None:
        return np.zeros(shape, dtype=dtype)  # lazily allocated by the OS: costs nothing
    return (rng.standard_normal(shape) * std).astype(dtype)


def record(trace: Record | None, name: str, value: np.ndarray) -> None:
    if trace is not None:
        trace[name] = value


def keeps(trace: Record | None, name: str) -> bool:
    """Does this trace record `name`? A plain dict records everything; a
    tinygpt.network.trace.Recorder only what cannot be derived (so a forward need not copy
    what it will not keep)."""
    if trace is None:
        return False
    keeps_name = getattr(trace, "keeps", None)
    return keeps_name is None or keeps_name(name)
