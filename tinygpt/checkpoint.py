"""Saving and loading models: tinygpt's own .npz checkpoints, and GPT-2 folders.

tinygpt checkpoint (one `.npz` file, i.e. a zip of `.npy` arrays, read without pickle):
    <parameter name>   one float array per entry of `model.parameters()`
    __config__         uint8 array holding UTF-8 JSON: format, version, dtype, GPTConfig fields
    __tokenizer__      uint8 array holding UTF-8 JSON: `BPETokenizer.to_json_dict()`
    __metadata__       uint8 array holding UTF-8 JSON: free-form training info (may be {})

GPT-2 folder (Hugging Face layout): config.json, model.safetensors, and the tokenizer as
vocab.json + merges.txt (or OpenAI's encoder.json + vocab.bpe).

`load` checks everything it reads and raises `CheckpointError` (a ValueError) that says
what is wrong, whatever the file contains. After loading, `model.metadata` is a dict.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
import tempfile
import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

from tinygpt.model import GPT, GPTConfig, parameter_shapes  # the one list of names
from tinygpt.tokenizer import BPETokenizer

FORMAT = "tinygpt-checkpoint"
FORMAT_VERSION = 1
MODEL_DTYPES = ("float32", "float64")
CONFIG_KEY, TOKENIZER_KEY, METADATA_KEY = "__config__", "__tokenizer__", "__metadata__"

# every exception a corrupt file can raise somewhere inside zipfile / numpy / json
_READ_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    struct.error,
    OSError,
    EOFError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    RuntimeError,
    NotImplementedError,
    OverflowError,
    MemoryError,
    SyntaxError,  # numpy parses a .npy header with Python's tokenizer and ast.literal_eval
    tokenize.TokenError,
)


class CheckpointError(ValueError):
    """A checkpoint is missing, corrupt, or does not fit the model it describes."""


# ----------------------------------------------------------------------------- shapes


def _check_parameters(
    params: dict[str, np.ndarray], config: GPTConfig, where: str
) -> None:
    """Exactly the expected names, exact shapes, float dtype, only finite numbers."""
    expected = parameter_shapes(config)
    missing = [n for n in expected if n not in params]
    if missing:
        raise CheckpointError(f"{where}: missing parameter array(s) {missing[:5]}")
    extra = sorted(set(params) - set(expected))
    if extra:
        raise CheckpointError(f"{where}: unexpected array(s) {extra[:5]}")
    for name, shape in expected.items():
        arr = params[name]
        if arr.dtype.kind != "f":
            raise CheckpointError(f"{where}: {name} has dtype {arr.dtype}, expected a float type")
        if arr.shape != shape:
            raise CheckpointError(f"{where}: {name} has shape {arr.shape}, expected {shape}")
        if not np.isfinite(arr).all():
            raise CheckpointError(f"{where}: {name} contains NaN or infinite values")


def _build_model(
    config: GPTConfig, params: dict[str, np.ndarray], dtype: str, metadata: dict
) -> GPT:
    model = GPT(config, dtype=np.dtype(dtype), init=False)
    model.load_parameters(params)
    model.metadata = metadata
    return model


def _check_vocab(tok: BPETokenizer, config: GPTConfig, where: str) -> None:
    if tok.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{where}: tokenizer has {tok.vocab_size} tokens but the model's "
            f"vocab_size is {config.vocab_size}"
        )


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
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tok.vocab_size} tokens but the model's vocab_size is "
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


def load(path: str | os.PathLike) -> tuple[GPT, BPETokenizer]:
    """Read a tinygpt .npz checkpoint or a GPT-2 folder. Returns (model, tokenizer).

    `model.metadata` holds the metadata dict saved with the checkpoint ({} if none).
    Any problem with the file raises CheckpointError.
    """
    path = Path(path)
    if path.is_dir():
        return load_gpt2(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file or GPT-2 folder")
    try:
        _check_zip_end(path)
        with zipfile.ZipFile(path) as zf:
            return _load_npz(zf, str(path))
    except CheckpointError:
        raise
    except _READ_ERRORS as err:
        raise CheckpointError(
            f"{path}: not a readable tinygpt checkpoint ({type(err).__name__}: {err})"
        ) from err


_EOCD = struct.Struct("<4s4H2LH")  # zip's end-of-central-directory record, 22 bytes


def _check_zip_end(path: Path) -> None:
    """The zip's directory record must end exactly at the end of the file.

    Python's zipfile forgives a few missing trailing bytes (the record's comment length), so a
    file cut there would load; a truncated file is damaged, and we say so.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - _EOCD.size - 0xFFFF))
        tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < _EOCD.size:
        raise CheckpointError(f"{path}: not a zip/npz file, or cut short (no directory at its end)")
    comment_length = _EOCD.unpack(tail[at : at + _EOCD.size])[-1]
    if at + _EOCD.size + comment_length != len(tail):
        raise CheckpointError(f"{path}: the file is cut short or has bytes after its end")


