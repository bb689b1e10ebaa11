"""tinygpt.network.kv_cache: reordering rows for beam search moves whole rows, in place or not."""

import numpy as np

from tinygpt.network.model import GPT, GPTConfig


def test_kv_cache_reorder_moves_whole_rows() -> None:
    model = GPT(GPTConfig(vocab_size=32, n_ctx=24, n_embd=16, n_head=2, n_layer=2))
    cache = model.new_cache(3)
    model.forward_cached(np.array([[1, 2], [3, 4], [5, 6]]), cache)
    before = [k.copy() for k in cache.keys]
    cache.reorder(np.array([2, 2, 0]))  # same batch size: in place
    for old, new in zip(before, cache.keys, strict=True):
        np.testing.assert_array_equal(new, old[[2, 2, 0]])
    cache.reorder(np.array([0, 0, 1]))  # row 0 stays, rows 1 and 2 read rows being written
    for old, new in zip(before, cache.keys, strict=True):
        np.testing.assert_array_equal(new, old[[2, 2, 2]])
    before = [k.copy() for k in cache.keys]
    cache.reorder(np.array([1]))  # fewer rows: new buffers (row 1 is now old row 2)
    assert cache.batch_size == 1
    np.testing.assert_array_equal(cache.keys[0], before[0][[2]])


def test_forward_cached_last_only_is_the_last_row_and_fills_the_cache() -> None:
    model = GPT(GPTConfig(vocab_size=32, n_ctx=24, n_embd=16, n_head=2, n_layer=2), seed=1)
    ids = np.array([[1, 2, 3, 4, 5]])
    full_cache, last_cache = model.new_cache(1), model.new_cache(1)
    full = model.forward_cached(ids, full_cache)  # (1, 5, V)
    last = model.forward_cached(ids, last_cache, last_only=True)  # (1, 1, V)
    assert last.shape == (1, 1, 32) and last_cache.length == 5
    np.testing.assert_allclose(last[:, 0], full[:, -1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(last[0, 0], model.forward(ids[0])[-1], rtol=1e-5, atol=1e-6)
    nxt = model.forward_cached(np.array([[6]]), last_cache)  # the cache carries on as usual
    np.testing.assert_allclose(nxt[0, -1], model.forward(np.array([1, 2, 3, 4, 5, 6]))[-1],
                               rtol=1e-5, atol=1e-6)
