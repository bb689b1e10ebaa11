"""GGUF files of the `llama` and `qwen2` architectures: `tinygpt.load("model.gguf")`.

The file (read by tinygpt.checkpoint.gguf_file, every size checked first) gives:
- the config, from `<arch>.*` metadata, turned into the config.json a Hugging Face folder
  would hold and read by hf_modern.modern_config (so the same settings are refused);
- the weights, each tensor dequantized to float32 once (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
  Q5_0, Q5_1, Q2_K ... Q6_K) and renamed to Hugging Face's names, then to tinygpt's by
  hf_modern.modern_parameters. llama.cpp stores a `llama` file's query and key rows permuted
  (its RoPE pairs neighbours, Hugging Face's pairs halves): `unpermute` puts them back, as
  transformers does. `qwen2` files are written unpermuted;
- the tokenizer, from `tokenizer.*` metadata (tinygpt.tokenizer.gguf_vocab).

The float32 copy. Dequantizing costs seconds (SmolLM2-135M Q4_1: see docs/modern_models.md),
so the result is kept as one .npy file per parameter in a folder named after the SHA-256 of
the WHOLE GGUF file: in `.tinygpt-cache/` beside the file (a hidden folder: no model picker
lists it), or, where that cannot be written, in $XDG_CACHE_HOME/tinygpt (~/.cache/tinygpt).
A later load maps those files (copy-on-write): the pages are shared by every process of the
machine and the load takes well under a second. A changed or damaged GGUF has another hash
and never loads from an old copy; a damaged copy is rebuilt. At most CACHE_BYTES are kept:
the least recently used copies are removed first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from tinygpt.checkpoint.gguf_file import GGUFFile, TensorInfo, open_gguf, tensor_f32
from tinygpt.checkpoint.hf_modern import (
    MODERN_TYPES,
    into_own_rows,
    modern_config,
    modern_parameters,
)
from tinygpt.checkpoint.shapes import check_names_and_shapes, expected_shapes
from tinygpt.network.model import GPT, GPTConfig, parameter_shapes
from tinygpt.safe_io import CheckpointError, check_inside, file_label
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.gguf_vocab import tokenizer_from_gguf
from tinygpt.tokenizer.warm_up import warm_up

__all__ = ["cache_dirs", "gguf_config", "load_gguf", "unpermute"]

CACHE_FOLDER = ".tinygpt-cache"  # beside the GGUF file: hidden, so never listed as a model
CACHE_BYTES = 8 * 2**30  # float32 copies kept, all GGUF files together (SmolLM2-135M: 540 MB)
CACHE_FORMAT = "gguf-f32-v1"  # in every copy's folder name: a new layout never reads an old one
STALE_SECONDS = 3600  # a half-written copy this old was left by a process that died

# GGUF tensor names (after "blk.{i}.") -> Hugging Face names (after "model.layers.{i}.")
_BLOCK = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
          "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}


# ----------------------------------------------------------------------------- the config


def _int(md: dict, key: str, label: str, default: int | None = None) -> int:
    value = md.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise CheckpointError(f"{label}: metadata {key} {str(value)[:30]} must be a positive "
                              "whole number")
    return value


def _float(md: dict, key: str, label: str, default: float) -> float:
    value = md.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CheckpointError(f"{label}: metadata {key} {str(value)[:30]} must be a "
                              "positive number")
    return float(value)


def _check_settings(md: dict, arch: str, label: str, head_size: int) -> None:
    """Refuse, by name, the settings that would change the computation and are not built."""
    scaling = md.get(f"{arch}.rope.scaling.type", "none")
    if scaling != "none":
        raise CheckpointError(f"{label}: rope scaling {str(scaling)[:30]!r} is not supported")
    if md.get(f"{arch}.expert_count"):
        raise CheckpointError(f"{label}: a mixture of experts is not supported")
    for key in ("rope.dimension_count", "attention.key_length", "attention.value_length"):
        value = md.get(f"{arch}.{key}", head_size)
        if value != head_size:
            raise CheckpointError(f"{label}: {arch}.{key} {str(value)[:20]} other than the "
                                  f"head size {head_size} is not supported")


def gguf_config(gf: GGUFFile) -> GPTConfig:
    """GPTConfig of a `llama` or `qwen2` GGUF file (its metadata and tensor records)."""
    md, label = gf.metadata, gf.label
    arch = md.get("general.architecture")
    if arch not in MODERN_TYPES:
        raise CheckpointError(f"{label}: architecture {str(arch)[:40]!r} is not supported "
                              f"({', '.join(MODERN_TYPES)})")
    embd = gf.tensors.get("token_embd.weight")
    if embd is None or len(embd.shape) != 2:
        raise CheckpointError(f"{label}: no token_embd.weight matrix")
    width, heads = _int(md, f"{arch}.embedding_length", label), \
        _int(md, f"{arch}.attention.head_count", label)
    _check_settings(md, arch, label, width // heads)
    hf = {"model_type": arch, "vocab_size": embd.shape[0], "hidden_size": width,
          "max_position_embeddings": _int(md, f"{arch}.context_length", label),
          "num_attention_heads": heads,
          "num_key_value_heads": _int(md, f"{arch}.attention.head_count_kv", label, heads),
          "num_hidden_layers": _int(md, f"{arch}.block_count", label),
          "intermediate_size": _int(md, f"{arch}.feed_forward_length", label),
          "rms_norm_eps": _float(md, f"{arch}.attention.layer_norm_rms_epsilon", label, 1e-6),
          "rope_theta": _float(md, f"{arch}.rope.freq_base", label, 10000.0),
          "tie_word_embeddings": "output.weight" not in gf.tensors,
          "attention_bias": "blk.0.attn_q.bias" in gf.tensors}
    return modern_config(hf, label)


# ----------------------------------------------------------------------------- the weights


def hf_name(name: str, label: str) -> str:
    """A GGUF tensor name -> its Hugging Face name; an unknown one is refused, named."""
    if name in _TOP:
        return _TOP[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _BLOCK and \
            parts[3] in ("weight", "bias"):
        return f"model.layers.{parts[1]}.{_BLOCK[parts[2]]}.{parts[3]}"
    raise CheckpointError(f"{label}: unexpected tensor {name[:60]!r} (rope_freqs: RoPE "
                          "scaling, not supported)" if name == "rope_freqs.weight" else
                          f"{label}: unexpected tensor {name[:60]!r}")


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's permutation of a `llama` file's query / key rows (or biases).

    llama.cpp rotates neighbouring numbers (0, 1), (2, 3) ... of a head; Hugging Face's
    Llama rotates its two halves (0, d/2), (1, d/2 + 1) .... The converter reordered each
    head's rows from [half 1 | half 2] to interleaved; this puts them back:
    (heads, d/2, 2, ...) -> (heads, 2, d/2, ...)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _check_shapes(gf: GGUFFile, config: GPTConfig) -> None:
    """The parameters' float32 bytes within the cap, then every tensor's name and shape
    against the config, before any is dequantized."""
    expected_shapes(config, gf.label, stored=None)  # quantized: fewer than 2 bytes a number
    ghosts = {hf_name(name, gf.label): np.broadcast_to(np.float32(0), info.shape)
              for name, info in gf.tensors.items()}
    check_names_and_shapes(modern_parameters(ghosts, config, gf.label), config, gf.label)


def _dequantized(gf: GGUFFile, info: TensorInfo, config: GPTConfig, arch: str) -> np.ndarray:
    w = tensor_f32(gf, info)
    if arch == "llama" and ".attn_q." in info.name:
        w = unpermute(w, config.n_head)
    elif arch == "llama" and ".attn_k." in info.name:
        w = unpermute(w, config.kv_heads)
    if not np.isfinite(w).all():
        raise CheckpointError(f"{gf.label}: tensor {info.name[:60]!r} holds NaN or infinite "
                              "values")
    return w


def _parameters(gf: GGUFFile, config: GPTConfig) -> dict[str, np.ndarray]:
    """Every tensor dequantized (float32), renamed, and laid out as the products read it."""
    arch = gf.metadata["general.architecture"]
    tensors = {hf_name(name, gf.label): _dequantized(gf, info, config, arch)
               for name, info in gf.tensors.items()}
    params = modern_parameters(tensors, config, gf.label)
    del tensors
    into_own_rows(params)
    return params


# ----------------------------------------------------------------------------- the float32 copy


def cache_dirs(path: Path) -> list[Path]:
    """Where float32 copies of the GGUF file at `path` are kept: beside it, then the user's
    cache folder ($XDG_CACHE_HOME/tinygpt, else ~/.cache/tinygpt)."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [path.parent / CACHE_FOLDER, Path(xdg) / "tinygpt"]


