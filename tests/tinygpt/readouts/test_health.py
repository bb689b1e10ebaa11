"""tinygpt.readouts.health: a forward whose numbers overflow float32 or stop being finite is
flagged, with the first array where it happened; a normal model's runs are not (the -inf of the
causal mask is the mask, not an overflow)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.core_support import TINY
from tinygpt.checkpoint.files import load
from tinygpt.readouts.health import FLOAT32_MAX, check_arrays, check_run


def huge(model, factor: float = 1e18):
    """The model with every matrix times `factor`: finite weights, meaningless numbers."""
    model.load_parameters({k: v * np.float32(factor) for k, v in model.parameters().items()})
    return model


@pytest.fixture
def tiny():
    return load(TINY)


def test_a_normal_run_is_healthy(tiny):
    model, tok = tiny
    logits, trace = model.run_with_trace(np.array(tok.encode("ROMEO: But soft")))
    assert any(np.isneginf(a).any() for a in trace.values() if a.dtype.kind == "f")  # the mask
    health = check_arrays(trace.items())
    assert health.ok and health.first_bad is None and check_run(logits, trace).ok
    assert 0 < health.largest < FLOAT32_MAX


def test_huge_weights_are_flagged_where_they_first_overflow(tiny):
    model, tok = tiny
    with np.errstate(all="ignore"):
        logits, trace = huge(model).run_with_trace(np.array(tok.encode("ROMEO: But soft")))
    health = check_arrays(trace.items())  # every array of the trace, in the order computed
    assert not health.ok
    names = list(trace)
    first = next(n for n in names
                 if trace[n].dtype.kind == "f" and not np.isfinite(trace[n]).all()
                 and "masked" not in n)
    assert names.index(health.first_bad) <= names.index(first)
    assert check_run(logits, trace).first_bad is not None  # a lazy trace: its logits tell


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_any_non_finite_value_is_flagged(bad):
    values = np.zeros((2, 3), dtype=np.float32)
    values[1, 2] = bad
    health = check_arrays([("fine", np.ones(3)), ("x", values)])
    assert (health.ok, health.first_bad) == (False, "x")


def test_float64_values_beyond_float32_are_an_overflow():
    health = check_arrays([("resid", np.array([1.0, 1e39]))])
    assert not health.ok and health.largest == 1e39
    assert check_arrays([("resid", np.array([1.0, 1e38]))]).ok


def test_nan_in_masked_scores_is_still_flagged():
    scores = np.array([[0.0, -np.inf], [np.nan, 1.0]], dtype=np.float32)
    assert check_arrays([("blocks.0.attn.scores_masked", scores)]).first_bad is not None
    assert check_arrays([("blocks.0.attn.scores_masked", scores[:1])]).ok


def test_a_lazy_trace_is_checked_through_the_arrays_it_keeps(tiny):
    """An overflow inside a block that the logits no longer show is still found: the trace
    keeps the residual stream after every sublayer."""
    model, tok = tiny
    logits, trace = model.run_with_trace(np.array(tok.encode("ROMEO: But soft")))
    stored = trace.stored()
    assert "blocks.0.resid_attn" in stored and "logits" in stored
    broken = dict(stored)
    broken["blocks.0.resid_attn"] = np.full_like(stored["blocks.0.resid_attn"], np.inf)

    class Kept:  # a trace whose kept arrays hold an overflow, its logits fine
        def stored(self):
            return broken

    health = check_run(logits, Kept())
    assert not health.ok and health.first_bad == "blocks.0.resid_attn"
    assert check_run(logits, trace).ok
