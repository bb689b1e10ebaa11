"""Reading untrusted model files: every size is checked before anything is allocated.

A file in the models folder may be damaged or hostile. Whatever it holds, reading it must
cost at most a known amount of memory and end in the data or a `CheckpointError` whose
message names the file by its label (its path relative to the models folder, never an
absolute server path).

The rules, one helper each:
- `read_capped`: a whole small file (JSON, merges.txt): stat, refuse above the cap, then a
  bounded read (the file may grow between the two).
- `parse_json`: UTF-8 JSON text; nesting deeper than `MAX_JSON_DEPTH` is refused.
- `check_zip_members`: every zip member's declared sizes against the file's real size.
- `read_npy_member`: one `.npy` inside a zip, header checked first, data streamed in chunks
  with a running cap (a member that inflates past what it declared stops at once).
- `read_safetensors`: the header's length and its number of entries capped first (from the
  tensors the config expects), then the `safetensors` library validates the header and
  offsets; the total, 16-bit tensors counted as the float32 they become, is capped; the
  tensors are then memory-mapped (no copy, pages shared with the page cache).
The caps themselves are in tinygpt.caps, with every other limit a model file is held to.
"""

from __future__ import annotations

import io
import json
import math
import mmap
import os
import struct
import tokenize
import zipfile
import zlib
from pathlib import Path

import numpy as np

# every cap lives in tinygpt.caps (the one place); these are the ones the readers here apply
from tinygpt.caps import (
    MAX_JSON_DEPTH,
    MAX_MODEL_BYTES,
    MAX_NPY_HEADER,
    MAX_SAFETENSORS_HEADER,
    MAX_TENSORS,
    CheckpointError,  # defined with the caps; imported from here by most of tinygpt
    max_header_bytes,
    max_tensors,
)

READ_CHUNK = 2**20  # compressed members are inflated this many bytes at a time
DEFLATE_MAX_RATIO = 1032  # deflate cannot inflate one byte into more than this

# every exception a corrupt file can raise somewhere inside zipfile / numpy / json
READ_ERRORS = (
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
    RuntimeError,  # RecursionError too
    NotImplementedError,
    OverflowError,
    MemoryError,
    SyntaxError,  # numpy parses a .npy header with Python's tokenizer and ast.literal_eval
    tokenize.TokenError,
    mmap.error,
)


def describe(err: BaseException) -> str:
    """A short description of an error that never repeats a path (OSError carries one)."""
    if isinstance(err, OSError):
        return f"{type(err).__name__}: {err.strerror or 'read error'}"
    return f"{type(err).__name__}: {err}"[:300]


# ----------------------------------------------------------------------------- paths