def _load_npz(zf: zipfile.ZipFile, where: str) -> tuple[GPT, BPETokenizer]:
    members = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy"):
            raise CheckpointError(f"{where}: unexpected member {info.filename!r} (not .npy)")
        members[info.filename[: -len(".npy")]] = info
    for key in (CONFIG_KEY, TOKENIZER_KEY):
        if key not in members:
            raise CheckpointError(f"{where}: no {key} entry (is this a tinygpt checkpoint?)")

    header = _read_json(zf, members.pop(CONFIG_KEY), CONFIG_KEY, where)
    config, dtype = _parse_header(header, where)
    tok_dict = _read_json(zf, members.pop(TOKENIZER_KEY), TOKENIZER_KEY, where)
    try:
        tok = BPETokenizer.from_json_dict(tok_dict)
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"{where}: bad tokenizer: {err}") from err
    _check_vocab(tok, config, where)
    metadata = {}
    if METADATA_KEY in members:
        metadata = _read_json(zf, members.pop(METADATA_KEY), METADATA_KEY, where)
        if not isinstance(metadata, dict):
            raise CheckpointError(f"{where}: {METADATA_KEY} must be a JSON object")

    expected = parameter_shapes(config)
    extra = sorted(set(members) - set(expected))
    if extra:
        raise CheckpointError(f"{where}: unexpected array(s) {extra[:5]}")
    params = {}
    for name, info in members.items():
        params[name] = _read_npy(zf, info, name, where, expected_shape=expected[name])
    _check_parameters(params, config, where)
    return _build_model(config, params, dtype, metadata), tok


def _read_npy(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    name: str,
    where: str,
    expected_shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    """One .npy member, checked (header, shape, size) before its data is read."""
    fmt = np.lib.format
    with zf.open(info) as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(f)
        else:
            raise CheckpointError(f"{where}: {name} has unknown .npy version {version}")
        if dtype.hasobject:
            raise CheckpointError(f"{where}: {name} is an object array (pickle is not allowed)")
        if expected_shape is not None and tuple(shape) != expected_shape:
            raise CheckpointError(
                f"{where}: {name} has shape {tuple(shape)}, expected {expected_shape}"
            )
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes > info.file_size:  # the header promises more data than the member holds
            raise CheckpointError(f"{where}: {name} is truncated")
        data = bytearray(nbytes)  # writable, so the loaded parameters can be trained
        if f.readinto(data) != nbytes or f.read(1):
            raise CheckpointError(f"{where}: {name} has the wrong number of bytes")
    arr = np.frombuffer(data, dtype=dtype, count=count)
    arr = arr.reshape(shape, order="F" if fortran else "C")
    return arr.astype(dtype.newbyteorder("="), copy=False)


def _read_json(zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, where: str):
    arr = _read_npy(zf, info, name, where)
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise CheckpointError(f"{where}: {name} must be a 1-d uint8 array of JSON text")
    try:
        return json.loads(arr.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{where}: {name} is not valid JSON: {err}") from err


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


# ----------------------------------------------------------------------------- safetensors

# safetensors dtype name -> NumPy dtype of the stored bytes (all little-endian)
_SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # NumPy has no bfloat16: read the raw 16 bits, widen below
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_MAX_HEADER = 100 * 1024 * 1024


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of a float32: put the 16 bits there and reinterpret."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_safetensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a .safetensors file with NumPy alone, memory-mapped (copy-on-write).

    Layout: 8-byte little-endian header length n, n bytes of JSON
    {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
    then the raw little-endian tensor bytes (offsets count from the end of the header).
    BF16 tensors are returned as float32; every other dtype as stored.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size < 8:
            raise CheckpointError(f"{path}: too short to be a safetensors file")
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > min(size - 8, _MAX_HEADER):
                raise CheckpointError(f"{path}: header length {n} does not fit in the file")
            header = json.loads(f.read(n).decode("utf-8"))
        if not isinstance(header, dict):
            raise CheckpointError(f"{path}: header is not a JSON object")
        header.pop("__metadata__", None)
        data_size = size - 8 - n
        # copy-on-write: no copy at load time, and the arrays are still writable
        buf = np.memmap(path, dtype=np.uint8, mode="c") if header else None
        return {
            name: _safetensor(buf, 8 + n, data_size, name, entry, path)
            for name, entry in header.items()
        }
    except CheckpointError:
        raise
    except _READ_ERRORS + (mmap.error,) as err:
        raise CheckpointError(
            f"{path}: not a readable safetensors file ({type(err).__name__}: {err})"
        ) from err


def _safetensor(buf, base: int, data_size: int, name: str, entry, path: Path) -> np.ndarray:
    if not isinstance(entry, dict) or entry.get("dtype") not in _SAFETENSORS_DTYPES:
        raise CheckpointError(f"{path}: tensor {name!r} has an unsupported or missing dtype")
    dtype = _SAFETENSORS_DTYPES[entry["dtype"]]
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise CheckpointError(f"{path}: tensor {name!r} has a bad shape {shape!r}")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) for o in offsets)
        and 0 <= offsets[0] <= offsets[1] <= data_size
    ):
        raise CheckpointError(
            f"{path}: tensor {name!r} has data_offsets {offsets!r} outside the "
            f"{data_size} data bytes"
        )
    begin, end = offsets
    if end - begin != math.prod(shape) * dtype.itemsize:
        raise CheckpointError(
            f"{path}: tensor {name!r} has {end - begin} bytes but shape {shape} of "
            f"{entry['dtype']} needs {math.prod(shape) * dtype.itemsize}"
        )
    arr = np.asarray(buf[base + begin : base + end]).view(dtype).reshape(shape)
    if entry["dtype"] == "BF16":
        return bf16_to_f32(arr)
    return arr.astype(dtype.newbyteorder("="), copy=False)


