"""tinygpt.checkpoint.hf_gpt2: a GPT-2 config.json read value by value, every count within its
cap, layer_norm_epsilon finite and in range, every flag a real true / false (the folder loads
are tested in tests/tinygpt/checkpoint/test_files.py)."""

from __future__ import annotations

import pytest

from tinygpt.checkpoint.hf_gpt2 import gpt2_config
from tinygpt.safe_io import CheckpointError

GPT2 = {"model_type": "gpt2", "vocab_size": 300, "n_positions": 32, "n_embd": 16, "n_head": 2,
        "n_layer": 2, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
        "tie_word_embeddings": True, "scale_attn_weights": True}


def test_a_real_config_maps_to_gpt2_parts():
    c = gpt2_config(GPT2)
    assert (c.vocab_size, c.n_ctx, c.n_embd, c.n_head, c.n_layer) == (300, 32, 16, 2, 2)
    assert c.tie_weights and c.norm == "layernorm" and c.activation == "gelu_tanh"
    old = {k: v for k, v in GPT2.items() if k != "n_positions"}
    assert gpt2_config({**old, "n_ctx": 64}).n_ctx == 64  # older files name it n_ctx


@pytest.mark.parametrize("change, message", [
    ({"n_layer": 10**9}, "n_layer 1000000000 is outside 1 .. 1,024"),
    ({"n_positions": 2**62}, "n_positions 4611686018427387904 is outside"),
    ({"vocab_size": 12.0}, "vocab_size 12.0 is not an integer"),
    ({"layer_norm_epsilon": float("inf")}, "layer_norm_epsilon inf is not a finite number"),
    ({"layer_norm_epsilon": "1e-5"}, "layer_norm_epsilon '1e-5' is not a number"),
    ({"layer_norm_epsilon": -1e-5}, "outside the range"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings 'no' is not true or false"),
    ({"scale_attn_weights": "no"}, "scale_attn_weights 'no' is not true or false"),
    ({"scale_attn_by_inverse_layer_idx": 1}, "is not true or false"),
    ({"scale_attn_weights": False}, "non-standard attention scaling"),
    ({"n_head": 3}, "divisible"),
])
def test_every_lie_is_refused_by_name(change, message):
    with pytest.raises(CheckpointError, match=message) as err:
        gpt2_config({**GPT2, **change}, "g/config.json")
    assert str(err.value).startswith("g/config.json: ")


def test_a_missing_count_is_named():
    config = dict(GPT2)
    del config["n_embd"]
    with pytest.raises(CheckpointError, match="no n_embd"):
        gpt2_config(config, "g/config.json")
