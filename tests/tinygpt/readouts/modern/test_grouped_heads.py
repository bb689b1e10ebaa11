"""Grouped-query attention's readout: the sharing from the attention's own arithmetic, the KV
bytes from the config alone."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.modern_models import GPT2, LLAMA, prompt, random_model
from tinygpt.readouts.modern.grouped_heads import head_groups


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kv_bytes_per_token_from_config_arithmetic(dtype):
    model = random_model(LLAMA, dtype)
    cfg, size = model.config, np.dtype(dtype).itemsize
    groups = head_groups(model)
    hs = cfg.n_embd // cfg.n_head
    # keys and values, every layer, KV heads of hs numbers
    assert groups.bytes_per_token == 2 * cfg.n_layer * cfg.n_kv_head * hs * size
    assert groups.bytes_per_token_one_kv_per_query == 2 * cfg.n_layer * cfg.n_head * hs * size
    assert groups.saving == cfg.n_head / cfg.n_kv_head == 2


def test_query_heads_of_a_group_score_against_the_same_keys():
    model = random_model(LLAMA)
    _, trace = model.run_with_trace(prompt())
    groups = head_groups(model)
    assert list(groups.kv_head_of) == [0, 0, 1, 1]
    assert list(groups.queries_of(1)) == [2, 3]
    q, k = trace["blocks.0.attn.q_rot"], trace["blocks.0.attn.k_rot"]  # (H,T,hs), (KV,T,hs)
    for h in range(groups.n_head):
        by_hand = q[h] @ k[groups.kv_head_of[h]].T / np.sqrt(q.shape[-1])
        np.testing.assert_allclose(by_hand, trace["blocks.0.attn.scores"][h], rtol=1e-10)


def test_gpt2_has_one_kv_head_per_query_head():
    groups = head_groups(random_model(GPT2))
    assert groups.group_size == 1 and groups.saving == 1.0
    assert list(groups.kv_head_of) == [0, 1, 2, 3]
    assert groups.bytes_per_token == groups.bytes_per_token_one_kv_per_query
