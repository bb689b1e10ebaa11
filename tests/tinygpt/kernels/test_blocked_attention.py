"""tinygpt.kernels.blocked_attention: attention by blocks of queries gives a float64 softmax's
heads, whether or not a block must be shifted, and the heads of the full T x T path."""

import numpy as np
import pytest

from tinygpt.kernels.blocked_attention import QUERY_BLOCK, attend_by_blocks, row_sums
from tinygpt.network.attention import attend, scale_queries


@pytest.mark.parametrize("scale, shift", [(1.0, 0.0), (30.0, 0.0), (1.0, -100.0),
                                          (1.0, 75.0)])
def test_attention_by_blocks_shifts_only_when_it_must(scale, shift):
    """A block whose scores stay small is exponentiated unshifted; one with a score above
    UNSHIFTED_MAX (scale 30: scores of hundreds; shift +75), or with rows whose scores are all
    far below zero (shift -100: exp would give subnormal numbers), is shifted row by row.
    Each gives a float64 softmax's heads (the scale-30 and shift -100 cases fail without
    their guards)."""
    rng = np.random.default_rng(7)
    T, hs = QUERY_BLOCK + 40, 8
    q = (rng.standard_normal((1, 6, T, hs)) * scale).astype(np.float32)
    k = rng.standard_normal((1, 2, T, hs)).astype(np.float32)
    v = rng.standard_normal((1, 2, T, hs)).astype(np.float32)
    # a shift of every score: a column of ones in k, and the shift (times sqrt(hs)) in q
    q = np.concatenate([q, np.full((1, 6, T, 1), shift * np.sqrt(hs + 1), np.float32)], -1)
    k = np.concatenate([k, np.ones((1, 2, T, 1), np.float32)], -1)
    v = np.concatenate([v, np.zeros((1, 2, T, 1), np.float32)], -1)
    heads = attend(q, k, v).heads
    q64 = q.astype(np.float64)
    k64, v64 = (np.repeat(a.astype(np.float64), 3, axis=1) for a in (k, v))  # a head per query
    s = q64 @ k64.transpose(0, 1, 3, 2) / np.sqrt(hs + 1)
    s[..., np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf  # the keys after each query
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    reference = (w / w.sum(axis=-1, keepdims=True)) @ v64
    assert np.isfinite(heads).all()
    np.testing.assert_allclose(heads, reference, atol=2e-5)


@pytest.mark.parametrize("start", [0, 37])
def test_blocks_give_the_heads_of_the_full_path(start):
    """From position start on (a prompt read after a cached one): the heads of the plain
    scores, mask, softmax and @ v (attend with keep_weights, which takes no blocks)."""
    rng = np.random.default_rng(3)
    T = 2 * QUERY_BLOCK + 9
    q = rng.standard_normal((2, 4, T, 8)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, start + T, 8)).astype(np.float32) for _ in range(2))
    full = attend(q, k, v, start=start, keep_weights=True).heads
    np.testing.assert_allclose(attend_by_blocks(scale_queries(q), k, v, start), full, atol=1e-6)


def test_row_sums_are_the_sums():
    e = np.random.default_rng(0).random((3, 5, 200)).astype(np.float32)
    np.testing.assert_allclose(row_sums(e), e.sum(axis=-1, keepdims=True), rtol=1e-5)
