"""The app's trace cache is bounded by bytes, least recently used first out."""

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.caches uses streamlit's caches")
from tinygpt_app.caches import TraceCache  # noqa: E402


def _entry(mb: int):
    logits = np.zeros(mb * 2**20 // 4, dtype=np.float32)
    return logits, {"logits": logits}, logits.nbytes


def test_trace_cache_evicts_least_recently_used_past_its_byte_budget():
    cache = TraceCache(max_bytes=3 * 2**20)
    for key in "abc":
        cache.put(key, *_entry(1))
    assert cache.nbytes == 3 * 2**20
    cache.get("a")  # "a" is now the most recently used
    cache.put("d", *_entry(1))
    assert cache.get("b") is None  # the oldest unused entry went first
    assert all(cache.get(k) is not None for k in "acd")
    assert cache.nbytes <= cache.max_bytes


def test_trace_larger_than_the_budget_is_not_kept():
    cache = TraceCache(max_bytes=2**20)
    cache.put("big", *_entry(2))
    assert cache.get("big") is None and cache.nbytes == 0
