"""tinygpt.kernels.angle_tables: the kept cos and sin tables equal a fresh computation of the
angles, are shared and read-only, and positions past any table are made anew."""

import numpy as np

from tinygpt.kernels.angle_tables import TABLE_MAX_BYTES, cos_sin
from tinygpt.network.attention import Rotary


def test_rotary_table_is_shared_read_only_and_equals_a_fresh_computation():
    rotary = Rotary(16, 500.0)
    cos, sin = rotary.cos_sin(40, 30, np.float32)
    angles = np.outer(np.arange(40, 70, dtype=np.float64), rotary.inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)
    np.testing.assert_array_equal(cos, np.cos(angles).astype(np.float32))
    np.testing.assert_array_equal(sin, np.sin(angles).astype(np.float32))
    assert not cos.flags.writeable and not sin.flags.writeable
    again, _ = Rotary(16, 500.0).cos_sin(0, 100, np.float32)  # another layer's Rotary
    assert np.shares_memory(again, cos)  # one table, not one per layer


def test_positions_past_any_table_are_computed_fresh():
    hs, start = 64, TABLE_MAX_BYTES // (64 * 2 * 4)  # a table this long would be too large
    cos, sin = cos_sin(hs, 10000.0, start, 5, np.float32)
    assert cos.flags.writeable  # made for this call, not a kept table
    angles = np.outer(np.arange(start, start + 5, dtype=np.float64), Rotary(hs, 1e4).inv_freq)
    fresh = np.sin(np.concatenate([angles, angles], -1)).astype(np.float32)
    np.testing.assert_array_equal(sin, fresh)
