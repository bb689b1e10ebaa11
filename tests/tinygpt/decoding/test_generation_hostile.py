"""Hostile settings for tinygpt.decoding.generation: temperature / top-k / top-p give a valid
distribution for any finite scores and a clear ValueError out of range (property-based); the
model loads, runs and generates with the network blocked (the no_network fixture, conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.core_support import QUICK, TINY
from tinygpt.checkpoint.files import load
from tinygpt.decoding.generation import (
    generate,
    process_logits,
    softmax_with_temperature,
    top_k_filter,
    top_p_filter,
)

HUGE = [1e30, -1e30, 1e300, -1e300, np.finfo(np.float64).max, -np.finfo(np.float64).max]
FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
LOGITS = st.one_of(
    st.lists(FINITE, min_size=1, max_size=40),
    st.lists(st.sampled_from(HUGE + [0.0, 1.0, -1.0]), min_size=1, max_size=40),
    st.tuples(FINITE, st.integers(1, 40)).map(lambda vn: [vn[0]] * vn[1]),  # all equal
).map(lambda values: np.array(values, dtype=np.float64))
TEMPERATURE = st.one_of(st.just(0.0), st.floats(1e-6, 1e6), st.sampled_from([1e-300, 0.05, 3.0]))
TOP_K = st.none() | st.integers(1, 100)
TOP_P = st.none() | st.floats(1e-9, 1.0) | st.just(1.0)


def assert_distribution(p: np.ndarray) -> None:
    assert np.all(np.isfinite(p)), p
    assert np.all(p >= 0), p
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.count_nonzero(p) >= 1


@QUICK
@given(logits=LOGITS, temperature=TEMPERATURE, top_k=TOP_K, top_p=TOP_P)
@example(np.array([1e30, -1e30]), 1e-300, None, 0.5)  # logits / T overflows to inf
@example(np.array([1e308, 1e308]), 0.5, None, None)
@example(np.array([-1e308, 1e308, 0.0]), 1.0, 1, 0.3)
def test_process_logits_always_gives_a_distribution(logits, temperature, top_k, top_p):
    with np.errstate(over="ignore", invalid="ignore"):  # only the result matters here
        pr = process_logits(logits, temperature, top_k, top_p)
    assert_distribution(pr.final_probs)
    assert_distribution(pr.probs)
    assert pr.kept.any()
    assert np.all(pr.final_probs[~pr.kept] == 0)  # nothing cut can be drawn
    if temperature == 0.0:
        assert pr.kept.sum() == 1 and pr.final_probs[np.argmax(logits)] == 1.0


@QUICK
@given(logits=LOGITS, temperature=TEMPERATURE, k=st.integers(1, 100), p=st.floats(1e-9, 1.0))
def test_each_filter_alone_keeps_a_valid_distribution(logits, temperature, k, p):
    with np.errstate(over="ignore", invalid="ignore"):
        assert_distribution(softmax_with_temperature(logits, temperature))
        for filtered in (top_k_filter(logits, k), top_p_filter(logits, p)):
            assert not np.isnan(filtered).any() and not np.isposinf(filtered).any()
            kept = ~np.isneginf(filtered)
            assert kept.any()
            assert np.array_equal(filtered[kept], logits[kept])  # kept scores are untouched


BAD_SETTINGS = st.one_of(
    st.tuples(st.floats(max_value=-1e-12) | st.sampled_from([np.nan, np.inf, -np.inf]),
              st.none(), st.none()),
    st.tuples(st.just(1.0), st.integers(max_value=0) | st.sampled_from([2.5, True, "3"]),
              st.none()),
    st.tuples(st.just(1.0), st.none(),
              st.floats(max_value=0.0) | st.floats(min_value=1.0 + 1e-9) | st.just(np.nan)),
)


@QUICK
@given(logits=LOGITS, bad=BAD_SETTINGS)
def test_settings_out_of_range_give_a_clear_value_error(logits, bad):
    temperature, top_k, top_p = bad
    with pytest.raises(ValueError, match="temperature|top_k|top_p"):
        process_logits(logits, temperature, top_k, top_p)


def test_core_runs_offline(no_network):
    model, tok = load(TINY)
    ids = np.array(tok.encode("ROMEO:\nBut soft"), dtype=np.int64)
    logits, trace = model.run_with_trace(ids)
    assert np.isfinite(logits).all() and "logits" in trace
    for strategy in ("greedy", "sample", "beam"):
        result = generate(model, ids, max_new_tokens=5, strategy=strategy, seed=0)
        assert result is not None
