"""Llama and Qwen2 folders (Hugging Face layout): their config.json and tensor names.

A folder saved by transformers' `save_pretrained` for `LlamaForCausalLM` or `Qwen2ForCausalLM`
(SmolLM2 is a Llama) holds config.json and model.safetensors. This module turns the config
into a GPTConfig and the tensors into tinygpt's parameter names; the files are read by
tinygpt.checkpoint.files with every cap of the GPT-2 folders.

What is refused, by name: another model_type, an activation other than SiLU, rope scaling
other than none/default (linear, dynamic, yarn, llama3, ...), a sliding window that is
switched on, mixtures of experts, and a head size other than hidden_size / heads.
"""

from __future__ import annotations

import numpy as np

from tinygpt.caps import COUNT_CAPS, MAX_HEADS, NORM_EPS_RANGE, ROPE_THETA_RANGE, count, flag, real
from tinygpt.network.config import GPTConfig
from tinygpt.safe_io import CheckpointError

MODERN_TYPES = ("llama", "qwen2")

# Hugging Face names (after "model.layers.{i}.") -> tinygpt names, and whether to transpose:
# nn.Linear stores (out, in), tinygpt multiplies x @ W with W (in, out)
_BLOCK_NAMES = {
    "input_layernorm.weight": ("ln1.gamma", False),
    "self_attn.q_proj.weight": ("attn.W_q", True),
    "self_attn.q_proj.bias": ("attn.b_q", False),
    "self_attn.k_proj.weight": ("attn.W_k", True),
    "self_attn.k_proj.bias": ("attn.b_k", False),
    "self_attn.v_proj.weight": ("attn.W_v", True),
    "self_attn.v_proj.bias": ("attn.b_v", False),
    "self_attn.o_proj.weight": ("attn.W_proj", True),
    "self_attn.o_proj.bias": ("attn.b_proj", False),
    "post_attention_layernorm.weight": ("ln2.gamma", False),
    "mlp.gate_proj.weight": ("ffn.W_gate", True),
    "mlp.gate_proj.bias": ("ffn.b_gate", False),
    "mlp.up_proj.weight": ("ffn.W_up", True),
    "mlp.up_proj.bias": ("ffn.b_up", False),
    "mlp.down_proj.weight": ("ffn.W_down", True),
    "mlp.down_proj.bias": ("ffn.b_down", False),
}
_TOP_NAMES = {"embed_tokens.weight": "embedding.embeddings", "norm.weight": "ln_f.gamma"}
_BUFFERS = ("self_attn.rotary_emb.inv_freq",)  # older files store RoPE's frequencies: derived


def _refuse(where: str, what: str) -> CheckpointError:
    return CheckpointError(f"{where}: {what} is not supported"[:300])


def _rope_theta(hf: dict, where: str) -> float:
    """The rotary base: top-level `rope_theta` (older files, save_pretrained up to 4.x) or
    inside `rope_parameters` / `rope_scaling` (newer transformers). Scaling must be off."""
    theta = hf.get("rope_theta")
    for key in ("rope_parameters", "rope_scaling"):
        params = hf.get(key)
        if params is None:
            continue
        if not isinstance(params, dict):
            raise _refuse(where, f"{key} {params!r}")
        kind = params.get("rope_type", params.get("type", "default"))
        if kind not in ("default", None):
            raise _refuse(where, f"rope scaling {kind!r} ({key})")
        theta = params.get("rope_theta", theta)
    return real(10000.0 if theta is None else theta, "rope_theta", ROPE_THETA_RANGE, where)


def _check_supported(hf: dict, where: str) -> None:
    """Refuse, by name, every setting that would change the computation and is not built."""
    act = hf.get("hidden_act", "silu")
    if act != "silu":
        raise _refuse(where, f"hidden_act {act!r}")
    if flag(hf.get("use_sliding_window", False), "use_sliding_window", where):
        # Qwen2: sliding_window alone is a number left unused
        raise _refuse(where, "a sliding attention window (use_sliding_window: true)")
    layer_types = hf.get("layer_types") or []
    if not isinstance(layer_types, list) or any(t != "full_attention" for t in layer_types):
        raise _refuse(where, f"layer_types {layer_types!r} (only full attention is built)")
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if hf.get(key):
            raise _refuse(where, f"a mixture of experts ({key}: {hf[key]!r})")
    heads, width = hf.get("num_attention_heads"), hf.get("hidden_size")
    head_dim = hf.get("head_dim")
    if head_dim is not None and isinstance(heads, int) and isinstance(width, int) and heads:
        if head_dim != width // heads:
            raise _refuse(where, f"head_dim {head_dim!r} other than hidden_size / heads")


def _kv_heads(hf: dict, heads, where: str) -> int:
    """num_key_value_heads: absent means one per query head; else a positive divisor."""
    kv = hf.get("num_key_value_heads")
    if kv is None:
        return heads
    if type(kv) is not int or not 0 < kv <= MAX_HEADS or heads % kv:
        raise CheckpointError(f"{where}: num_key_value_heads {kv!r} must be a positive "
                              f"divisor of num_attention_heads ({heads!r})"[:300])
    return kv


# config.json's counts: key -> GPTConfig field (its cap: tinygpt.caps.COUNT_CAPS)
_COUNTS = {"vocab_size": "vocab_size", "max_position_embeddings": "n_ctx",
           "hidden_size": "n_embd", "num_attention_heads": "n_head",
           "num_hidden_layers": "n_layer", "intermediate_size": "n_inner"}


