"""tinygpt.network.config: the new fields have GPT-2's defaults and refuse what they cannot be."""

from __future__ import annotations

import pytest

from tinygpt.network.config import GPTConfig
from tinygpt.network.model import parameter_shapes

BASE = dict(vocab_size=50, n_ctx=16, n_embd=24, n_head=6, n_layer=2)


def test_defaults_are_gpt2s_parts():
    c = GPTConfig(**BASE)
    assert (c.norm, c.position, c.mlp, c.n_kv_head) == ("layernorm", "learned", "gelu", None)
    assert (c.kv_heads, c.group_size, c.inner_dim) == (6, 1, 96)
    assert "blocks.0.attn.W_qkv" in parameter_shapes(c)


def test_grouped_heads_and_inner_width():
    c = GPTConfig(**BASE, n_kv_head=2, n_inner=40, mlp="swiglu")
    assert (c.kv_heads, c.group_size, c.inner_dim) == (2, 3, 40)
    shapes = parameter_shapes(c)
    assert shapes["blocks.1.attn.W_k"] == (24, 8) and shapes["blocks.1.ffn.W_gate"] == (24, 40)
    assert "blocks.1.attn.W_qkv" not in shapes


@pytest.mark.parametrize("change, message", [
    ({"norm": "batchnorm"}, "norm"),
    ({"position": "alibi"}, "position"),
    ({"mlp": "geglu"}, "mlp"),
    ({"n_kv_head": 4}, "multiple of n_kv_head"),
    ({"n_kv_head": 0}, "n_kv_head"),
    ({"n_inner": -3}, "n_inner"),
    ({"rope_theta": 0.5}, "rope_theta"),
    ({"attn_bias": 1}, "attn_bias"),
    ({"position": "rope", "n_embd": 18}, "even"),
])
def test_bad_values_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**BASE, **change})
