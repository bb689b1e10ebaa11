"""GPT-2 folders (Hugging Face layout): their config.json and tensor names.

A folder saved by transformers' `save_pretrained` for `GPT2LMHeadModel` holds config.json and
model.safetensors, and its tokenizer as vocab.json + merges.txt. This module turns the config
into a GPTConfig and the tensors into tinygpt's parameter names; the files are read by
tinygpt.checkpoint.files. Every config value is checked before it is used (tinygpt.caps):
counts within their caps, layer_norm_epsilon finite and in range, flags true or false.
"""

from __future__ import annotations

import numpy as np

from tinygpt.caps import COUNT_CAPS, NORM_EPS_RANGE, count, flag, real
from tinygpt.checkpoint.hf_modern import layer_index, put_once
from tinygpt.network.config import GPTConfig
from tinygpt.safe_io import CheckpointError

_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}

# Hugging Face GPT-2 names (after the block prefix h.{i}.) -> tinygpt names
GPT2_BLOCK_NAMES = {
    "ln_1.weight": "ln1.gamma",
    "ln_1.bias": "ln1.beta",
    "attn.c_attn.weight": "attn.W_qkv",  # Conv1D stores (in, out): x @ W, as we do
    "attn.c_attn.bias": "attn.b_qkv",
    "attn.c_proj.weight": "attn.W_proj",
    "attn.c_proj.bias": "attn.b_proj",
    "ln_2.weight": "ln2.gamma",
    "ln_2.bias": "ln2.beta",
    "mlp.c_fc.weight": "ffn.W1",
    "mlp.c_fc.bias": "ffn.b1",
    "mlp.c_proj.weight": "ffn.W2",
    "mlp.c_proj.bias": "ffn.b2",
}
_GPT2_TOP_NAMES = {
    "wte.weight": "embedding.embeddings",
    "wpe.weight": "embedding.position_embeddings",
    "ln_f.weight": "ln_f.gamma",
    "ln_f.bias": "ln_f.beta",
}
_GPT2_BUFFERS = ("attn.bias", "attn.masked_bias")  # the causal mask, not parameters


def gpt2_config(hf: dict, where: str = "config.json") -> GPTConfig:
    """GPTConfig from a Hugging Face GPT-2 config.json dict."""
    if not isinstance(hf, dict):
        raise CheckpointError(f"{where}: not a JSON object")
    if hf.get("model_type", "gpt2") != "gpt2":
        raise CheckpointError(f"{where}: model_type {hf.get('model_type')!r} is not supported "
                              "(gpt2, llama, qwen2)"[:200])
    act = hf.get("activation_function", "gelu_new")
    if not isinstance(act, str) or act not in _ACTIVATIONS:
        raise CheckpointError(f"{where}: activation_function {act!r} is not supported"[:200])
    if (flag(hf.get("scale_attn_by_inverse_layer_idx", False),
             "scale_attn_by_inverse_layer_idx", where)
            or not flag(hf.get("scale_attn_weights", True), "scale_attn_weights", where)):
        raise CheckpointError(f"{where}: non-standard attention scaling is not supported")
    positions = "n_positions" if "n_positions" in hf else "n_ctx"
    fields = {"vocab_size": "vocab_size", positions: "n_ctx", "n_embd": "n_embd",
              "n_head": "n_head", "n_layer": "n_layer"}  # config.json key -> GPTConfig field
    missing = [key for key in fields if key not in hf]
    if missing:
        raise CheckpointError(f"{where}: no {missing[0]}")
    n = {field: count(hf[key], key, COUNT_CAPS[field], where) for key, field in fields.items()}
    tied = flag(hf.get("tie_word_embeddings", True), "tie_word_embeddings", where)
    eps = real(hf.get("layer_norm_epsilon", 1e-5), "layer_norm_epsilon", NORM_EPS_RANGE, where)
    try:
        return GPTConfig(**n, tie_weights=tied, output_bias=False, layer_norm_eps=eps,
                         activation=_ACTIVATIONS[act])
    except ValueError as err:  # a combination GPTConfig refuses (heads that do not divide)
        raise CheckpointError(f"{where}: bad GPT-2 config: {err}"[:300]) from err


def gpt2_parameters(
    tensors: dict[str, np.ndarray], config: GPTConfig, where: str = "GPT-2 weights"
) -> dict[str, np.ndarray]:
    """Rename a GPT-2 state dict (NumPy arrays) to tinygpt parameter names, without copying."""
    params: dict[str, np.ndarray] = {}
    for full_name, arr in tensors.items():
        name = full_name.removeprefix("transformer.")
        parts = name.split(".", 2)
        block = layer_index(parts[1]) if len(parts) == 3 and parts[0] == "h" else None
        if block is not None and parts[2] in _GPT2_BUFFERS:
            continue
        if name == "lm_head.weight":
            if not config.tie_weights:  # Linear stores (out, in) = (V, C)
                put_once(params, "output.W_out", arr.T, full_name, where)
            continue
        if name in _GPT2_TOP_NAMES:
            put_once(params, _GPT2_TOP_NAMES[name], arr, full_name, where)
            continue
        ours = GPT2_BLOCK_NAMES.get(parts[2]) if block is not None else None
        if ours is None:
            raise CheckpointError(f"{where}: unexpected GPT-2 tensor {full_name!r}"[:300])
        put_once(params, f"blocks.{block}.{ours}", arr, full_name, where)
    return params
