"""Saving and loading models: tinygpt's own .npz checkpoints, and GPT-2 folders.

tinygpt checkpoint (one `.npz` file, i.e. a zip of `.npy` arrays, read without pickle):
    <parameter name>   one float array per entry of `model.parameters()`
    __config__         uint8 array holding UTF-8 JSON: format, version, dtype, GPTConfig fields
    __tokenizer__      uint8 array holding UTF-8 JSON: `BPETokenizer.to_json_dict()`
    __metadata__       uint8 array holding UTF-8 JSON: free-form training info (may be {})

GPT-2 folder (Hugging Face layout): config.json, model.safetensors, and the tokenizer as
vocab.json + merges.txt (or OpenAI's encoder.json + vocab.bpe).

Llama / Qwen2 folder (model_type "llama" or "qwen2" in config.json): config.json and
model.safetensors (tinygpt.checkpoint.hf_modern), the tokenizer from tokenizer.json.

`load` checks everything it reads and raises `CheckpointError` (a ValueError) that says
what is wrong, whatever the file contains. After loading, `model.metadata` is a dict.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from tinygpt.caps import MAX_JSON_BYTES, MAX_METADATA_BYTES, MAX_TOKENIZER_BYTES
from tinygpt.checkpoint.gguf_model import load_gguf
from tinygpt.checkpoint.hf_gpt2 import gpt2_config, gpt2_parameters
from tinygpt.checkpoint.hf_modern import (
    MODERN_TYPES,
    into_own_rows,
    modern_config,
    modern_parameters,
)
from tinygpt.checkpoint.shapes import check_names_and_shapes, expected_shapes
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.safe_io import (
    READ_ERRORS,
    CheckpointError,
    bf16_to_f32,
    check_inside,
    check_zip_members,
    describe,
    file_label,
    read_capped,
    read_json,
    read_json_member,
    read_npy_member,
    read_safetensors,
    widen_half,
)
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.hf_json import load_folder_tokenizer
from tinygpt.tokenizer.warm_up import warm_up

__all__ = ["CheckpointError", "bf16_to_f32", "load", "load_gpt2", "load_modern_model",
           "read_safetensors", "save"]

FORMAT = "tinygpt-checkpoint"
FORMAT_VERSION = 1
MODEL_DTYPES = ("float32", "float64")
CONFIG_KEY, TOKENIZER_KEY, METADATA_KEY = "__config__", "__tokenizer__", "__metadata__"


# ----------------------------------------------------------------------------- shapes


def _check_parameters(
    params: dict[str, np.ndarray], config: GPTConfig, where: str
) -> None:
    """Exactly the expected names, exact shapes, float dtype, only finite numbers."""
    check_names_and_shapes(params, config, where)
    _check_values(params, where)


def _check_values(params: dict[str, np.ndarray], where: str) -> None:
    """Float dtype, only finite numbers: reads every number, so after the cheap checks."""
    for name, arr in params.items():
        if arr.dtype.kind != "f":
            raise CheckpointError(f"{where}: {name} has dtype {arr.dtype}, expected a float type")
        if not np.isfinite(arr).all():
            raise CheckpointError(f"{where}: {name} contains NaN or infinite values")


def _widened_parameters(
    params: dict[str, np.ndarray], config: GPTConfig, where: str
) -> dict[str, np.ndarray]:
    """Names and shapes checked, then 16-bit arrays widened to float32, then values checked.

    The order is the point: a file of junk tensors is refused before any float32 copy."""
    check_names_and_shapes(params, config, where)
    try:
        params = {name: widen_half(arr) for name, arr in params.items()}
    except MemoryError as err:
        raise CheckpointError(f"{where}: not enough memory to widen 16-bit tensors") from err
    _check_values(params, where)
    return params


def _build_model(
    config: GPTConfig, params: dict[str, np.ndarray], dtype: str, metadata: dict
) -> GPT:
    model = GPT(config, dtype=np.dtype(dtype), init=False)
    model.load_parameters(params)
    model.metadata = metadata
    return model


def _check_vocab(tok: BPETokenizer, config: GPTConfig, where: str) -> None:
    """One model id per tokenizer id (padding rows included: tok.padded_size)."""
    if tok.padded_size != config.vocab_size:
        raise CheckpointError(f"{where}: tokenizer has {_ids_of(tok)} but the model's "
                              f"vocab_size is {config.vocab_size}")


def _ids_of(tok: BPETokenizer) -> str:
    unused = tok.padded_size - tok.vocab_size
    return f"{tok.vocab_size} tokens" + (f" and {unused} unused ids" if unused else "")


# ----------------------------------------------------------------------------- save


def _json_array(obj) -> np.ndarray:
    """JSON text as a 1-d uint8 array: plain bytes, so no pickle is ever needed to read it."""
    return np.frombuffer(json.dumps(obj).encode("utf-8"), dtype=np.uint8)


def save(
    model: GPT, tok: BPETokenizer, path: str | os.PathLike, metadata: dict | None = None
) -> None:
    """Write model + tokenizer (+ optional JSON-able `metadata`) to one .npz file, atomically.

    The file is written under a temporary name and renamed into place, so a crash never
    leaves a half-written checkpoint at `path`.
    """
    if tok.padded_size != model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {_ids_of(tok)} but the model's vocab_size is "
            f"{model.config.vocab_size}"
        )
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "dtype": model.dtype.name,
        "config": model.config.to_dict(),
    }
    arrays = {name: np.asarray(p) for name, p in model.parameters().items()}
    arrays[CONFIG_KEY] = _json_array(header)
    arrays[TOKENIZER_KEY] = _json_array(tok.to_json_dict())
    arrays[METADATA_KEY] = _json_array(metadata or {})

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a checkpoint is for sharing
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ----------------------------------------------------------------------------- load


def load(
    path: str | os.PathLike, root: str | os.PathLike | None = None
) -> tuple[GPT, BPETokenizer]:
    """Read a tinygpt .npz checkpoint, a GGUF file (tinygpt.checkpoint.gguf_model) or a
    Hugging Face folder. Returns (model, tokenizer).

    `root` is the models folder: messages name files relative to it (default: the folder
    that holds `path`), and no file of a GPT-2 folder may lead outside it through a link.
    `model.metadata` holds the metadata dict saved with the checkpoint ({} if none).
    Any problem with the file raises CheckpointError; memory stays bounded by the caps in
    tinygpt.safe_io whatever the file holds.
    """
    path = Path(path)
    root = Path(root) if root is not None else path.parent
    label = file_label(path, root)
    if path.is_dir():
        return load_folder(path, root)
    if path.suffix.lower() == ".gguf" and path.is_file():
        return load_gguf(path, root)
    if not path.is_file():
        raise CheckpointError(f"{label}: no such checkpoint file or GPT-2 folder")
    real = check_inside(path, root, label)
    try:
        with open(real, "rb") as f:
            size = _check_zip_end(f, label)
            with zipfile.ZipFile(f) as zf:
                check_zip_members(zf, size, label)
                return _load_npz(zf, label)
    except CheckpointError:
        raise
    except READ_ERRORS as err:
        raise CheckpointError(
            f"{label}: not a readable tinygpt checkpoint ({describe(err)})"
        ) from err


_EOCD = struct.Struct("<4s4H2LH")  # zip's end-of-central-directory record, 22 bytes


def _check_zip_end(f, label: str) -> int:
    """The zip's directory record must end exactly at the end of the file. Returns its size.

    Python's zipfile forgives a few missing trailing bytes (the record's comment length), so a
    file cut there would load; a truncated file is damaged, and we say so.
    """
    size = os.fstat(f.fileno()).st_size
    f.seek(max(0, size - _EOCD.size - 0xFFFF))
    tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        raise CheckpointError(
            f"{label}: not a zip/npz file, or cut short (no directory at its end)"
        )
    comment_length = _EOCD.unpack(tail[at : at + _EOCD.size])[-1]
    if at + _EOCD.size + comment_length != len(tail):
        raise CheckpointError(f"{label}: the file is cut short or has bytes after its end")
    f.seek(0)
    return size


def _load_npz(zf: zipfile.ZipFile, where: str) -> tuple[GPT, BPETokenizer]:
    members = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy"):
            raise CheckpointError(f"{where}: unexpected member {info.filename!r} (not .npy)")
        members[info.filename[: -len(".npy")]] = info
    for key in (CONFIG_KEY, TOKENIZER_KEY):
        if key not in members:
            raise CheckpointError(f"{where}: no {key} entry (is this a tinygpt checkpoint?)")

    header = read_json_member(zf, members.pop(CONFIG_KEY), where, MAX_JSON_BYTES)
    config, dtype = _parse_header(header, where)
    stored = sum(info.file_size for info in members.values())  # checked: check_zip_members
    expected = expected_shapes(config, where, stored=stored, itemsize=np.dtype(dtype).itemsize)
    extra = sorted(set(members) - set(expected) - {METADATA_KEY, TOKENIZER_KEY})
    if extra:
        raise CheckpointError(f"{where}: unexpected array(s) {extra[:5]}")
    tok_dict = read_json_member(zf, members.pop(TOKENIZER_KEY), where, MAX_TOKENIZER_BYTES)
    try:
        tok = BPETokenizer.from_json_dict(tok_dict)
    except ValueError as err:
        raise CheckpointError(f"{where}: bad tokenizer: {err}") from err
    _check_vocab(tok, config, where)
    warm_up(tok, f"{where}: {TOKENIZER_KEY}")  # too slow to serve: refused before the weights
    metadata = {}
    if METADATA_KEY in members:
        metadata = read_json_member(zf, members.pop(METADATA_KEY), where, MAX_METADATA_BYTES)
        if not isinstance(metadata, dict):
            raise CheckpointError(f"{where}: {METADATA_KEY} must be a JSON object")

    params = {}
    for name, info in members.items():
        shape = expected[name]
        # 8 bytes per number at most: the header's dtype is checked against the model below
        params[name] = read_npy_member(zf, info, where, 8 * math.prod(shape), shape)
    _check_parameters(params, config, where)
    return _build_model(config, params, dtype, metadata), tok


def _parse_header(header, where: str) -> tuple[GPTConfig, str]:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"{where}: {CONFIG_KEY} is not a {FORMAT} header")
    unknown = set(header) - {"format", "version", "dtype", "config"}
    if unknown:
        raise CheckpointError(f"{where}: unknown header fields {sorted(unknown)}")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise CheckpointError(
            f"{where}: format version {version!r} is not supported (this tinygpt reads "
            f"1..{FORMAT_VERSION})"
        )
    dtype = header.get("dtype")
    if dtype not in MODEL_DTYPES:
        raise CheckpointError(f"{where}: dtype {dtype!r} is not one of {MODEL_DTYPES}")
    if not isinstance(header.get("config"), dict):
        raise CheckpointError(f"{where}: header has no config object")
    try:
        config = GPTConfig.from_dict(header["config"])
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: bad config: {err}") from err
    return config, dtype


# ----------------------------------------------------------------------------- GPT-2 folders

GPT2_TOKENIZER_FILES = (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe"))


def _gpt2_file(folder: Path, name: str, root: Path) -> tuple[Path, str]:
    """(real path, label) of a file in a GPT-2 folder; links may not leave the models folder."""
    path, label = folder / name, file_label(folder / name, root)
    if not path.is_file():
        raise CheckpointError(f"{label}: missing")
    return check_inside(path, root, label), label


def _gpt2_tokenizer(folder: Path, root: Path) -> BPETokenizer:
    for vocab, merges in GPT2_TOKENIZER_FILES:
        if (folder / vocab).is_file() and (folder / merges).is_file():
            vocab_path, vocab_label = _gpt2_file(folder, vocab, root)
            merges_path, merges_label = _gpt2_file(folder, merges, root)
            encoder = read_json(vocab_path, MAX_TOKENIZER_BYTES, vocab_label)
            merges_bytes = read_capped(merges_path, MAX_TOKENIZER_BYTES, merges_label)
            try:
                return BPETokenizer.from_gpt2_data(encoder, merges_bytes.decode("utf-8"))
            except ValueError as err:  # UnicodeDecodeError is a ValueError
                raise CheckpointError(
                    f"{file_label(folder, root)}: bad tokenizer files: {err}"[:300]
                ) from err
    raise CheckpointError(
        f"{file_label(folder, root)}: no tokenizer "
        "(need vocab.json + merges.txt or encoder.json + vocab.bpe)"
    )


def load_gpt2(
    folder: str | os.PathLike, root: str | os.PathLike | None = None
) -> tuple[GPT, BPETokenizer]:
    """Load a Hugging Face GPT-2 folder: config.json, model.safetensors, tokenizer files.

    `root` (default: the folder's parent) is the models folder: labels in messages are
    relative to it, and every file must really lie inside it (links are followed, then
    checked).
    """
    folder = Path(folder)
    root = Path(root) if root is not None else folder.parent
    where = file_label(folder, root)
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{where}: no config.json")
    if not (folder / "model.safetensors").is_file():
        raise CheckpointError(f"{where}: no model.safetensors (only safetensors is supported)")
    config_path, config_label = _gpt2_file(folder, "config.json", root)
    weights_path, weights_label = _gpt2_file(folder, "model.safetensors", root)
    config = gpt2_config(read_json(config_path, MAX_JSON_BYTES, config_label), config_label)
    tok = _gpt2_tokenizer(folder, root)
    _check_vocab(tok, config, where)
    warm_up(tok, f"{where}: the tokenizer files")
    expected = expected_shapes(config, config_label, stored=weights_path.stat().st_size)
    tensors = read_safetensors(weights_path, weights_label, widen=False, expected=len(expected))
    params = gpt2_parameters(tensors, config, weights_label)
    params = _widened_parameters(params, config, weights_label)
    metadata = {"source": "gpt2", "path": where}
    return _build_model(config, params, "float32", metadata), tok


# ----------------------------------------------------------------------------- Hugging Face folders


def load_folder(
    folder: str | os.PathLike, root: str | os.PathLike | None = None
) -> tuple[GPT, BPETokenizer]:
    """A Hugging Face folder by its config.json's model_type: gpt2 (or none), llama, qwen2."""
    folder = Path(folder)
    root = Path(root) if root is not None else folder.parent
    kind = _model_type(folder, root)
    if kind in MODERN_TYPES:  # the tokenizer first: a refused one costs no weights
        config_path, config_label = _gpt2_file(folder, "config.json", root)
        hf = read_json(config_path, MAX_JSON_BYTES, config_label)
        tok = _modern_tokenizer(folder, root, modern_config(hf, config_label).vocab_size)
        return load_modern_model(folder, root), tok
    return load_gpt2(folder, root)


def _model_type(folder: Path, root: Path):
    """config.json's model_type (None if it has none, as old GPT-2 files)."""
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{file_label(folder, root)}: no config.json")
    path, label = _gpt2_file(folder, "config.json", root)
    hf = read_json(path, MAX_JSON_BYTES, label)
    return hf.get("model_type") if isinstance(hf, dict) else None


def load_modern_model(folder: str | os.PathLike, root: str | os.PathLike | None = None) -> GPT:
    """The network of a Llama or Qwen2 folder: config.json and model.safetensors.

    Every weight ends in private memory, as the (in, out) rows the products read
    (`into_own_rows`): 4 bytes per parameter per process (SmolLM2-135M: 540 MB). bfloat16 and
    float16 files are upcast to float32 on the way, once.
    """
    folder = Path(folder)
    root = Path(root) if root is not None else folder.parent
    where = file_label(folder, root)
    if not (folder / "model.safetensors").is_file():
        raise CheckpointError(f"{where}: no model.safetensors (only one safetensors file "
                              "is supported)")
    config_path, config_label = _gpt2_file(folder, "config.json", root)
    weights_path, weights_label = _gpt2_file(folder, "model.safetensors", root)
    hf = read_json(config_path, MAX_JSON_BYTES, config_label)
    config = modern_config(hf, config_label)
    expected = expected_shapes(config, config_label, stored=weights_path.stat().st_size)
    tensors = read_safetensors(weights_path, weights_label, widen=False, expected=len(expected))
    params = modern_parameters(tensors, config, weights_label)
    params = _widened_parameters(params, config, weights_label)
    into_own_rows(params)
    metadata = {"source": hf["model_type"], "path": where}
    return _build_model(config, params, "float32", metadata)


def _modern_tokenizer(folder: Path, root: Path, rows: int) -> BPETokenizer:
    """The tokenizer of a Llama / Qwen2 folder (tokenizer.json, BOS / EOS from
    generation_config.json or tokenizer_config.json), for a model of `rows` embedding rows.

    The embedding may have more rows than the tokenizer has tokens (Qwen2.5 pads its 151,665
    tokens to 151,936 rows): those ids are the tokenizer's unused ids (padded_size). Fewer
    rows than tokens would leave tokens without a vector, and is refused.
    """
    if not (folder / "tokenizer.json").is_file():
        raise CheckpointError(f"{file_label(folder, root)}: no tokenizer.json (the only "
                              "tokenizer format read for Llama / Qwen2 folders)")
    label = file_label(folder / "tokenizer.json", root)
    try:
        tok = load_folder_tokenizer(folder, root=root, padded_size=rows)
    except CheckpointError:
        raise
    except ValueError as err:  # padded_size below the tokens: more tokens than rows
        raise CheckpointError(f"{label}: the tokenizer does not fit the model's vocab_size of "
                              f"{rows:,} rows ({err})"[:300]) from err
    warm_up(tok, label)
    return tok
