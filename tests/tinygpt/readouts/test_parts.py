"""tinygpt.readouts.parts: each family and part named from the config alone."""

from __future__ import annotations

from tinygpt.network.config import GPTConfig
from tinygpt.readouts.parts import GPT2, LLAMA, MIXED, QWEN2, family, norm_symbol, parts_of

BASE = dict(vocab_size=32, n_ctx=16, n_embd=24, n_head=6, n_layer=1)
MODERN = dict(norm="rmsnorm", position="rope", mlp="swiglu", n_kv_head=2, attn_bias=False,
              proj_bias=False, mlp_bias=False)


def test_families():
    assert family(GPTConfig(**BASE)) == GPT2
    assert family(GPTConfig(**BASE, **MODERN)) == LLAMA
    assert family(GPTConfig(**BASE, **{**MODERN, "attn_bias": True})) == QWEN2
    assert family(GPTConfig(**BASE, norm="rmsnorm")) == MIXED


def test_a_gpt2_model_is_named_with_layernorm_and_a_position_table():
    parts = parts_of(GPTConfig(**BASE))
    assert parts.norm == "LayerNorm" and parts.position_table
    assert parts.positions == "learned position embeddings"
    assert parts.attention == "6 heads, each with its own keys and values"
    assert parts.mlp == "GELU feed-forward" and "96" in parts.mlp_does  # 4 x 24 wide
    assert r"\beta" in parts.norm_formula and parts.tying.startswith("tied")
    assert r"\mathrm{LN}_f" in parts.output_formula


def test_a_llama_model_is_named_with_rmsnorm_rotary_positions_and_shared_kv_heads():
    parts = parts_of(GPTConfig(**BASE, **MODERN, tie_weights=False))
    assert parts.norm == "RMSNorm" and not parts.position_table
    assert parts.positions == "rotary positions inside attention"
    assert parts.attention.startswith("6 query heads share 2 key/value heads")
    assert "3 query heads per key/value head" in parts.attention
    assert parts.mlp == "SwiGLU feed-forward" and r"\beta" not in parts.norm_formula
    assert parts.tying.startswith("untied") and parts.norm_stats.endswith("(RMS)")
    assert norm_symbol(GPTConfig(**BASE, **MODERN), "1") == r"\mathrm{RMSNorm}_1"
    assert norm_symbol(GPTConfig(**BASE), "f") == r"\mathrm{LN}_f"
