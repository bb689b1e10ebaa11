"""Grouped-query heads without repeating the keys.

Query head h reads key/value head h // G (transformers' `repeat_kv` order), G = H / KV. Rather
than repeating each key head G times in memory, the G query heads of a group are stacked as
G*T rows against their one key head: a KV cache holds KV heads, not H, and with G = 1 the
arrays are unchanged (views), so GPT-2's products are the plain ones.
"""

from __future__ import annotations

import numpy as np


def grouped(t: np.ndarray, kv_heads: int) -> np.ndarray:
    """(B, H, T, n) -> (B, KV, G*T, n): each key/value head's G query heads, stacked by rows."""
    B, H, T, n = t.shape
    return t.reshape(B, kv_heads, (H // kv_heads) * T, n)


def ungrouped(t: np.ndarray, n_head: int) -> np.ndarray:
    """(B, KV, G*T, n) -> (B, H, T, n), the inverse of grouped."""
    B, KV, GT, n = t.shape
    return t.reshape(B, n_head, GT // (n_head // KV), n)


def scores_of(q_scaled: np.ndarray, k: np.ndarray) -> np.ndarray:
    """q_scaled (B, H, T, hs), k (B, KV, T_k, hs) -> scores (B, H, T, T_k): each query head
    against its group's key head."""
    scores = grouped(q_scaled, k.shape[1]) @ k.transpose(0, 1, 3, 2)  # (B, KV, G*T, T_k)
    return ungrouped(scores, q_scaled.shape[1])


def mix(weights: np.ndarray, v: np.ndarray) -> np.ndarray:
    """weights (B, H, T, T_k) @ v (B, KV, T_k, hs) -> heads (B, H, T, hs), group by group."""
    return ungrouped(grouped(weights, v.shape[1]) @ v, weights.shape[1])
