"""tinygpt.fast.attention: the weights alone give the numbers of a full forward of the
attention (a separate forward, recorded); the trace readers (one position's heads, the
weights) are checked on whole models in tests/tinygpt/network/test_trace.py."""

import numpy as np

from tests.tinygpt.network.test_attention import gqa
from tinygpt.fast.attention import weights_of
from tinygpt.kernels.blocked_attention import QUERY_BLOCK
from tinygpt.network.attention import attend


def test_shortcuts_give_the_numbers_of_a_full_forward():
    attn = gqa(2, dtype=np.float32)
    T = QUERY_BLOCK + 20  # long enough for attention by blocks
    x = np.random.default_rng(4).standard_normal((1, T, 12)).astype(np.float32)
    trace: dict = {}
    attn.forward(x, trace=trace)
    np.testing.assert_array_equal(weights_of(attn, x), trace["attn.weights"])
    _, _, v, q, k = attn.heads_of(x)
    full = attend(q, k, v, keep_weights=True).heads  # the T x T path
    np.testing.assert_allclose(trace["attn.heads"], full, atol=1e-6)
    assert trace["attn.k"].shape == (1, 2, T, 2) and trace["attn.q_rot"].shape == (1, 6, T, 2)
