"""tinygpt.checkpoint.gguf_file: hostile GGUF files, each refused with a clear message, in a
fresh process, within 20 s and 700 MB of peak memory (measured, not assumed).

Each file is written byte by byte here (`raw_gguf`), so every length, count and offset can
lie: strings and arrays longer than the file, huge tensor counts and dimensions, offsets
outside the file or unaligned, an alignment that is not a power of two, unknown types, a
file cut short anywhere."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygpt.caps import MAX_GGUF_ARRAY, MAX_GGUF_TENSORS
from tinygpt.checkpoint.gguf_file import TENSOR_TYPES, open_gguf, tensor_f32
from tinygpt.safe_io import CheckpointError

ROOT = Path(__file__).resolve().parents[3]
U32, U64, STR, ARR = 4, 10, 8, 9


def s(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def kv_string(key: str, value: str) -> bytes:
    return s(key) + struct.pack("<I", STR) + s(value)


def kv_u32(key: str, value: int) -> bytes:
    return s(key) + struct.pack("<II", U32, value)


def tensor(name: str, dims: list[int], type_id: int = 0, offset: int = 0) -> bytes:
    return (s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            + struct.pack("<IQ", type_id, offset))


def raw_gguf(kvs: list[bytes], tensors: list[bytes], data: bytes = b"", *, version: int = 3,
             n_tensors: int | None = None, n_kv: int | None = None) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else
                                 n_tensors, len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tensors)
    return body + b"\0" * (-len(body) % 32) + data


GOOD = raw_gguf([kv_string("general.architecture", "llama")],
                [tensor("w", [4, 2], 0, 0)], np.arange(8, dtype=np.float32).tobytes())

HOSTILE = {
    "not a GGUF file": b"GGML" + GOOD[4:],
    "version 7": GOOD[:4] + struct.pack("<I", 7) + GOOD[8:],
    "the tensor count": raw_gguf([], [], n_tensors=2**62),
    "the key count": raw_gguf([], [], n_kv=MAX_GGUF_TENSORS * 1000),
    "a metadata key": raw_gguf([struct.pack("<Q", 2**60)], [], b"\0" * 64),
    "more than the file holds": raw_gguf([s("k") + struct.pack("<I", STR)
                                          + struct.pack("<Q", 10**6)], []),
    f"limit is {MAX_GGUF_ARRAY:,}": raw_gguf(
        [s("k") + struct.pack("<IIQ", ARR, U32, 2**40)], []),
    "array of arrays": raw_gguf([s("k") + struct.pack("<II", ARR, ARR) + struct.pack("<Q", 1)
                                 + struct.pack("<IQ", U32, 1) + b"\0" * 4], []),
    "value type 99": raw_gguf([s("k") + struct.pack("<I", 99)], [], b"\0" * 64),
    "appears twice": raw_gguf([kv_u32("k", 1), kv_u32("k", 2)], []),
    "not UTF-8": raw_gguf([kv_string("k", "x")[:-1] + b"\xff"], []),
    "dimensions": raw_gguf([], [tensor("w", [1, 1, 1, 1, 1])]),
    "lies outside the file": raw_gguf([], [tensor("w", [2**31, 2**31], 0, 0)]),
    "not aligned": raw_gguf([], [tensor("w", [4], 0, 4)], b"\0" * 64),
    "power of two": raw_gguf([kv_u32("general.alignment", 48)], []),
    "tensor type IQ2_XXS": raw_gguf([], [tensor("w", [256], 16, 0)], b"\0" * 66),
    "tensor type number 4242": raw_gguf([], [tensor("w", [32], 4242, 0)], b"\0" * 64),
    "not whole Q4_0 blocks": raw_gguf([], [tensor("w", [33], 2, 0)], b"\0" * 64),
    "overlap": raw_gguf([], [tensor("a", [8], 0, 0), tensor("b", [8], 0, 0)], b"\0" * 32),
    "cut short": GOOD[:-4],
}


def refuse_in_fresh_process(path: Path) -> dict:
    """Load `path` with tinygpt.load in a new Python; its message, peak RSS and seconds."""
    script = (
        "import json, sys, time\n"
        "t = time.perf_counter()\n"
        "import tinygpt\n"
        "try:\n"
        "    tinygpt.load(sys.argv[1]); message = None\n"
        "except tinygpt.CheckpointError as err:\n"
        "    message = str(err)\n"
        # VmHWM, not ru_maxrss: ru_maxrss keeps the forking parent's peak across exec (a
        # test process that loaded the real model made every child read 2.8 GB)
        "peak = next(int(line.split()[1]) for line in open('/proc/self/status')\n"
        "            if line.startswith('VmHWM:'))\n"
        "print(json.dumps({'message': message, 'seconds': time.perf_counter() - t,\n"
        "    'peak_mb': peak / 1024}))\n")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("what", list(HOSTILE))
def test_a_hostile_file_is_refused_in_bounded_time_and_memory(tmp_path, what):
    path = tmp_path / "hostile.gguf"
    path.write_bytes(HOSTILE[what])
    result = refuse_in_fresh_process(path)
    assert result["message"] is not None and what in result["message"], result
    assert str(tmp_path) not in result["message"]
    assert result["seconds"] < 20 and result["peak_mb"] < 700, result


@pytest.mark.parametrize("cut", [3, 20, 30, 60, len(GOOD) - 33, len(GOOD) - 1])
def test_a_file_cut_anywhere_is_refused(tmp_path, cut):
    path = tmp_path / "cut.gguf"
    path.write_bytes(GOOD[:cut])
    with pytest.raises(CheckpointError, match="cut short|not a GGUF file|outside the file"):
        open_gguf(path, "cut.gguf")


def test_a_good_file_reads(tmp_path):
    path = tmp_path / "good.gguf"
    path.write_bytes(GOOD)
    gf = open_gguf(path, "good.gguf")
    try:
        assert gf.metadata == {"general.architecture": "llama"}
        info = gf.tensors["w"]
        assert (info.shape, TENSOR_TYPES[info.type_id][0]) == ((2, 4), "F32")
        np.testing.assert_array_equal(tensor_f32(gf, info), np.arange(8).reshape(2, 4))
    finally:
        gf.close()
