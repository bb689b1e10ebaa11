"""Small GGUF files written with the gguf package's GGUFWriter, as llama.cpp's converter
writes them: Llama / Qwen2 weights (Hugging Face layout) and a tokenizer.json's vocabulary.

- `write_gguf(path, arch, tokenizer_json, types)`: returns the Hugging Face state dict whose
  dequantized weights the file holds (`reference`): each matrix quantized, in the file, to
  the next type of `types` (in turn), and dequantized back here on the UNPERMUTED rows; so a
  loader that undoes llama.cpp's row permutation wrongly gives other weights.
- The K-quant types have no quantizer in the gguf package: their blocks are random bytes
  with small, finite scales written over the scale fields.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf package writes the files")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants  # noqa: E402

ALL_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K",
             "Q4_K", "Q5_K", "Q6_K"]
# where the f16 scale fields of each K-quant block lie (byte offsets)
_K_SCALES = {"Q2_K": (-4, -2), "Q3_K": (-2,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (-2,)}
# hidden 256, inner 512: every matrix is whole blocks of 256 (the K-quants' block)
SMALL = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
             rope_theta=10000.0)
PRE = {"smollm2": "smollm", "qwen2": "qwen2", "llama3": "llama-bpe", "gpt2": "gpt-2"}


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf permutation of query / key rows (Hugging Face halves
    -> neighbouring pairs), written from its source, independently of the loader."""
    return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def quantized(w: np.ndarray, kind: str, rng) -> tuple[np.ndarray, np.ndarray]:
    """(bytes or array to write, what they dequantize to) for a float32 matrix."""
    qtype = T[kind]
    if kind == "F32":
        return w, w
    if kind == "F16":
        return w.astype(np.float16), w.astype(np.float16).astype(np.float32)
    if kind in _K_SCALES:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (w.shape[0], w.shape[1] // block, size), dtype=np.uint8)
        scale = np.frombuffer(np.float16(0.0002).tobytes(), np.uint8)
        for at in _K_SCALES[kind]:
            raw[..., at:at + 2 if at + 2 else None] = scale
        raw = raw.reshape(w.shape[0], -1)
        return raw, quants.dequantize(raw, qtype)
    raw = quants.quantize(w, qtype)
    return raw, quants.dequantize(raw, qtype)


def hf_state(arch: str, vocab: int, tie: bool, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    C, inner = SMALL["hidden_size"], SMALL["intermediate_size"]
    kv = SMALL["num_key_value_heads"] * C // SMALL["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": (vocab, C), "model.norm.weight": (C,)}
    for i in range(SMALL["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (C,), p + "self_attn.q_proj.weight": (C, C),
                       p + "self_attn.k_proj.weight": (kv, C),
                       p + "self_attn.v_proj.weight": (kv, C),
                       p + "self_attn.o_proj.weight": (C, C),
                       p + "post_attention_layernorm.weight": (C,),
                       p + "mlp.gate_proj.weight": (inner, C), p + "mlp.up_proj.weight": (inner, C),
                       p + "mlp.down_proj.weight": (C, inner)})
        if arch == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (C,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
    if not tie:
        shapes["lm_head.weight"] = (vocab, C)
    state = {n: (rng.standard_normal(s) * (0.08 if len(s) == 2 else 0.1)).astype(np.float32)
             for n, s in shapes.items()}
    for n in state:
        if "layernorm" in n or n.endswith("norm.weight"):
            state[n] = 1.0 + state[n]
    return state


_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
          "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
          "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
          "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(name: str) -> str:
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
           "output_norm.weight", "lm_head.weight": "output.weight"}
    if name in top:
        return top[name]
    _, _, i, rest = name.split(".", 3)
    part, kind = rest.rsplit(".", 1)
    return f"blk.{i}.{_NAMES[part]}.{kind}"


def vocabulary(tokenizer_json: Path) -> tuple[list[str], list[str], list[int]]:
    """(tokens by id, merges "a b", token types) of a tokenizer.json."""
    data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
    by_id = {i: t for t, i in data["model"]["vocab"].items()}
    types = {}
    for added in data["added_tokens"]:
        by_id[added["id"]] = added["content"]
        types[added["id"]] = 3 if added["special"] else 4
    tokens = [by_id[i] for i in range(len(by_id))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    return tokens, merges, [types.get(i, 1) for i in range(len(tokens))]


def _metadata(w, style: str, tokens, merges, types, edits: dict) -> None:
    w.add_context_length(SMALL["max_position_embeddings"])
    w.add_embedding_length(SMALL["hidden_size"])
    w.add_block_count(SMALL["num_hidden_layers"])
    w.add_feed_forward_length(SMALL["intermediate_size"])
    w.add_head_count(SMALL["num_attention_heads"])
    w.add_head_count_kv(SMALL["num_key_value_heads"])
    w.add_rope_freq_base(SMALL["rope_theta"])
    w.add_layer_norm_rms_eps(SMALL["rms_norm_eps"])
    w.add_rope_dimension_count(SMALL["hidden_size"] // SMALL["num_attention_heads"])
    w.add_tokenizer_model(edits.get("tokenizer.ggml.model", "gpt2"))
    w.add_tokenizer_pre(edits.get("tokenizer.ggml.pre", PRE[style]))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['content'] }}{% endfor %}")


def write_gguf(path: Path, arch: str, tokenizer_json: Path, style: str,
               types: list[str] = ALL_TYPES, tie: bool = False, seed: int = 0,
               edits: dict | None = None) -> dict[str, np.ndarray]:
    """Write a GGUF file; returns the Hugging Face state dict it holds (dequantized).
    `edits`: metadata strings written instead of the right ones (general.architecture,
    tokenizer.ggml.model, tokenizer.ggml.pre)."""
    edits = edits or {}
    tokens, merges, token_types = vocabulary(tokenizer_json)
    state = hf_state(arch, len(tokens), tie, seed)
    rng = np.random.default_rng(seed + 1)
    w = gguf.GGUFWriter(str(path), edits.get("general.architecture", arch))
    _metadata(w, style, tokens, merges, token_types, edits)
    reference, turn = {}, 0
    heads = {"q_proj": SMALL["num_attention_heads"], "k_proj": SMALL["num_key_value_heads"]}
    for name, weight in state.items():
        kind = "F32"
        if weight.ndim == 2:
            kind, turn = types[turn % len(types)], turn + 1
        data, reference[name] = quantized(weight, kind, rng)
        part = name.split(".")[-2]
        if arch == "llama" and part in heads:  # quantization is row by row: rows commute
            data = permute(data, heads[part])
        if kind in ("F32", "F16"):
            w.add_tensor(gguf_name(name), data)
        else:
            w.add_tensor(gguf_name(name), data, raw_dtype=T[kind])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return reference