def config_counts(hf: dict, where: str) -> dict[str, int]:
    """GPTConfig's counts from config.json, each present and an integer within its cap."""
    counts = {}
    for key, field in _COUNTS.items():
        if key not in hf:
            raise CheckpointError(f"{where}: no {key} (a config of model_type "
                                  f"{hf.get('model_type')!r} needs it)")
        counts[field] = count(hf[key], key, COUNT_CAPS[field], where)
    return counts


def modern_config(hf: dict, where: str = "config.json") -> GPTConfig:
    """GPTConfig from a Hugging Face Llama or Qwen2 config.json dict.

    Every value is checked before it is used (tinygpt.caps): counts within their caps,
    floats finite and in range, flags true or false."""
    if not isinstance(hf, dict):
        raise CheckpointError(f"{where}: not a JSON object")
    kind = hf.get("model_type")
    if kind not in MODERN_TYPES:
        raise CheckpointError(f"{where}: model_type {kind!r} is not supported "
                              f"(gpt2, llama, qwen2)"[:300])
    counts = config_counts(hf, where)
    _check_supported(hf, where)
    bias = flag(hf.get("attention_bias", False), "attention_bias", where)  # q, k, v and o
    parts = dict(
        tie_weights=flag(hf.get("tie_word_embeddings", False), "tie_word_embeddings", where),
        layer_norm_eps=real(hf.get("rms_norm_eps", 1e-6), "rms_norm_eps", NORM_EPS_RANGE, where),
        rope_theta=_rope_theta(hf, where),
        n_kv_head=_kv_heads(hf, counts["n_head"], where),
        attn_bias=True if kind == "qwen2" else bias,  # Qwen2: q, k, v biases, none on o
        proj_bias=False if kind == "qwen2" else bias,
        mlp_bias=flag(hf.get("mlp_bias", False), "mlp_bias", where),
    )
    try:
        return GPTConfig(**counts, **parts, output_bias=False, norm="rmsnorm", position="rope",
                         mlp="swiglu")
    except ValueError as err:  # a combination GPTConfig refuses (heads that do not divide)
        raise CheckpointError(f"{where}: not a valid config of model_type {kind!r} "
                              f"({err})"[:300]) from err


def layer_index(text: str) -> int | None:
    """The block number in a tensor name ("model.layers.3.") or None if `text` is not one.

    Plain ASCII digits without a leading zero only: int() also reads "²"-like digits
    (ValueError), "٣" and "03" (both 3), which would let two names fill one block."""
    if text.isascii() and text.isdecimal() and (text == "0" or text[0] != "0"):
        return int(text)
    return None


def put_once(params: dict[str, np.ndarray], ours: str, arr: np.ndarray, source: str,
             where: str) -> None:
    """params[ours] = arr, refused if another tensor of the file already gave `ours`."""
    if ours in params:
        raise CheckpointError(f"{where}: tensor {source!r} repeats {ours} (given by "
                              "another name already)"[:300])
    params[ours] = arr


def modern_parameters(
    tensors: dict[str, np.ndarray], config: GPTConfig, where: str = "weights"
) -> dict[str, np.ndarray]:
    """Rename a Llama / Qwen2 state dict (NumPy arrays) to tinygpt names: transposed views,
    no copy. 16-bit tensors stay as they are: the loader widens them to float32 only after
    every name and shape has been checked (safe_io.widen_half)."""
    params: dict[str, np.ndarray] = {}
    for full_name, arr in tensors.items():
        name = full_name.removeprefix("model.")
        parts = name.split(".", 2)
        block = layer_index(parts[1]) if len(parts) == 3 and parts[0] == "layers" else None
        if name == "lm_head.weight":
            if not config.tie_weights:  # tied: the file may repeat the embedding matrix
                put_once(params, "output.W_out", arr.T, full_name, where)  # (V, C) -> (C, V)
        elif name in _TOP_NAMES:
            put_once(params, _TOP_NAMES[name], arr, full_name, where)
        elif block is not None and parts[2] in _BLOCK_NAMES:
            ours, transpose = _BLOCK_NAMES[parts[2]]
            put_once(params, f"blocks.{block}.{ours}", arr.T if transpose else arr,
                     full_name, where)
        elif not (block is not None and parts[2] in _BUFFERS):
            raise CheckpointError(f"{where}: unexpected tensor {full_name!r}"[:300])
    return params


def into_own_rows(params: dict[str, np.ndarray]) -> None:
    """Copy, in place in `params`, every weight that is not yet an array of its own: a
    transposed view (a Llama / Qwen2 file stores W as (out, in); tinygpt reads (in, out)) or
    a page of the memory-mapped file becomes C-contiguous (in, out) rows in private memory.

    Why, measured on the SmolLM2-135M shape (bench/modern_speed.py): a forward of 64 tokens
    took 10-15% longer on the mapped, transposed weights; OpenBLAS multiplies x @ W.T slower
    than x @ W for a few dozen rows (copies kept transposed were no faster than the map, within
    this machine's noise: the layout, not the mapping, is what counts). The price: the
    processes of one machine no longer share the file's pages. One array at a time: a widened
    16-bit array is freed as soon as its copy is made."""
    for name, arr in params.items():
        if name == "embedding.embeddings":  # kept as E^T (C, V) (EmbeddingLayer): one copy
            params[name] = np.array(arr.T, order="C").T
        elif not arr.flags.c_contiguous or not arr.flags.owndata:
            params[name] = np.array(arr, order="C")
