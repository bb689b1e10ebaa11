"""The angles of rotary positions (RoPE), computed once per table and sliced.

Every layer, and q and k, turn by the same angles p * theta^(-2j/hs): rather than computing
cos and sin again for every layer of every forward, a read-only table of positions
0 .. n - 1 (n a power of two) is kept per head size, theta and dtype, bounded in bytes.
tinygpt.network.attention.Rotary reads its cos and sin here.
"""

from __future__ import annotations

import functools

import numpy as np

TABLE_MIN_POSITIONS = 256
TABLE_MAX_BYTES = 4 * 2**20  # one cos + sin table; _angle_table keeps at most 8: 32 MB


def rope_frequencies(head_size: int, theta: float) -> np.ndarray:
    """(hs/2,) radians per position of each pair j: theta^(-2j/hs)."""
    exponents = np.arange(0, head_size, 2, dtype=np.float64) / head_size  # 2j / hs
    return 1.0 / float(theta) ** exponents


def angles(inv_freq: np.ndarray, start: int, end: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin (end - start, hs) of the angles p * inv_freq of positions start .. end - 1."""
    turns = np.outer(np.arange(start, end, dtype=np.float64), inv_freq)  # (T, hs/2)
    turns = np.concatenate([turns, turns], axis=-1)  # both halves of a pair: one angle
    return np.cos(turns).astype(dtype), np.sin(turns).astype(dtype)


def cos_sin(head_size: int, theta: float, start: int, T: int,
            dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin, (T, hs), of positions start .. start + T - 1: slices of a kept table
    (read-only), or made anew when the table would be larger than TABLE_MAX_BYTES."""
    end = start + T
    n = max(TABLE_MIN_POSITIONS, 1 << (end - 1).bit_length())  # a power of two >= end
    if n * head_size * 2 * np.dtype(dtype).itemsize > TABLE_MAX_BYTES:
        return angles(rope_frequencies(head_size, theta), start, end, dtype)
    cos, sin = _angle_table(head_size, float(theta), n, np.dtype(dtype).str)
    return cos[start:end], sin[start:end]


@functools.lru_cache(maxsize=8)
def _angle_table(head_size: int, theta: float, n: int,
                 dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of positions 0 .. n - 1, shared by every Rotary of this head size and
    theta (so never written to: read-only)."""
    cos, sin = angles(rope_frequencies(head_size, theta), 0, n, np.dtype(dtype))
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin
