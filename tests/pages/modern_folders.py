"""Two random modern folders for the page tests, written as a hub download holds them (no
PyTorch): a Llama-shaped one (RMSNorm, rotary positions, 4 query heads on 2 key/value heads,
SwiGLU, tied embeddings) and a Qwen2-shaped one (q/k/v biases, 6 query heads on 2, untied).

`models_folder(tmp)` writes both beside the shipped-style tiny.npz (the default model);
`choose(at, name)` picks one in the sidebar."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.apptest_support import TINY
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer
from tinygpt.tokenizer.hf_json import load_tokenizer_json

SHAPES = {  # name -> (model_type, C, heads, kv heads, inner, tied)
    "llama": ("llama", 32, 4, 2, 48, True),
    "qwen2": ("qwen2", 48, 6, 2, 64, False),
}
LAYERS = 2
PROMPT = "Hello, world! It's a test of the tokens"


def tensors(name: str, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Random float32 weights in the Hugging Face names of the shape `name`."""
    kind, C, H, KV, inner, tied = SHAPES[name]
    kv = KV * C // H
    shapes = {"model.embed_tokens.weight": (vocab, C), "model.norm.weight": (C,)}
    if not tied:
        shapes["lm_head.weight"] = (vocab, C)
    for i in range(LAYERS):
        layer = {"input_layernorm.weight": (C,), "post_attention_layernorm.weight": (C,),
                 "self_attn.q_proj.weight": (C, C), "self_attn.k_proj.weight": (kv, C),
                 "self_attn.v_proj.weight": (kv, C), "self_attn.o_proj.weight": (C, C),
                 "mlp.gate_proj.weight": (inner, C), "mlp.up_proj.weight": (inner, C),
                 "mlp.down_proj.weight": (C, inner)}
        if kind == "qwen2":
            layer.update({"self_attn.q_proj.bias": (C,), "self_attn.k_proj.bias": (kv,),
                          "self_attn.v_proj.bias": (kv,)})
        shapes.update({f"model.layers.{i}.{part}": s for part, s in layer.items()})
    return {key: (1 + 0.2 * rng.standard_normal(s) if key.endswith("norm.weight")
                  else 0.3 * rng.standard_normal(s)).astype(np.float32)
            for key, s in shapes.items()}


def write_folder(folder: Path, name: str) -> None:
    """config.json, model.safetensors, tokenizer.json and the two small configs."""
    from safetensors.numpy import save_file

    kind, C, H, KV, inner, tied = SHAPES[name]
    folder.mkdir(parents=True)
    json_path = build_tokenizer("llama3" if kind == "llama" else "qwen2",
                                folder.parent / "tokenizers")
    shutil.copy(json_path, folder / "tokenizer.json")
    vocab = load_tokenizer_json(json_path).vocab_size
    config = {"architectures": ["LlamaForCausalLM" if kind == "llama" else "Qwen2ForCausalLM"],
              "model_type": kind, "hidden_act": "silu", "hidden_size": C,
              "intermediate_size": inner, "num_hidden_layers": LAYERS,
              "num_attention_heads": H, "num_key_value_heads": KV,
              "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "rope_scaling": None, "tie_word_embeddings": tied, "torch_dtype": "float32",
              "vocab_size": vocab, "bos_token_id": 0, "eos_token_id": 1}
    if kind == "qwen2":
        config["use_sliding_window"] = False
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1}))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GPT2Tokenizer", "model_max_length": 128}))
    save_file(tensors(name, vocab, np.random.default_rng(len(name))),
              str(folder / "model.safetensors"))


def models_folder(root: Path) -> Path:
    """root/ holding tiny.npz (the default model) and the folders llama/ and qwen2/."""
    shutil.copy(TINY, root / "tiny.npz")
    for name in SHAPES:
        write_folder(root / name, name)
    return root


def choose(at, name: str):
    """Pick the folder `name` in the sidebar's model menu and run again."""
    select = next(s for s in at.sidebar.selectbox if s.label == "Model")
    assert name in select.options, select.options
    return select.set_value(name).run()


def traced(root: Path, name: str, prompt: str = PROMPT):
    """The folder's model, the prompt's ids and the model's own trace, loaded apart from the
    app: what a page's numbers are checked against."""
    import tinygpt

    model, tok = tinygpt.load(root / name, root)
    ids = np.array(tok.encode(prompt))
    _, trace = model.run_with_trace(ids)
    return model, ids, trace


@pytest.fixture(scope="module")
def modern_models_dir(tmp_path_factory) -> Path:
    return models_folder(tmp_path_factory.mktemp("models"))


@pytest.fixture
def modern_models(modern_models_dir, monkeypatch) -> Path:
    """The app serves the folder of models_folder: tiny.npz by default, llama/ and qwen2/."""
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(modern_models_dir))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return modern_models_dir
