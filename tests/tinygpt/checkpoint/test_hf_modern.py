"""tinygpt.checkpoint.hf_modern and the Llama / Qwen2 folder loader of tinygpt.checkpoint.files:
the config mapping, every refusal by name, and the caps of the GPT-2 folders.

The folders are written here with NumPy and the safetensors package (no torch): the names and
layouts transformers' save_pretrained uses. Parity with transformers is in
tests/parity/test_modern_parity.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tinygpt.checkpoint.files import load, load_modern_model
from tinygpt.checkpoint.hf_modern import modern_config, modern_parameters
from tinygpt.safe_io import CheckpointError

st = pytest.importorskip("safetensors.numpy", reason="the safetensors package writes the file")

LLAMA = {"model_type": "llama", "vocab_size": 20, "hidden_size": 8, "intermediate_size": 12,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "max_position_embeddings": 32, "rms_norm_eps": 1e-6, "rope_theta": 1000.0,
         "hidden_act": "silu", "tie_word_embeddings": False}


def llama_state(config: dict, dtype=np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    """Tensors named and shaped as LlamaForCausalLM's state dict (Linear: (out, in))."""
    rng = np.random.default_rng(seed)
    C, I, V = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * C // config["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (C,), p + "self_attn.q_proj.weight": (C, C),
                       p + "self_attn.k_proj.weight": (kv, C),
                       p + "self_attn.v_proj.weight": (kv, C),
                       p + "self_attn.o_proj.weight": (C, C),
                       p + "post_attention_layernorm.weight": (C,),
                       p + "mlp.gate_proj.weight": (I, C), p + "mlp.up_proj.weight": (I, C),
                       p + "mlp.down_proj.weight": (C, I)})
        if config["model_type"] == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (C,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
    if not config.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (V, C)
    return {n: rng.standard_normal(s).astype(dtype) for n, s in shapes.items()}


def write_folder(folder, config: dict, state: dict | None = None) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    state = llama_state(config) if state is None else state
    st.save_file(state, folder / "model.safetensors")
    return state


def test_llama_config_maps_to_the_modern_parts():
    c = modern_config(LLAMA)
    assert (c.norm, c.position, c.mlp) == ("rmsnorm", "rope", "swiglu")
    assert (c.n_head, c.n_kv_head, c.n_inner, c.rope_theta) == (4, 2, 12, 1000.0)
    assert (c.attn_bias, c.proj_bias, c.mlp_bias, c.tie_weights) == (False, False, False, False)
    assert c.layer_norm_eps == 1e-6 and c.n_ctx == 32


def test_qwen2_has_qkv_biases_and_no_output_projection_bias():
    c = modern_config({**LLAMA, "model_type": "qwen2", "sliding_window": 4096,
                       "use_sliding_window": False, "max_window_layers": 28})
    assert (c.attn_bias, c.proj_bias) == (True, False)


@pytest.mark.parametrize("change, named", [
    ({"model_type": "mistral"}, "mistral"),
    ({"model_type": "qwen2_moe"}, "qwen2_moe"),
    ({"hidden_act": "gelu"}, "gelu"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "linear"),
    ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "dynamic"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "yarn"),
    ({"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 8}, "sliding"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "sliding_attention"),
    ({"num_local_experts": 8}, "experts"),
    ({"head_dim": 4}, "head_dim"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
    ({"num_key_value_heads": 0}, "num_key_value_heads"),  # was silently n_head
    ({"num_key_value_heads": -2}, "num_key_value_heads"),
    ({"num_key_value_heads": 2.0}, "num_key_value_heads"),
    ({"num_attention_heads": None}, "num_attention_heads None is not an integer"),
])
def test_what_is_not_built_is_refused_by_name(change, named):
    with pytest.raises(CheckpointError, match=named):
        modern_config({**LLAMA, **change}, "m/config.json")


def test_rope_theta_is_read_where_each_transformers_version_writes_it():
    newer = {k: v for k, v in LLAMA.items() if k != "rope_theta"}
    newer["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e5}
    assert modern_config(newer).rope_theta == 5e5
    assert modern_config({**LLAMA, "rope_scaling": None}).rope_theta == 1000.0
    del newer["rope_parameters"]
    assert modern_config(newer).rope_theta == 10000.0  # Llama's default


def test_parameters_are_transposed_views_and_half_precision_is_upcast_at_load(tmp_path):
    state = llama_state(LLAMA)
    params = modern_parameters(state, modern_config(LLAMA))
    q = state["model.layers.0.self_attn.q_proj.weight"]
    assert np.shares_memory(params["blocks.0.attn.W_q"], q)
    np.testing.assert_array_equal(params["blocks.0.attn.W_q"], q.T)
    np.testing.assert_array_equal(params["output.W_out"], state["lm_head.weight"].T)
    half_state = llama_state(LLAMA, np.float16)
    half = modern_parameters(half_state, modern_config(LLAMA))  # renamed only: still views
    assert np.shares_memory(half["blocks.0.attn.W_q"],
                            half_state["model.layers.0.self_attn.q_proj.weight"])
    write_folder(tmp_path / "m", LLAMA, half_state)
    model = load_modern_model(tmp_path / "m", tmp_path)
    assert {a.dtype for a in model.parameters().values()} == {np.dtype(np.float32)}
    np.testing.assert_array_equal(model.parameters()["blocks.0.attn.W_q"],
                                  half_state["model.layers.0.self_attn.q_proj.weight"].T)


def test_loaded_weights_are_rows_of_their_own(tmp_path):
    """load lays every weight out as C-contiguous (in, out) rows in private memory (the
    layout the products read fastest): same numbers, no view of the file left."""
    state = write_folder(tmp_path / "m", LLAMA)
    model = load_modern_model(tmp_path / "m", tmp_path)
    params = model.parameters()
    for name, value in params.items():
        if name != "embedding.embeddings":  # below
            assert value.flags.c_contiguous and value.flags.owndata, name
    # E (V, C) is kept as E^T (C, V), the layout of a tied W_out: C-contiguous rows of its
    # own, and E is its transpose (a view).
    kept = params["embedding.embeddings"].T
    while isinstance(kept.base, np.ndarray):
        kept = kept.base
    assert kept.flags.c_contiguous and kept.flags.owndata
    assert kept.shape == (LLAMA["hidden_size"], LLAMA["vocab_size"])
    np.testing.assert_array_equal(params["blocks.1.ffn.W_down"],
                                  state["model.layers.1.mlp.down_proj.weight"].T)
    np.testing.assert_array_equal(params["embedding.embeddings"],
                                  state["model.embed_tokens.weight"])


@pytest.mark.parametrize("index", ["\u00b2", "\u0663", "03", "1\uff10", "+1", " 1"])
def test_a_layer_number_that_is_not_plain_ascii_is_refused(index):
    """'²'.isdigit() is True and int('²') raised a plain ValueError (not remembered by the
    app); '٣' and '03' were read as 3 and silently replaced layer 3."""
    state = llama_state(LLAMA)
    state[f"model.layers.{index}.input_layernorm.weight"] = np.ones(8, np.float32)
    with pytest.raises(CheckpointError, match="unexpected tensor"):
        modern_parameters(state, modern_config(LLAMA), "m/model.safetensors")


def test_two_names_for_one_parameter_are_refused():
    state = llama_state(LLAMA)
    state["layers.0.input_layernorm.weight"] = np.ones(8, np.float32)  # no "model." prefix
    with pytest.raises(CheckpointError, match="repeats blocks.0.ln1.gamma"):
        modern_parameters(state, modern_config(LLAMA), "m/model.safetensors")


def test_a_junk_half_precision_file_is_refused_before_anything_is_widened(tmp_path, monkeypatch):
    """The float32 copy of a 16-bit file is made only after every name and shape is checked."""
    import tinygpt.checkpoint.files as files

    widened = []
    monkeypatch.setattr(files, "widen_half", lambda a: widened.append(a) or a.astype(np.float32))
    state = llama_state(LLAMA, np.float16)
    state["model.layers.0.junk.weight"] = np.zeros((64, 64), np.float16)
    write_folder(tmp_path / "junk", LLAMA, state)
    with pytest.raises(CheckpointError, match="junk"):
        load_modern_model(tmp_path / "junk", tmp_path)
    state = llama_state(LLAMA, np.float16)
    state["model.norm.weight"] = np.zeros(9, np.float16)
    write_folder(tmp_path / "shape", LLAMA, state)
    with pytest.raises(CheckpointError, match="shape"):
        load_modern_model(tmp_path / "shape", tmp_path)
    assert widened == []
    write_folder(tmp_path / "good", LLAMA, llama_state(LLAMA, np.float16))
    load_modern_model(tmp_path / "good", tmp_path)
    assert len(widened) == len(llama_state(LLAMA))  # the spy does see the widening


def test_a_folder_loads_and_computes_what_its_weights_say(tmp_path):
    state = write_folder(tmp_path / "m", LLAMA)
    model = load_modern_model(tmp_path / "m", tmp_path)
    assert model.metadata == {"source": "llama", "path": "m"}
    ids = np.array([1, 5, 7, 19])
    x = state["model.embed_tokens.weight"][ids]  # the first step by hand: RMSNorm of x
    gamma = state["model.layers.0.input_layernorm.weight"]
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * gamma
    _, trace = model.run_with_trace(ids)
    np.testing.assert_allclose(trace["blocks.0.ln1.output"], expected, rtol=1e-5)
    assert model.forward(ids).shape == (4, 20)


def test_load_refuses_the_tokenizer_part_clearly_until_tokenizer_json_is_read(tmp_path):
    write_folder(tmp_path / "m", LLAMA)
    with pytest.raises(CheckpointError, match="tokenizer.json") as caught:
        load(tmp_path / "m", tmp_path)
    assert str(tmp_path) not in str(caught.value)  # no server path in the message


def test_tied_files_may_repeat_the_embedding_as_lm_head(tmp_path):
    config = {**LLAMA, "tie_word_embeddings": True}
    state = llama_state(config)
    state["lm_head.weight"] = state["model.embed_tokens.weight"].copy()
    write_folder(tmp_path / "m", config, state)
    model = load_modern_model(tmp_path / "m", tmp_path)
    assert model.output.tied


@pytest.mark.parametrize("damage, message", [
    (lambda s: s.update({"model.layers.0.mlp.up_proj.weight": np.full((12, 8), np.nan,
                                                                       np.float32)}), "NaN"),
    (lambda s: s.pop("model.norm.weight"), "missing"),
    (lambda s: s.update({"model.layers.0.self_attn.k_proj.weight": np.zeros((8, 8),
                                                                           np.float32)}), "shape"),
    (lambda s: s.update({"model.layers.0.block_sparse_moe.gate.weight": np.zeros(2, np.float32)}),
     "block_sparse_moe"),
])
def test_bad_weights_are_refused_naming_the_file(tmp_path, damage, message):
    state = llama_state(LLAMA)
    damage(state)
    write_folder(tmp_path / "m", LLAMA, state)
    with pytest.raises(CheckpointError, match=message) as caught:
        load_modern_model(tmp_path / "m", tmp_path)
    assert "m/model.safetensors" in str(caught.value) and str(tmp_path) not in str(caught.value)


def test_a_config_beyond_the_size_cap_is_refused_before_reading_weights(tmp_path):
    huge = {**LLAMA, "vocab_size": 2**20, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8}
    write_folder(tmp_path / "m", huge, llama_state(LLAMA))
    with pytest.raises(CheckpointError, match="limit"):
        load_modern_model(tmp_path / "m", tmp_path)


def test_weights_linked_from_outside_the_models_folder_are_refused(tmp_path):
    write_folder(tmp_path / "outside", LLAMA)
    inside = tmp_path / "models" / "m"
    inside.mkdir(parents=True)
    (inside / "config.json").write_text(json.dumps(LLAMA))
    os.symlink(tmp_path / "outside" / "model.safetensors", inside / "model.safetensors")
    with pytest.raises(CheckpointError, match="outside"):
        load_modern_model(inside, tmp_path / "models")
