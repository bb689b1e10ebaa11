"""tinygpt.network.record: how weights start and how a forward records its tensors."""

from __future__ import annotations

import numpy as np

from tinygpt.network.record import init_normal, keeps, record


def test_init_normal_draws_with_the_asked_spread_and_type():
    w = init_normal(np.random.default_rng(0), (200, 300), 0.02, np.float32)
    assert w.shape == (200, 300) and w.dtype == np.float32
    assert abs(float(w.mean())) < 1e-3 and abs(float(w.std()) - 0.02) < 1e-3
    again = init_normal(np.random.default_rng(0), (200, 300), 0.02, np.float32)
    np.testing.assert_array_equal(w, again)  # the same seed, the same weights


def test_without_a_generator_the_weights_are_zeros_to_be_loaded():
    w = init_normal(None, (3, 4), 0.02, np.float64)
    assert w.dtype == np.float64 and not w.any()


def test_record_writes_only_into_a_trace():
    trace: dict = {}
    value = np.ones(3)
    record(trace, "x", value)
    assert trace["x"] is value  # kept as it is, not copied
    record(None, "x", value)  # no trace: nothing to write, no error


def test_a_dict_keeps_everything_a_recorder_what_it_says():
    class Lean(dict):
        def keeps(self, name: str) -> bool:
            return name.endswith(".weights")

    assert keeps({}, "blocks.0.attn.q") and not keeps(None, "blocks.0.attn.q")
    assert keeps(Lean(), "blocks.0.attn.weights") and not keeps(Lean(), "blocks.0.attn.q")
