"""Several sequences in one pass, each with its own KV cache and length.

A decoding step reads every weight of the model for a few rows, and that read, not the
arithmetic, sets its time; students' generations that step together share it. Every row goes
through the same matrices (one product each for all N rows), and attention keeps to each
part's own cache. Each part gets what GPT.forward_cached(new_ids, cache, last_only=True)
gives it alone, up to float rounding (tests/tinygpt/fast/test_parts.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from tinygpt.network.attention import Attention, attend
from tinygpt.network.functional import linear
from tinygpt.network.kv_cache import KVCache
from tinygpt.network.layers import TransformerBlock
from tinygpt.network.model import GPT


class KVPart(NamedTuple):
    """One sequence's share of a step of several: its key and value buffers (b, KV, capacity,
    hs) for this layer, the position its new tokens start at, and how many new tokens each of
    its b rows brings."""

    keys: np.ndarray
    values: np.ndarray
    start: int
    new: int


def forward_parts(model: GPT, parts: Sequence[tuple[np.ndarray, KVCache]]) -> list[np.ndarray]:
    """parts: [(new_ids (b, t), cache), ...] -> for each part the logits (b, V) of its rows'
    last new position; each cache grows by its t. Every part is checked before any is run."""
    checked = [(model.check_cached(ids, cache)[0], cache) for ids, cache in parts]
    if len({id(cache) for _, cache in checked}) < len(checked):
        raise ValueError("each part needs a cache of its own")
    C = model.config.embedding_dim
    x = np.concatenate([model.embedding.forward(ids, start=cache.length).reshape(-1, C)
                        for ids, cache in checked])[None]  # (1, N, C): every part's rows
    for i, block in enumerate(model.blocks):
        kv = [KVPart(cache.keys[i], cache.values[i], cache.length, ids.shape[1])
              for ids, cache in checked]
        x = block_parts(block, x, kv)  # (1, N, C)
    last, first = [], 0  # where each row's last new position is among the N rows
    for ids, _ in checked:
        b, t = ids.shape
        last.append(first + np.arange(b) * t + t - 1)
        first += b * t
    h = model.ln_f.forward(x[:, np.concatenate(last)])  # (1, R, C): R rows, their last only
    logits = model.output.forward(h)[0]  # (R, V)
    for ids, cache in checked:
        cache.length += ids.shape[1]
    return np.split(logits, np.cumsum([ids.shape[0] for ids, _ in checked])[:-1])


def block_parts(block: TransformerBlock, x: np.ndarray, parts: list[KVPart]) -> np.ndarray:
    """TransformerBlock.forward without interventions, for x (1, N, C) of several parts:
    x + attention(norm1(x)), then + feed-forward(norm2(x))."""
    x = x + attention_parts(block.attn, block.ln1.forward(x), parts)  # (1, N, C)
    return x + block.ffn.forward(block.ln2.forward(x))


def attention_parts(attn: Attention, x: np.ndarray, parts: list[KVPart]) -> np.ndarray:
    """x (1, N, C): the new rows of several sequences, part after part -> (1, N, C).

    The query/key/value and output projections are one product each for all N rows, so the
    weights are read once for everyone. The attention itself is per part: each part writes
    its keys and values into its own cache and its queries see that cache only."""
    q_all, k_all, v_all = attn.project(x[0])  # (N, C), (N, KV hs), (N, KV hs)
    heads, first = [], 0
    for part in parts:
        b, t = part.keys.shape[0], part.new
        rows = slice(first, first + b * t)
        first += b * t
        q, k, v = (attn.split_heads(a[rows].reshape(b, t, -1), n) for a, n in
                   ((q_all, attn.n_head), (k_all, attn.n_kv_head), (v_all, attn.n_kv_head)))
        if attn.rotary is not None:
            q, k = attn.rotary.forward(q, part.start), attn.rotary.forward(k, part.start)
        k, v = attn.into_cache(part.keys, part.values, part.start, k, v)  # (b, KV, T_k, hs)
        h = attend(q, k, v, start=part.start).heads  # (b, H, t, hs)
        heads.append(attn.merge_heads(h).reshape(b * t, -1))  # (b t, C)
    y = np.concatenate(heads)  # (N, C): heads side by side, parts one after the other
    return linear(y, attn.W_proj, attn.b_proj)[None]  # (1, N, C)
