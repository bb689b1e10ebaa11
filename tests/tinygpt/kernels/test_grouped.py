"""tinygpt.kernels.grouped: grouped-query products without repeated keys equal the products
with each key/value head repeated for its query heads (transformers' repeat_kv)."""

import numpy as np

from tinygpt.kernels.grouped import grouped, mix, scores_of, ungrouped


def repeat_kv(t: np.ndarray, n_head: int) -> np.ndarray:
    """(B, KV, T, n) -> (B, H, T, n): key/value head j repeated for query heads j*G .. j*G+G-1."""
    return np.repeat(t, n_head // t.shape[1], axis=1)


def test_grouped_products_equal_repeated_heads():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 6, 5, 4))
    k, v = rng.standard_normal((2, 2, 7, 4)), rng.standard_normal((2, 2, 7, 4))
    scores = scores_of(q, k)
    np.testing.assert_allclose(scores, q @ repeat_kv(k, 6).transpose(0, 1, 3, 2), rtol=1e-12)
    w = rng.random((2, 6, 5, 7))
    np.testing.assert_allclose(mix(w, v), w @ repeat_kv(v, 6), rtol=1e-12)
    np.testing.assert_array_equal(ungrouped(grouped(q, 2), 6), q)
    assert np.shares_memory(grouped(q, 6), q)  # one query head per key head: a view
