"""GGUF files (llama.cpp's format) read with every count, length and offset checked first.

A GGUF file is a header, then metadata (key -> value: numbers, strings, arrays), then one
record per tensor (name, shape, type, offset), then the tensor bytes, aligned:

    "GGUF" | version u32 | tensor count u64 | key count u64
    key/value pairs: key (u64 length + UTF-8) | value type u32 | value
                     (an array: item type u32 | count u64 | items)
    tensor records:  name | n_dims u32 | dims u64 x n_dims (innermost first) | type u32
                     | offset u64
    padding to `general.alignment` (default 32), then the tensor data

The file is memory-mapped and read with bounds checks: a length or count is compared with the
caps in tinygpt.caps (MAX_GGUF_*) and with the bytes left in the file before anything is
built from it, so a hostile header costs at most a bounded amount of memory and time. The
tensors are then dequantized to float32 by the `gguf` package (maintained with llama.cpp),
a bounded number of rows at a time.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from tinygpt.caps import (
    MAX_GGUF_ALIGNMENT,
    MAX_GGUF_ARRAY,
    MAX_GGUF_DIMS,
    MAX_GGUF_ITEMS,
    MAX_GGUF_KEYS,
    MAX_GGUF_NAME,
    MAX_GGUF_STRING,
    MAX_GGUF_TENSORS,
)
from tinygpt.safe_io import CheckpointError, describe

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 had 32-bit counts and is long gone
DEFAULT_ALIGNMENT = 32
DEQUANTIZE_ROWS = 4096  # rows dequantized at once: bounds the gguf package's temporaries

# value type -> (struct format, bytes) of the numeric types; 8 is a string, 9 an array
_NUMBERS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
            6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
          10: "<u8", 11: "<i8", 12: "<f8"}
STRING, ARRAY = 8, 9

# the tensor types read, by their GGML number: name, values per block, bytes per block
TENSOR_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2),
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor record: its type number, its NumPy shape (outermost first) and its bytes."""

    name: str
    type_id: int
    shape: tuple[int, ...]
    offset: int  # from the start of the file
    nbytes: int


@dataclass
class GGUFFile:
    """A parsed GGUF file: its metadata, its tensor records and the mapped bytes."""

    label: str
    size: int
    metadata: dict
    tensors: dict[str, TensorInfo]
    buffer: mmap.mmap

    def close(self) -> None:
        self.buffer.close()


