"""Hostile model files (issue 12): whatever a file in the models folder holds, loading costs a
bounded amount of memory and ends in the model or a CheckpointError that names the file
relative to the models folder.

Memory is measured with tracemalloc, which sees NumPy's and Python's allocations.
"""

import json
import mmap
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

from tests.tinygpt.checkpoint.test_files import (
    IDS,
    arrays_of,
    assert_load_refuses,
    f32,
    json_array,
    tiny_model,
    tiny_tokenizer,
    write_gpt2_folder,
    write_raw_safetensors,
)
from tinygpt import CheckpointError, load, save
from tinygpt.caps import MAX_JSON_BYTES, MAX_METADATA_BYTES, MAX_TOKENIZER_BYTES
from tinygpt.safe_io import read_safetensors


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.npz"
    save(tiny_model(), tiny_tokenizer(), path)
    return path


# ----------------------------------------------------------------------------- .npz files


def peak_memory(fn) -> int:
    """Peak bytes allocated while fn() runs."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refused(path, match: str | None = None, **kw) -> CheckpointError:
    with pytest.raises(CheckpointError, match=match) as info:
        load(path, **kw)
    return info.value


def npy_header(shape, descr="|u1") -> bytes:
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()


def rewrite_member(path, name: str, write) -> None:
    """Rebuild the checkpoint at `path` (deflated), `name` written by write(zip, ZipInfo)."""
    with zipfile.ZipFile(path) as src:
        members = {n: src.read(n) for n in src.namelist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for n, data in members.items():
            if n == name:
                info = zipfile.ZipInfo(n)
                info.compress_type = zipfile.ZIP_DEFLATED
                write(dst, info)
            else:
                dst.writestr(n, data)


def test_a_deflate_bomb_is_refused_before_it_inflates(saved):
    """Finding 4: 2 GB of zeros in __metadata__ peaked at 6.3 GB. Here 64 MB (64 kB packed)."""
    def bomb(dst, info):
        with dst.open(info, "w") as f:
            f.write(npy_header((64 * 2**20,)))
            for _ in range(64):
                f.write(bytes(2**20))

    rewrite_member(saved, "__metadata__.npy", bomb)
    assert saved.stat().st_size < 2**20
    peak = peak_memory(lambda: refused(saved, "metadata.*limit"))
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB"


def declare_size(path, member: str, size: int) -> None:
    """Overwrite the inflated size the zip declares for `member` (local + central headers)."""
    data = bytearray(path.read_bytes())
    name, at = member.encode(), 0
    while (at := bytes(data).find(name, at + 1)) >= 0:
        if data[at - 30: at - 26] == b"PK\x03\x04":
            struct.pack_into("<L", data, at - 30 + 22, size)
        elif data[at - 46: at - 42] == b"PK\x01\x02":
            struct.pack_into("<L", data, at - 46 + 24, size)
    path.write_bytes(bytes(data))


def test_a_member_inflating_past_its_declared_size_stops(saved):
    """The zip directory says 200 bytes; the data inflates to 64 MB: read no further."""
    rewrite_member(saved, "__metadata__.npy", lambda dst, info: dst.writestr(
        info, npy_header((64 * 2**20,)) + bytes(64 * 2**20)))
    declare_size(saved, "__metadata__.npy", 200)
    peak = peak_memory(lambda: refused(saved))
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB"


def test_a_member_lying_about_its_size_allocates_nothing(saved):
    """Finding 4: a zip directory promising 1 GB had 1 GB allocated (3.9 GB peak) before
    the first byte was read. Here: 256 MB promised, 2 bytes stored."""
    rewrite_member(saved, "__metadata__.npy",
                   lambda dst, info: dst.writestr(info, npy_header((256 * 2**20,)) + b"{}"))
    declare_size(saved, "__metadata__.npy", 256 * 2**20 + 128)
    peak = peak_memory(lambda: refused(saved, "declares"))
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MB"


@pytest.mark.parametrize("member, cap", [
    ("__config__", MAX_JSON_BYTES), ("__tokenizer__", MAX_TOKENIZER_BYTES),
    ("__metadata__", MAX_METADATA_BYTES),
])
def test_json_members_have_a_byte_cap(saved, member, cap):
    arrays = arrays_of(saved)
    value = json.loads(arrays[member].tobytes())
    if isinstance(value, dict):
        value["padding"] = "x" * cap  # still valid JSON, just too big
    arrays[member] = json_array(value)
    assert_load_refuses(saved, arrays, "limit")


def test_deeply_nested_json_is_refused(saved):
    arrays = arrays_of(saved)
    deep = 1
    for _ in range(40):  # 41 levels: more than MAX_JSON_DEPTH, far less than Python's limit
        deep = [deep]
    arrays["__metadata__"] = json_array({"a": deep})
    assert_load_refuses(saved, arrays, "nested")
    arrays["__metadata__"] = np.frombuffer(b"[" * 100_000 + b"]" * 100_000, dtype=np.uint8)
    assert_load_refuses(saved, arrays, "nested")


@pytest.mark.parametrize("change", [
    lambda d: {**d, "special_tokens": ["<|endoftext|>"]},  # AttributeError before
    lambda d: {**d, "vocab": {"0": "00"}},
    lambda d: {**d, "merges": [[1, 2]]},
])
def test_wrong_types_in_the_tokenizer_member(saved, change):
    """Finding 6: a list where a dict belongs raised AttributeError, not CheckpointError."""
    arrays = arrays_of(saved)
    arrays["__tokenizer__"] = json_array(change(tiny_tokenizer().to_json_dict()))
    assert_load_refuses(saved, arrays, "tokenizer")


def test_messages_name_files_relative_to_the_models_folder(tmp_path):
    """Finding 10 (core side): messages carried absolute server paths."""
    models = tmp_path / "srv" / "models"
    models.mkdir(parents=True)
    (models / "broken.npz").write_bytes(b"PK\x05\x06" + bytes(10))
    write_gpt2_folder(models / "gpt2", tiny_model(), tiny_tokenizer())
    (models / "gpt2" / "vocab.json").write_text("[]")
    cases = [models / "broken.npz", models / "gone.npz", models / "gpt2"]
    for path in cases:
        for root in (None, models):
            message = str(refused(path, root=root))
            assert str(tmp_path) not in message, message
            assert message.startswith(path.name), message
    message = str(refused(models / "gpt2", root=tmp_path / "srv"))
    assert message.startswith("models/gpt2"), message


# ----------------------------------------------------------------------------- GPT-2 files


@pytest.fixture
def gpt2_folder(tmp_path):
    folder = tmp_path / "models" / "gpt2"
    folder.parent.mkdir()
    write_gpt2_folder(folder, tiny_model(), tiny_tokenizer())
    return folder


@pytest.mark.parametrize("name", ["config.json", "vocab.json", "merges.txt",
                                  "model.safetensors"])
def test_a_link_out_of_the_models_folder_is_refused(gpt2_folder, tmp_path, name):
    """Finding 11: only the folder itself was checked; its files could point anywhere."""
    outside = tmp_path / "secret"
    outside.mkdir()
    (gpt2_folder / name).rename(outside / name)
    (gpt2_folder / name).symlink_to(outside / name)
    refused(gpt2_folder, "outside the models folder")
    load(gpt2_folder, root=tmp_path)  # a wider models folder holds the target: fine


def test_a_checkpoint_linked_from_outside_is_refused(saved, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "m.npz").symlink_to(saved)
    refused(models / "m.npz", "outside the models folder")
    load(models / "m.npz", root=tmp_path)


def test_a_link_inside_the_models_folder_is_followed(gpt2_folder):
    shared = gpt2_folder.parent / "shared-merges.txt"
    (gpt2_folder / "merges.txt").rename(shared)
    (gpt2_folder / "merges.txt").symlink_to(shared)
    model, _ = load(gpt2_folder)
    np.testing.assert_array_equal(model.forward(IDS), tiny_model().forward(IDS))


@pytest.mark.parametrize("name, content, match", [
    ("config.json", "[" * 100_000 + "]" * 100_000, "nested"),  # RecursionError before
    ("config.json", "[1, 2]", "object"),
    ("vocab.json", '["a", "b"]', "vocab"),  # AttributeError before
    ("vocab.json", '{"a": 0, "a": 1}', "twice"),
    ("merges.txt", "a b c\n", "merge"),
    ("merges.txt", b"\xff\xfe", "utf-8"),
], ids=["deep-config", "list-config", "list-vocab", "duplicate-key", "3-part-merge", "latin-1"])
def test_gpt2_files_of_the_wrong_kind(gpt2_folder, name, content, match):
    """Finding 6: wrong JSON types gave AttributeError / RecursionError."""
    path = gpt2_folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    refused(gpt2_folder, match)


@pytest.mark.parametrize("name, cap", [
    ("config.json", MAX_JSON_BYTES), ("vocab.json", MAX_TOKENIZER_BYTES),
    ("merges.txt", MAX_TOKENIZER_BYTES),
])
def test_huge_gpt2_files_are_refused_before_reading(gpt2_folder, name, cap):
    """Finding 5: a 1 GB merges.txt was read whole (MemoryError). Here a sparse 1 GB file."""
    with open(gpt2_folder / name, "r+b") as f:
        f.truncate(2**30)
    peak = peak_memory(lambda: refused(gpt2_folder, f"{name} is 1,073,741,824 bytes"))
    assert peak < 2**20


def test_overlapping_safetensors_offsets_are_refused(tmp_path):
    """Finding 11: two tensors sharing the same bytes were accepted."""
    for b_offsets, data in (([0, 8], b"\0" * 8), ([4, 12], b"\0" * 12)):
        header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                  "b": {"dtype": "F32", "shape": [2], "data_offsets": b_offsets}}
        write_raw_safetensors(tmp_path / "o.safetensors", header, data)
        with pytest.raises(CheckpointError, match="overlaps"):
            read_safetensors(tmp_path / "o.safetensors")


@pytest.mark.parametrize("header, data, match", [
    (f32([2], [0, 8]), b"\0" * 12, "after the last"),
    (f32([2], [4, 12]), b"\0" * 12, "gap"),
    ({**f32([2], [0, 8]), "__metadata__": {"n": 1}}, b"\0" * 8, "safetensors library"),
])
def test_safetensors_data_must_be_tiled_exactly(tmp_path, header, data, match):
    write_raw_safetensors(tmp_path / "t.safetensors", header, data)
    with pytest.raises(CheckpointError, match=match):
        read_safetensors(tmp_path / "t.safetensors")


def test_safetensors_weights_are_mapped_not_copied(gpt2_folder):
    """A later issue shares GPT-2 weights between processes: the load must not copy them."""
    def owners(array):
        while array is not None:
            yield array
            array = getattr(array, "base", None)

    tensors = read_safetensors(gpt2_folder / "model.safetensors")
    assert all(any(isinstance(o, (np.memmap, mmap.mmap)) for o in owners(t))
               for t in tensors.values())


def bf16_and_f32(n: int) -> tuple[dict, bytes]:
    """A header of one BF16 tensor of n numbers (2n bytes on disk, 4n as float32) and one
    F32 tensor of n numbers, with its zero data."""
    header = {"h": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]},
              "f": {"dtype": "F32", "shape": [n], "data_offsets": [2 * n, 6 * n]}}
    return header, b"\0" * (6 * n)


def test_safetensors_are_capped_counting_16_bit_tensors_as_float32(tmp_path, monkeypatch):
    """A file of 6n bytes is 8n bytes once its BF16 tensor is widened: the cap counts 8n,
    from the header, before a byte of data is mapped or widened."""
    import tinygpt.safe_io as safe_io

    header, data = bf16_and_f32(100)
    write_raw_safetensors(tmp_path / "t.safetensors", header, data)
    monkeypatch.setattr(safe_io, "bf16_to_f32", lambda raw: pytest.fail("widened"))
    monkeypatch.setattr(safe_io, "MAX_MODEL_BYTES", 799)  # the file is 600 data bytes
    with pytest.raises(CheckpointError, match="800 bytes as loaded.*limit is 799"):
        read_safetensors(tmp_path / "t.safetensors")
    monkeypatch.setattr(safe_io, "MAX_MODEL_BYTES", 800)
    raw = read_safetensors(tmp_path / "t.safetensors", widen=False)
    assert raw["h"].dtype == safe_io.BF16_RAW and raw["f"].dtype == np.float32


def test_16_bit_tensors_can_be_read_unwidened_and_widened_later(tmp_path):
    torch = pytest.importorskip("torch", reason="torch writes the bfloat16 reference")
    st = pytest.importorskip("safetensors.torch", reason="safetensors writes the file")
    from tinygpt.safe_io import widen_half

    t = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    st.save_file({"b": t.to(torch.bfloat16), "h": t.to(torch.float16), "f": t},
                 tmp_path / "m.safetensors")
    raw = read_safetensors(tmp_path / "m.safetensors", widen=False)
    assert all(np.shares_memory(a, raw["f"]) or a.base is not None for a in raw.values())
    assert raw["b"].T.shape == (5, 3)  # renaming transposes before widening: views work
    np.testing.assert_array_equal(widen_half(raw["b"].T), t.to(torch.bfloat16).float().numpy().T)
    np.testing.assert_array_equal(widen_half(raw["h"]), t.to(torch.float16).float().numpy())
    assert widen_half(raw["f"]) is raw["f"]  # float32 stays mapped