# ----------------------------------------------------------------------------- GPT-2 folders

_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}

# Hugging Face GPT-2 names (after the block prefix h.{i}.) -> tinygpt names
_GPT2_BLOCK_NAMES = {
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
        raise CheckpointError(f"{where}: model_type {hf.get('model_type')!r} is not gpt2")
    act = hf.get("activation_function", "gelu_new")
    if act not in _ACTIVATIONS:
        raise CheckpointError(f"{where}: activation_function {act!r} is not supported")
    if hf.get("scale_attn_by_inverse_layer_idx") or hf.get("scale_attn_weights") is False:
        raise CheckpointError(f"{where}: non-standard attention scaling is not supported")
    try:
        return GPTConfig(
            vocab_size=hf["vocab_size"],
            n_ctx=hf.get("n_positions", hf.get("n_ctx")),
            n_embd=hf["n_embd"],
            n_head=hf["n_head"],
            n_layer=hf["n_layer"],
            tie_weights=hf.get("tie_word_embeddings", True),
            output_bias=False,
            layer_norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
            activation=_ACTIVATIONS[act],
        )
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: bad GPT-2 config: {err!r}") from err


def gpt2_parameters(
    tensors: dict[str, np.ndarray], config: GPTConfig, where: str = "GPT-2 weights"
) -> dict[str, np.ndarray]:
    """Rename a GPT-2 state dict (NumPy arrays) to tinygpt parameter names, without copying."""
    params: dict[str, np.ndarray] = {}
    for full_name, arr in tensors.items():
        name = full_name.removeprefix("transformer.")
        parts = name.split(".", 2)
        in_block = len(parts) == 3 and parts[0] == "h" and parts[1].isdigit()
        if in_block and parts[2] in _GPT2_BUFFERS:
            continue
        if name == "lm_head.weight":
            if not config.tie_weights:
                params["output.W_out"] = arr.T  # Linear stores (out, in) = (V, C)
            continue
        if name in _GPT2_TOP_NAMES:
            params[_GPT2_TOP_NAMES[name]] = arr
            continue
        if in_block:
            ours = _GPT2_BLOCK_NAMES.get(parts[2])
            if ours is not None:
                params[f"blocks.{int(parts[1])}.{ours}"] = arr
                continue
        raise CheckpointError(f"{where}: unexpected GPT-2 tensor {full_name!r}")
    return params


def _gpt2_tokenizer(folder: Path) -> BPETokenizer:
    for vocab, merges in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
        if (folder / vocab).is_file() and (folder / merges).is_file():
            try:
                return BPETokenizer.from_gpt2(folder / vocab, folder / merges)
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise CheckpointError(f"{folder}: bad tokenizer files: {err}") from err
    raise CheckpointError(
        f"{folder}: no tokenizer (need vocab.json + merges.txt or encoder.json + vocab.bpe)"
    )


def load_gpt2(folder: str | os.PathLike) -> tuple[GPT, BPETokenizer]:
    """Load a Hugging Face GPT-2 folder: config.json, model.safetensors, tokenizer files."""
    folder = Path(folder)
    config_path, weights_path = folder / "config.json", folder / "model.safetensors"
    if not config_path.is_file():
        raise CheckpointError(f"{folder}: no config.json")
    if not weights_path.is_file():
        raise CheckpointError(f"{folder}: no model.safetensors (only safetensors is supported)")
    try:
        hf = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{config_path}: not valid JSON: {err}") from err
    config = gpt2_config(hf, str(config_path))
    tok = _gpt2_tokenizer(folder)
    _check_vocab(tok, config, str(folder))
    params = gpt2_parameters(read_safetensors(weights_path), config, str(weights_path))
    _check_parameters(params, config, str(weights_path))
    metadata = {"source": "gpt2", "path": str(folder)}
    return _build_model(config, params, "float32", metadata), tok