class _Cursor:
    """Reads little-endian values from the mapped file, each one checked against its end."""

    def __init__(self, buf, label: str):
        self.buf, self.label, self.pos, self.items = buf, label, 0, 0

    def take(self, n: int, what: str) -> int:
        """Move past n bytes; returns where they start. Refused if the file ends first."""
        if n < 0 or self.pos + n > len(self.buf):
            raise CheckpointError(f"{self.label}: the file is cut short (in {what})"[:300])
        start, self.pos = self.pos, self.pos + n
        return start

    def number(self, type_id: int, what: str):
        fmt, size = _NUMBERS[type_id]
        return struct.unpack_from(fmt, self.buf, self.take(size, what))[0]

    def count(self, cap: int, item_bytes: int, what: str) -> int:
        """A u64 count of items of at least `item_bytes` each: capped, and they must fit."""
        n = self.number(10, what)
        if n > cap:
            raise CheckpointError(f"{self.label}: {what} has {n:,} items; the limit is {cap:,}")
        if n * item_bytes > len(self.buf) - self.pos:
            raise CheckpointError(f"{self.label}: {what} says {n:,} items, more than the "
                                  "file holds (cut short?)")
        return n

    def string(self, cap: int, what: str) -> str:
        n = self.count(cap, 1, what)
        start = self.take(n, what)
        try:
            return str(self.buf[start:start + n], "utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(f"{self.label}: {what} is not UTF-8 text") from None

    def value(self, type_id: int, what: str):
        """One metadata value: a number, a string, or an array (numbers as a NumPy array)."""
        if type_id in _NUMBERS:
            return self.number(type_id, what)
        if type_id == STRING:
            return self.string(MAX_GGUF_STRING, what)
        if type_id != ARRAY:
            raise CheckpointError(f"{self.label}: {what}: value type {type_id} is not "
                                  "supported"[:300])
        item_type = self.number(4, what)
        if item_type not in _NUMBERS and item_type != STRING:
            kind = "an array of arrays" if item_type == ARRAY else \
                f"an array of value type {item_type}"
            raise CheckpointError(f"{self.label}: {what}: {kind} is not supported"[:300])
        size = _NUMBERS[item_type][1] if item_type in _NUMBERS else 8
        n = self.count(MAX_GGUF_ARRAY, size, what)
        self.items += n
        if self.items > MAX_GGUF_ITEMS:
            raise CheckpointError(f"{self.label}: the arrays hold more than {MAX_GGUF_ITEMS:,} "
                                  "items together")
        if item_type in _NUMBERS:
            start = self.take(n * size, what)
            return np.frombuffer(self.buf, _NUMPY[item_type], n, start).copy()
        return [self.string(MAX_GGUF_STRING, what) for _ in range(n)]


def open_gguf(path: str | os.PathLike, label: str) -> GGUFFile:
    """Map and parse a GGUF file: header, metadata and tensor records, each checked."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise CheckpointError(f"{label}: not a GGUF file (only {size} bytes)")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as err:
        raise CheckpointError(f"{label}: cannot be read ({describe(err)})") from err
    try:
        metadata, tensors = _parse(_Cursor(buf, label), size)
    except BaseException:
        buf.close()
        raise
    return GGUFFile(label, size, metadata, tensors, buf)


def _parse(cur: _Cursor, size: int) -> tuple[dict, dict[str, TensorInfo]]:
    label = cur.label
    if bytes(cur.buf[0:4]) != MAGIC:
        raise CheckpointError(f"{label}: not a GGUF file (no GGUF magic)")
    cur.take(4, "the magic")
    version = cur.number(4, "the version")
    if version not in VERSIONS:
        raise CheckpointError(f"{label}: GGUF version {version} is not supported "
                              f"(this tinygpt reads {VERSIONS[0]}..{VERSIONS[-1]})")
    n_tensors = cur.count(MAX_GGUF_TENSORS, 8 + 4 + 8 + 4 + 8, "the tensor count")
    n_keys = cur.count(MAX_GGUF_KEYS, 8 + 4 + 1, "the key count")
    metadata: dict = {}
    for _ in range(n_keys):
        key = cur.string(MAX_GGUF_NAME, "a metadata key")
        if key in metadata:
            raise CheckpointError(f"{label}: metadata key {key[:60]!r} appears twice")
        metadata[key] = cur.value(cur.number(4, key), key[:60])
    records = [_tensor_record(cur) for _ in range(n_tensors)]
    alignment = _alignment(metadata, label)
    data_start = -(-cur.pos // alignment) * alignment
    return metadata, _place_tensors(records, data_start, alignment, size, label)


def _alignment(metadata: dict, label: str) -> int:
    value = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (isinstance(value, (bool, float, np.ndarray, str, list)) or not 0 < value
            <= MAX_GGUF_ALIGNMENT or value & (value - 1)):
        raise CheckpointError(f"{label}: general.alignment {str(value)[:20]} is not a power of "
                              f"two up to {MAX_GGUF_ALIGNMENT:,}")
    return int(value)


def _tensor_record(cur: _Cursor) -> tuple[str, tuple[int, ...], int, int]:
    """(name, NumPy shape, type, relative offset) of one tensor record."""
    name = cur.string(MAX_GGUF_NAME, "a tensor name")
    n_dims = cur.number(4, name[:60])
    if not 1 <= n_dims <= MAX_GGUF_DIMS:
        raise CheckpointError(f"{cur.label}: tensor {name[:60]!r} has {n_dims} dimensions; "
                              f"1 to {MAX_GGUF_DIMS} are supported")
    dims = [cur.number(10, name[:60]) for _ in range(n_dims)]
    type_id = cur.number(4, name[:60])
    offset = cur.number(10, name[:60])
    return name, tuple(reversed(dims)), type_id, offset


def _place_tensors(records: list, data_start: int, alignment: int, size: int, label: str
                   ) -> dict[str, TensorInfo]:
    """Each record's type known, its size whole blocks, its bytes inside the file, aligned,
    and no two tensors overlapping."""
    tensors: dict[str, TensorInfo] = {}
    for name, shape, type_id, offset in records:
        shown = name[:60]
        if type_id not in TENSOR_TYPES:
            raise CheckpointError(f"{label}: tensor {shown!r} has tensor type "
                                  f"{_type_name(type_id)}, which is not supported")
        kind, block, block_bytes = TENSOR_TYPES[type_id]
        if any(d <= 0 for d in shape) or shape[-1] % block:
            raise CheckpointError(f"{label}: tensor {shown!r} has shape {shape}, not whole "
                                  f"{kind} blocks of {block}")
        nbytes = math.prod(shape) // block * block_bytes
        start = data_start + offset
        if offset % alignment or start + nbytes > size:
            raise CheckpointError(f"{label}: tensor {shown!r} lies outside the file or is not "
                                  "aligned (cut short?)")
        if tensors.setdefault(name, TensorInfo(name, type_id, shape, start, nbytes)).offset \
                != start:
            raise CheckpointError(f"{label}: tensor {shown!r} appears twice")
    ends = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors.values())
    for (_, end, first), (start, _, second) in zip(ends, ends[1:], strict=False):
        if start < end:
            raise CheckpointError(f"{label}: tensors {first[:40]!r} and {second[:40]!r} "
                                  "overlap")
    return tensors


def _type_name(type_id: int) -> str:
    """A tensor type's GGML name (as the gguf package knows it) or its number."""
    from gguf import GGMLQuantizationType

    try:
        return GGMLQuantizationType(type_id).name
    except ValueError:
        return f"number {type_id}"


def tensor_f32(gf: GGUFFile, info: TensorInfo) -> np.ndarray:
    """One tensor dequantized to float32, in its NumPy shape, DEQUANTIZE_ROWS rows at a time."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    kind, block, block_bytes = TENSOR_TYPES[info.type_id]
    width = info.shape[-1]
    rows = info.nbytes // (width // block * block_bytes)
    raw = np.frombuffer(gf.buffer, np.uint8, info.nbytes, info.offset).reshape(rows, -1)
    out = np.empty((rows, width), np.float32)
    qtype = GGMLQuantizationType[kind]
    for at in range(0, rows, DEQUANTIZE_ROWS):
        out[at:at + DEQUANTIZE_ROWS] = dequantize(raw[at:at + DEQUANTIZE_ROWS], qtype)
    return out.reshape(info.shape)
