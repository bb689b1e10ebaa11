"""The KV cache: keys and values already computed, so generating a token costs one position."""

from __future__ import annotations

import numpy as np

from tinygpt.network.config import GPTConfig


class KVCache:
    """Keys and values of the positions already processed, so each new token costs one step.

    Buffers are allocated once, (B, KV, capacity, hs) per layer; capacity is the full context
    unless the caller knows it needs less (a prompt read once: its own length). KV is the
    number of key/value heads: n_head, or fewer with grouped-query attention (Llama, Qwen2),
    and the cache is that many times smaller: the keys are stored once per group, not repeated.
    """

    def __init__(self, config: GPTConfig, batch_size: int, dtype,
                 capacity: int | None = None) -> None:
        capacity = config.n_ctx if capacity is None else capacity
        if not 1 <= capacity <= config.n_ctx:
            raise ValueError(f"capacity must be 1 .. {config.n_ctx}, got {capacity}")
        shape = (batch_size, config.kv_heads, capacity, config.head_size)
        self.keys = [np.zeros(shape, dtype=dtype) for _ in range(config.n_layer)]
        self.values = [np.zeros(shape, dtype=dtype) for _ in range(config.n_layer)]
        self.length = 0

    @property
    def batch_size(self) -> int:
        return self.keys[0].shape[0]

    @property
    def capacity(self) -> int:
        """Positions the buffers have room for."""
        return self.keys[0].shape[2]

    def take(self, indices: np.ndarray, capacity: int | None = None) -> KVCache:
        """A new cache of the rows `indices` (copies: this one is left as it is), with room for
        `capacity` positions (default: as many as this one; more or fewer, as long as the
        positions filled fit). A generation that knows its final length copies and keeps only
        that much: on GPT-2 small a row of 1,024 positions holds 75 MB of keys and values."""
        indices = np.asarray(indices)
        capacity = self.capacity if capacity is None else capacity
        if capacity < max(self.length, 1):
            raise ValueError(f"capacity must be at least {max(self.length, 1)}, got {capacity}")
        new = object.__new__(KVCache)
        new.keys = [_copy_rows(k, indices, self.length, capacity) for k in self.keys]
        new.values = [_copy_rows(v, indices, self.length, capacity) for v in self.values]
        new.length = self.length
        return new

    def reorder(self, indices: np.ndarray) -> None:
        """Keep/duplicate batch rows (beam search picks which hypotheses continue)."""
        indices = np.asarray(indices)
        if len(indices) != self.batch_size:  # a new batch size: new buffers
            self.keys = [k[indices] for k in self.keys]
            self.values = [v[indices] for v in self.values]
            return
        moved = np.flatnonzero(indices != np.arange(self.batch_size))
        if len(moved) == 0:
            return  # every row stays where it is
        # same batch size: in place, only the rows that change and only the filled positions
        # (the right side is gathered into a copy first, so a row read and overwritten is safe)
        filled = slice(0, self.length)
        for buffers in (self.keys, self.values):
            for buffer in buffers:
                buffer[moved, :, filled] = buffer[indices[moved], :, filled]


def _copy_rows(buffer: np.ndarray, indices: np.ndarray, length: int, capacity: int) -> np.ndarray:
    """Rows `indices` of buffer (B, H, capacity_old, hs), in new buffers of `capacity` positions
    with the first `length` filled (the rest is never read before it is written)."""
    new = np.zeros((len(indices), buffer.shape[1], capacity, buffer.shape[3]), buffer.dtype)
    new[:, :, :length] = buffer[indices, :, :length]
    return new
