"""Grouped-query attention: which query heads share which key/value head, and what the sharing
saves in the KV cache.

With n_head query heads and KV key/value heads, query head h reads key/value head h // G,
G = n_head / KV (transformers' `repeat_kv` order; tinygpt.network.attention). A KV cache keeps
KV heads per layer, not n_head, so each token costs n_head / KV times fewer bytes than in the
same model with one key/value head per query head. The bytes come from
tinygpt.readouts.kv_reuse, which the Decoding page's KV-cache view reads too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.network.model import GPT
from tinygpt.readouts.kv_reuse import kv_cache_reuse


@dataclass(frozen=True)
class HeadGroups:
    """How a model's query heads share its key/value heads, and the KV cache's bytes per token."""

    n_head: int
    kv_heads: int
    group_size: int  # query heads per key/value head (1: no sharing, GPT-2)
    kv_head_of: np.ndarray  # (n_head,) the key/value head each query head reads
    bytes_per_token: int  # keys + values of one token, every layer, this model
    bytes_per_token_one_kv_per_query: int  # the same with n_head key/value heads
    saving: float  # how many times fewer bytes: n_head / kv_heads

    def queries_of(self, kv_head: int) -> np.ndarray:
        """The query heads that read key/value head `kv_head`: (group_size,)."""
        return np.flatnonzero(self.kv_head_of == int(kv_head))


def head_groups(model: GPT) -> HeadGroups:
    """The model's grouping of heads and its KV-cache bytes per token (nothing is run)."""
    cfg = model.config
    reuse = kv_cache_reuse(model, 1, 0)  # a one-token prompt: only the per-token sizes are read
    per_token, full = reuse.bytes_per_token, reuse.bytes_per_token_one_kv_per_query
    return HeadGroups(
        n_head=cfg.n_head,
        kv_heads=cfg.kv_heads,
        group_size=cfg.group_size,
        kv_head_of=np.arange(cfg.n_head) // cfg.group_size,
        bytes_per_token=per_token,
        bytes_per_token_one_kv_per_query=full,
        saving=full / per_token,
    )