def file_label(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """How messages name a file: relative to `root` when it is inside, else its own name."""
    path = Path(path)
    if root is not None:
        try:
            return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
        except ValueError:
            pass
    return path.name or "the model file"


def check_inside(path: Path, root: Path, label: str) -> Path:
    """The real location of `path` (links followed), refused unless it lies inside `root`."""
    real, real_root = path.resolve(), root.resolve()
    if not real.is_relative_to(real_root):
        raise CheckpointError(f"{label}: a link that leads outside the models folder")
    return real


# ----------------------------------------------------------------------------- small files


def read_capped(path: str | os.PathLike, cap: int, label: str) -> bytes:
    """The bytes of a file of at most `cap` bytes; size checked before reading."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise CheckpointError(f"{label} is {size:,} bytes; the limit is {cap:,}")
            data = f.read(size + 1)  # not cap + 1: read() allocates what it is asked for
    except OSError as err:
        raise CheckpointError(f"{label}: cannot be read ({describe(err)})") from err
    if len(data) > size:
        raise CheckpointError(f"{label} changed while it was read")
    return data


def _depth(value) -> int:
    """Nesting depth of parsed JSON (iterative: a deep value cannot exhaust the stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("a key appears twice in one object")
    return obj


def parse_json(data: bytes, label: str):
    """UTF-8 JSON text -> value. Nesting over MAX_JSON_DEPTH or a repeated key is refused."""
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except RecursionError as err:
        raise CheckpointError(f"{label}: JSON nested too deeply") from err
    except (UnicodeDecodeError, ValueError) as err:  # JSONDecodeError is a ValueError
        raise CheckpointError(f"{label}: not valid JSON ({describe(err)})") from err
    if _depth(value) > MAX_JSON_DEPTH:
        raise CheckpointError(f"{label}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def read_json(path: str | os.PathLike, cap: int, label: str):
    """A JSON file of at most `cap` bytes, parsed."""
    return parse_json(read_capped(path, cap, label), label)


# ----------------------------------------------------------------------------- zip members


def check_zip_members(zf: zipfile.ZipFile, file_size: int, label: str) -> None:
    """Every member's declared sizes must be possible for a file of `file_size` bytes.

    Checked before any member is read: where it starts plus its compressed size lies inside
    the file, and its inflated size is what that many compressed bytes can give.
    """
    for info in zf.infolist():
        name = info.filename
        if info.flag_bits & 0x1:
            raise CheckpointError(f"{label}: member {name!r} is encrypted")
        if info.header_offset + 30 + len(name) + info.compress_size > file_size:
            raise CheckpointError(f"{label}: member {name!r} says it is larger than the file")
        if info.compress_type == zipfile.ZIP_STORED:
            possible = info.file_size == info.compress_size
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            possible = info.file_size <= DEFLATE_MAX_RATIO * info.compress_size + 64
        else:
            raise CheckpointError(f"{label}: member {name!r} uses an unsupported compression")
        if not possible:
            raise CheckpointError(
                f"{label}: member {name!r} declares {info.file_size:,} bytes, more than its "
                f"{info.compress_size:,} stored bytes can hold"
            )


def _read_exactly(f, n: int, what: str, label: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise CheckpointError(f"{label}: {what} is cut short")
    return data


def _npy_header(f, name: str, label: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, header bytes) of a .npy stream, read with bounded reads."""
    magic = _read_exactly(f, 8, name, label)
    if magic[:6] != b"\x93NUMPY" or magic[6:] not in (b"\x01\x00", b"\x02\x00", b"\x03\x00"):
        raise CheckpointError(f"{label}: {name} is not a .npy array")
    width = 2 if magic[6] == 1 else 4
    length_bytes = _read_exactly(f, width, name, label)
    length = int.from_bytes(length_bytes, "little")
    if length > MAX_NPY_HEADER:
        raise CheckpointError(f"{label}: {name} has a {length:,}-byte header")
    text = _read_exactly(f, length, name, label)
    fp = io.BytesIO(magic + length_bytes + text)
    fmt = np.lib.format
    version = fmt.read_magic(fp)
    read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = read(fp, max_header_size=MAX_NPY_HEADER)
    return tuple(shape), fortran, dtype, 8 + width + length


def read_npy_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    label: str,
    max_bytes: int,
    expected_shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    """One .npy member: header checked, then at most `max_bytes` of data streamed in chunks.

    Nothing is allocated from a declared size: the data grows as it arrives, and a member
    that inflates past its header's size stops at once.
    """
    name = info.filename.removesuffix(".npy")
    with zf.open(info) as f:
        shape, fortran, dtype, header_size = _npy_header(f, name, label)
        if dtype.hasobject:
            raise CheckpointError(f"{label}: {name} is an object array (pickle is not allowed)")
        if expected_shape is not None and shape != expected_shape:
            raise CheckpointError(f"{label}: {name} has shape {shape}, expected {expected_shape}")
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes > max_bytes:
            raise CheckpointError(f"{label}: {name} holds {nbytes:,} bytes; the limit is "
                                  f"{max_bytes:,}")
        if header_size + nbytes != info.file_size:
            raise CheckpointError(f"{label}: {name} has the wrong number of bytes")
        data = bytearray()
        while len(data) < nbytes:
            chunk = f.read(min(READ_CHUNK, nbytes - len(data)))
            if not chunk:
                raise CheckpointError(f"{label}: {name} is cut short")
            data += chunk
        if f.read(1):  # also makes zipfile check the CRC
            raise CheckpointError(f"{label}: {name} has more bytes than its header says")
    arr = np.frombuffer(data, dtype=dtype, count=count)  # writable: `data` is a bytearray
    arr = arr.reshape(shape, order="F" if fortran else "C")
    return arr.astype(dtype.newbyteorder("="), copy=False)


def read_json_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str, cap: int):
    """A 1-d uint8 .npy member holding UTF-8 JSON text, at most `cap` bytes, parsed."""
    name = info.filename.removesuffix(".npy")
    arr = read_npy_member(zf, info, label, cap)
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise CheckpointError(f"{label}: {name} must be a 1-d uint8 array of JSON text")
    return parse_json(arr.tobytes(), f"{label}: {name}")


# ----------------------------------------------------------------------------- safetensors

# safetensors dtype name -> NumPy dtype of the stored bytes (all little-endian)
SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype([("bf16", "<u2")]),  # NumPy has no bfloat16: the raw 16 bits, named
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


BF16_RAW = SAFETENSORS_DTYPES["BF16"]
HALF_TYPES = ("F16", "BF16")  # widened to float32 (4 bytes) before any computation


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of a float32: put the 16 bits there and reinterpret."""
    if raw.dtype == BF16_RAW:
        raw = raw["bf16"]
    return (raw.astype(np.uint32) << 16).view(np.float32)


def widen_half(arr: np.ndarray) -> np.ndarray:
    """float16 and raw bfloat16 -> a new float32 array; every other array as it is.

    The one place a 16-bit tensor is copied: callers check names and shapes first, so a
    refused file never costs its float32 size."""
    if arr.dtype == BF16_RAW:
        return bf16_to_f32(arr)
    if arr.dtype == np.float16:
        return arr.astype(np.float32)
    return arr


def loaded_bytes(dtype_name: str, shape: tuple[int, ...]) -> int:
    """Bytes a tensor costs once loaded: 16-bit types count as the float32 they become."""
    itemsize = 4 if dtype_name in HALF_TYPES else SAFETENSORS_DTYPES[dtype_name].itemsize
    return math.prod(shape) * itemsize


def read_safetensors(
    path: str | os.PathLike, label: str | None = None, *, widen: bool = True,
    expected: int | None = None,
) -> dict[str, np.ndarray]:
    """Read a .safetensors file, memory-mapped (copy-on-write), after checking all of it.

    Layout: 8-byte little-endian header length n, n bytes of JSON
    {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
    then the raw little-endian tensor bytes (offsets count from the end of the header).
    The tensors must tile the data exactly: no gaps, no overlaps, nothing after the last.
    The `safetensors` library validates the same file too. The tensors, counted as loaded
    (16-bit ones as float32), may hold at most MAX_MODEL_BYTES: checked from the header,
    before anything is mapped. With `widen` (the default) BF16 tensors are returned as new
    float32 arrays (NumPy has no bfloat16); with `widen=False` as mapped BF16_RAW views, for
    a caller that checks names and shapes before calling `widen_half`. Every other dtype
    (F16 too) is mapped as stored, never copied.

    Why not take the tensors from the library too: measured on a 400 MB file, its NumPy
    get_tensor copies every tensor into private memory (+416 MB private per process at
    load, none of it shared), where the map costs 3 MB until read and its pages can be
    shared between processes; and it cannot return BF16 as NumPy arrays. So the library
    validates (safe_open) and we map.

    `expected`: how many parameter arrays the model's config names. The header may then
    take at most caps.max_header_bytes(expected) bytes and hold caps.max_tensors(expected)
    entries (without it: MAX_SAFETENSORS_HEADER and MAX_TENSORS), both checked before
    anything of it is parsed further: a header of 150,000 junk entries costs nothing.
    """
    label = label or Path(path).name
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            n, header = _safetensors_header(f, size, label, expected)
            entries = _safetensors_entries(header, size - 8 - n, label)
            _library_validates(path, entries, label)
            # copy-on-write: no copy at load time, and the arrays are still writable
            buf = np.memmap(f, dtype=np.uint8, mode="c") if entries else None
            tensors = {name: _map_tensor(buf, 8 + n, entry) for name, entry in entries.items()}
            if widen:
                tensors = {n: bf16_to_f32(a) if a.dtype == BF16_RAW else a
                           for n, a in tensors.items()}
            return tensors
    except CheckpointError:
        raise
    except READ_ERRORS as err:
        raise CheckpointError(
            f"{label}: not a readable safetensors file ({describe(err)})"
        ) from err


def _safetensors_header(f, size: int, label: str, expected: int | None) -> tuple[int, object]:
    """(header length, parsed header) of an open safetensors file of `size` bytes; its
    length and its number of entries capped first (see read_safetensors)."""
    most_bytes, most_tensors = MAX_SAFETENSORS_HEADER, MAX_TENSORS
    if expected is not None:
        most_bytes, most_tensors = max_header_bytes(expected), max_tensors(expected)
    if size < 8:
        raise CheckpointError(f"{label}: too short to be a safetensors file")
    (n,) = struct.unpack("<Q", f.read(8))
    if n > size - 8:
        raise CheckpointError(f"{label}: header length {n:,} does not fit in the file")
    if n > most_bytes:
        raise CheckpointError(f"{label}: a header of {n:,} bytes; the limit is "
                              f"{most_bytes:,} for this model (tinygpt.caps)")
    header = parse_json(_read_exactly(f, n, "the header", label), label)
    if isinstance(header, dict) and len(header) - ("__metadata__" in header) > most_tensors:
        raise CheckpointError(f"{label}: {len(header):,} tensor entries; the limit is "
                              f"{most_tensors:,} for this model (tinygpt.caps)")
    return n, header


def _safetensors_entries(header, data_size: int, label: str) -> dict[str, tuple]:
    """name -> (dtype name, shape, begin, end), checked; the tensors must tile the data."""
    if not isinstance(header, dict):
        raise CheckpointError(f"{label}: header is not a JSON object")
    entries = {}
    for name, entry in header.items():
        if name != "__metadata__":
            entries[name] = _safetensors_entry(name, entry, data_size, label)
    at = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda e: e[1][2:]):
        if begin != at:
            what = "overlaps another tensor" if begin < at else "leaves a gap before it"
            raise CheckpointError(f"{label}: tensor {name!r} {what} (data_offsets)")
        at = end
    if at != data_size:
        raise CheckpointError(f"{label}: {data_size - at:,} bytes after the last tensor")
    loaded = sum(loaded_bytes(dtype, shape) for dtype, shape, _, _ in entries.values())
    if loaded > MAX_MODEL_BYTES:  # tiled, so this caps the file's data bytes too
        raise CheckpointError(f"{label}: the tensors take {loaded:,} bytes as loaded (16-bit "
                              f"ones as float32); the limit is {MAX_MODEL_BYTES:,}")
    return entries


def _safetensors_entry(name: str, entry, data_size: int, label: str) -> tuple:
    if not isinstance(entry, dict) or entry.get("dtype") not in SAFETENSORS_DTYPES:
        raise CheckpointError(f"{label}: tensor {name!r} has an unsupported or missing dtype")
    dtype = SAFETENSORS_DTYPES[entry["dtype"]]
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise CheckpointError(f"{label}: tensor {name!r} has a bad shape {shape!r}"[:200])
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(o) is int for o in offsets)
        and 0 <= offsets[0] <= offsets[1] <= data_size
    ):
        raise CheckpointError(
            f"{label}: tensor {name!r} has data_offsets {offsets!r} outside the "
            f"{data_size:,} data bytes"[:300]
        )
    begin, end = offsets
    needed = math.prod(shape) * dtype.itemsize
    if end - begin != needed:
        raise CheckpointError(
            f"{label}: tensor {name!r} has {end - begin:,} bytes but shape {shape} of "
            f"{entry['dtype']} needs {needed:,}"[:300]
        )
    return entry["dtype"], tuple(shape), begin, end


def _library_validates(path, entries: dict, label: str) -> None:
    """The safetensors library must accept the file and see the same tensors we do."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            names = f.keys()
    except (SafetensorError, OSError, ValueError) as err:
        message = str(err).replace(os.fspath(path), label)[:200]
        raise CheckpointError(f"{label}: refused by the safetensors library ({message})") from err
    if sorted(names) != sorted(entries):
        raise CheckpointError(f"{label}: the safetensors library reads other tensor names")


def _map_tensor(buf, base: int, entry: tuple) -> np.ndarray:
    dtype_name, shape, begin, end = entry
    dtype = SAFETENSORS_DTYPES[dtype_name]
    arr = np.asarray(buf[base + begin : base + end]).view(dtype).reshape(shape)
    if dtype_name == "BF16":
        return arr  # raw bits (BF16_RAW): widen_half makes the float32 copy
    return arr.astype(dtype.newbyteorder("="), copy=False)
