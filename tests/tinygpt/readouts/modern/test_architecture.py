"""tinygpt.readouts.modern.architecture against independent counts: the parameters of each part
counted on transformers' own models (LlamaForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel,
grouped by their tensor names), the KV-cache bytes from the Hugging Face config's arithmetic,
and the next-token guess against a separate forward."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.checkpoint.hf_gpt2 import gpt2_config
from tinygpt.checkpoint.hf_modern import modern_config
from tinygpt.network.config import GPTConfig
from tinygpt.network.model import GPT
from tinygpt.readouts.modern.architecture import (
    PARTS,
    components,
    kv_bytes_per_token,
    last_tokens,
    next_token,
    parameter_table,
    parameters_by_part,
    part_of,
    same_cuts,
)

LLAMA = dict(model_type="llama", vocab_size=96, hidden_size=48, intermediate_size=80,
             num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
             max_position_embeddings=64, rms_norm_eps=1e-5, rope_theta=500.0,
             hidden_act="silu", tie_word_embeddings=True)
QWEN2 = {**LLAMA, "model_type": "qwen2", "num_key_value_heads": 3, "tie_word_embeddings": False}
GPT2 = dict(model_type="gpt2", vocab_size=96, n_embd=48, n_layer=2, n_head=6, n_positions=64)


def hf_part(name: str) -> str:
    """Our part for a transformers parameter name (their naming, not ours)."""
    if "embed_tokens" in name or ".wte." in name:
        return "token embedding"
    if ".wpe." in name:
        return "position embedding"
    if name.startswith("lm_head"):
        return "output layer"
    if "self_attn" in name or ".attn." in name:
        return "attention"
    if ".mlp." in name:
        return "feed-forward"
    return "normalisation"


def hf_counts(hf_model) -> dict[str, int]:
    counts = dict.fromkeys(PARTS, 0)
    for name, p in hf_model.named_parameters():  # a tied lm_head is listed once, as the embedding
        counts[hf_part(name)] += p.numel()
    return counts


def hf_model(settings: dict):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    kind = settings["model_type"]
    fields = {k: v for k, v in settings.items() if k != "model_type"}
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(**fields))
    config_class, model_class = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}[kind]
    return model_class(config_class(**fields))


def our_config(settings: dict) -> GPTConfig:
    if settings["model_type"] == "gpt2":
        return gpt2_config(settings)
    return modern_config(settings)


@pytest.mark.parametrize("settings", [LLAMA, QWEN2, GPT2], ids=["llama", "qwen2", "gpt2"])
def test_parameters_by_part_match_transformers_part_by_part(settings):
    config = our_config(settings)
    ours = parameters_by_part(config)
    assert ours == hf_counts(hf_model(settings))
    assert sum(ours.values()) == GPT(config).num_parameters()


def test_parameter_table_has_a_row_per_model_adding_up_to_its_total():
    configs = [our_config(settings) for settings in (LLAMA, QWEN2, GPT2)]
    table = parameter_table(configs)  # (M, P)
    assert table.shape == (3, len(PARTS)) and table.dtype == np.int64
    assert table.sum(axis=1).tolist() == [GPT(c).num_parameters() for c in configs]


@pytest.mark.parametrize("settings", [LLAMA, QWEN2, GPT2], ids=["llama", "qwen2", "gpt2"])
def test_kv_bytes_per_token_from_the_hugging_face_config(settings):
    config = our_config(settings)
    if settings["model_type"] == "gpt2":
        heads, width, layers = settings["n_head"], settings["n_embd"], settings["n_layer"]
        kv_heads = heads
    else:
        heads, width = settings["num_attention_heads"], settings["hidden_size"]
        kv_heads, layers = settings["num_key_value_heads"], settings["num_hidden_layers"]
    # a key and a value, kv_heads x (width / heads) float32 numbers each, in every layer
    assert kv_bytes_per_token(config) == 2 * kv_heads * (width // heads) * layers * 4
    assert kv_bytes_per_token(config, 2) * 2 == kv_bytes_per_token(config)
    # one key/value head per query head: the group size times more
    full = kv_bytes_per_token(config, kv_heads=heads)
    assert full == 2 * width * layers * 4 == kv_bytes_per_token(config) * config.group_size


def test_a_rotary_tied_model_has_no_position_table_and_no_output_matrix_of_its_own():
    counts = parameters_by_part(our_config(LLAMA))
    assert counts["position embedding"] == 0 and counts["output layer"] == 0
    assert parameters_by_part(our_config(QWEN2))["output layer"] == 96 * 48


def test_part_names_cover_every_parameter_name():
    for settings in (LLAMA, QWEN2, GPT2):
        model = GPT(our_config(settings))
        assert {part_of(name) for name in model.parameters()} <= set(PARTS)


def test_components_name_the_parts_of_each_family():
    llama, qwen, gpt2 = (components(our_config(s)) for s in (LLAMA, QWEN2, GPT2))
    assert (llama["family"], qwen["family"], gpt2["family"]) == (
        "Llama-style", "Qwen2-style", "GPT-2-style")
    assert llama["normalisation"] == "RMSNorm" and gpt2["normalisation"] == "LayerNorm"
    assert llama["heads"] == "6 query heads, 2 key/value heads"
    assert llama["output layer"].startswith("tied") and qwen["output layer"] == "its own W_out"
    assert qwen["biases"] == "q/k/v" and llama["biases"] == "none"
    assert llama["vocabulary"] == "96 tokens"


def test_next_token_is_the_softmax_of_a_separate_forward():
    model = GPT(our_config(LLAMA))
    ids = np.array([3, 14, 15, 9, 2, 6])
    guess = next_token(model, ids, 5)
    last = model.forward(ids[None])[0, -1].astype(np.float64)  # a forward of its own, batched
    probs = np.exp(last - last.max())
    probs /= probs.sum()
    order = np.argsort(-probs)[:5]
    np.testing.assert_array_equal(guess.ids, order)
    np.testing.assert_allclose(guess.probs, probs[order], rtol=1e-4)
    assert guess.tokens_read == 6
    with pytest.raises(ValueError):
        next_token(model, np.array([], dtype=np.int64), 5)


def test_last_tokens_and_same_cuts():
    np.testing.assert_array_equal(last_tokens([1, 2, 3, 4], 2), [3, 4])
    assert len(last_tokens([1, 2], 0)) == 0
    assert same_cuts([["a", "b"], ["a", "b"]]) and not same_cuts([["a", "b"], ["ab"]])