def _copy_name(digest: str) -> str:
    return f"{digest}.{CACHE_FORMAT}"


def _read_copy(folder: Path, config: GPTConfig) -> dict[str, np.ndarray] | None:
    """The mapped parameters of one copy, or None if any file is missing, damaged or not
    what the config expects (then the copy is rebuilt)."""
    params = {}
    try:
        for name, shape in parameter_shapes(config).items():
            arr = np.load(folder / f"{name}.npy", mmap_mode="c", allow_pickle=False)
            if arr.shape != shape or arr.dtype != np.float32 or not np.isfinite(arr).all():
                return None
            params[name] = arr
    except (OSError, ValueError, EOFError):
        return None
    os.utime(folder)  # the least recently used copies are removed first
    return params


def _cached(path: Path, digest: str, config: GPTConfig) -> dict[str, np.ndarray] | None:
    for root in cache_dirs(path):
        folder = root / _copy_name(digest)
        if folder.is_dir():
            params = _read_copy(folder, config)
            if params is not None:
                return params
    return None


def _write_copy(root: Path, digest: str, params: dict[str, np.ndarray]) -> Path:
    """One .npy per parameter, written in a temporary folder renamed into place at the end:
    a copy is whole or absent."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".writing-"))
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; a copy is for every process
        for name, arr in params.items():
            np.save(tmp / f"{name}.npy", arr, allow_pickle=False)
        final = root / _copy_name(digest)
        if final.exists():  # a damaged copy: moved aside, then removed
            trash = root / f".trash-{os.getpid()}-{time.time_ns()}"
            with contextlib.suppress(OSError):
                os.replace(final, trash)
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process put its copy first
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _prune(root: Path, keep: Path) -> None:
    """Remove the least recently used copies until all of them weigh at most CACHE_BYTES."""
    for left in [*root.glob(".writing-*"), *root.glob(".trash-*")]:  # of a killed process
        with contextlib.suppress(OSError):
            if time.time() - left.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(left, ignore_errors=True)
    copies = [(p.stat().st_mtime, p) for p in root.glob(f"*.{CACHE_FORMAT}") if p != keep]
    used = sum(f.stat().st_size for f in keep.iterdir())
    for _, folder in sorted(copies, reverse=True):
        size = sum(f.stat().st_size for f in folder.iterdir())
        used += size
        if used > CACHE_BYTES:
            shutil.rmtree(folder, ignore_errors=True)


def _store(path: Path, digest: str, params: dict[str, np.ndarray]) -> Path | None:
    """Write the copy in the first cache folder that can hold it; None if none can (the
    model still loads: the next start dequantizes again)."""
    for root in cache_dirs(path):
        try:
            folder = _write_copy(root, digest, params)
            _prune(root, folder)
            return folder
        except OSError:
            continue
    return None


# ----------------------------------------------------------------------------- loading


def _tokenizer(gf: GGUFFile, config: GPTConfig) -> BPETokenizer:
    try:
        return tokenizer_from_gguf(gf.metadata, padded_size=config.vocab_size)
    except ValueError as err:
        raise CheckpointError(f"{gf.label}: {err}"[:300]) from err


def load_gguf(path: str | os.PathLike, root: str | os.PathLike | None = None
              ) -> tuple[GPT, BPETokenizer]:
    """A `llama` or `qwen2` GGUF file -> (model, tokenizer); CheckpointError on any problem.

    Config, tensor records and tokenizer are checked before any weight is dequantized; the
    weights come from the float32 copy of this very file (by its SHA-256) when there is one.
    `model.metadata["load_seconds"]` says how long the load took, `["from_copy"]` whether
    the copy was used."""
    started = time.perf_counter()
    path = Path(path)
    root = Path(root) if root is not None else path.parent
    label = file_label(path, root)
    real = check_inside(path, root, label)
    gf = open_gguf(real, label)
    try:
        config = gguf_config(gf)
        _check_shapes(gf, config)
        tok = _tokenizer(gf, config)
        warm_up(tok, label)  # too slow to serve: refused before any weight is dequantized
        digest = hashlib.sha256(gf.buffer).hexdigest()
        params = _cached(real, digest, config)
        from_copy = params is not None
        if params is None:
            params = _parameters(gf, config)
            _store(real, digest, params)
    finally:
        gf.close()
    model = GPT(config, dtype=np.float32, init=False)
    model.load_parameters(params)
    model.metadata = {"source": "gguf", "architecture": config_source(gf), "path": label,
                      "sha256": digest, "from_copy": from_copy,
                      "load_seconds": round(time.perf_counter() - started, 3)}
    return model, tok


def config_source(gf: GGUFFile) -> str:
    return str(gf.metadata.get("general.architecture"))
