"""tinygpt.kv_cache: reordering rows for beam search moves whole rows, in place or not."""

import numpy as np

from tinygpt.model import GPT, GPTConfig


def test_kv_cache_reorder_moves_whole_rows() -> None:
    model = GPT(GPTConfig(vocab_size=32, n_ctx=24, n_embd=16, n_head=2, n_layer=2))
    cache = model.new_cache(3)
    model.forward_cached(np.array([[1, 2], [3, 4], [5, 6]]), cache)
    before = [k.copy() for k in cache.keys]
    cache.reorder(np.array([2, 2, 0]))  # same batch size: in place
    for old, new in zip(before, cache.keys, strict=True):
        np.testing.assert_array_equal(new, old[[2, 2, 0]])
    cache.reorder(np.array([1]))  # fewer rows: new buffers (row 1 is now old row 2)
    assert cache.batch_size == 1
    np.testing.assert_array_equal(cache.keys[0], before[0][[2]])
