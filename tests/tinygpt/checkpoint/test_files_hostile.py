"""Hostile files for tinygpt.checkpoint.files: corrupted or truncated checkpoints and GPT-2
folders (random bytes, cuts, flipped bytes, JSON of the wrong types) give CheckpointError,
never another exception, a hang or a memory spike (property-based)."""

from __future__ import annotations

import io
import json
import tempfile
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.core_support import QUICK, app_tokenizer, time_limit
from tinygpt.caps import CheckpointError
from tinygpt.checkpoint.files import load, save
from tinygpt.network.model import GPT, GPTConfig

_SMALL = []


def small_checkpoint_bytes() -> bytes:
    """A small saved checkpoint (the app's tokenizer, a 1-layer model), built once."""
    if not _SMALL:
        tok = app_tokenizer()
        config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=16, n_embd=8, n_head=2, n_layer=1)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "small.npz"
            save(GPT(config, seed=1), tok, path)
            _SMALL.append(path.read_bytes())
    return _SMALL[0]


def load_bytes_or_checkpoint_error(data: bytes, tmp_path: Path) -> None:
    """load() must either succeed or raise CheckpointError, quickly."""
    path = tmp_path / "hostile.npz"
    path.write_bytes(data)
    with time_limit(10.0):
        try:
            model, tok = load(path)
        except CheckpointError:
            return
    # the damage missed everything that is checked (e.g. a zip timestamp): a usable model
    logits = model.forward(np.array(tok.encode("Hi"), dtype=np.int64))
    assert logits.shape == (len(tok.encode("Hi")), model.config.vocab_size)


@QUICK
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
                      min_size=1, max_size=6))
@example(flips=[(0.708984375, 8)])  # broke a .npy header so numpy's tokenizer raised TokenError
def test_flipped_bytes_give_checkpoint_error(flips, tmp_path):
    data = bytearray(small_checkpoint_bytes())
    for where, mask in flips:
        data[int(where * len(data))] ^= mask
    load_bytes_or_checkpoint_error(bytes(data), tmp_path)


@QUICK
@given(cut=st.floats(0, 1, exclude_max=True), junk=st.binary(max_size=64))
def test_truncated_files_give_checkpoint_error(cut, junk, tmp_path):
    data = small_checkpoint_bytes()
    end = min(int(cut * len(data)), len(data) - 1)  # at least one byte is missing
    path = tmp_path / "cut.npz"
    path.write_bytes(data[:end])
    with time_limit(10.0), pytest.raises(CheckpointError):
        load(path)
    # random bytes after the cut (they may even restore the missing tail: then it loads)
    load_bytes_or_checkpoint_error(data[:end] + junk, tmp_path)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(member=st.integers(0, 100), header=st.binary(min_size=0, max_size=200))
def test_rewritten_npy_headers_give_checkpoint_error(member, header, tmp_path):
    """A well-formed zip whose member is replaced by random .npy-like bytes (e.g. a header
    promising a huge array, or an object dtype that would need pickle)."""
    src = zipfile.ZipFile(io.BytesIO(small_checkpoint_bytes()))
    names = src.namelist()
    target = names[member % len(names)]
    out = tmp_path / "rewritten.npz"
    with zipfile.ZipFile(out, "w") as dst:
        for name in names:
            dst.writestr(name, b"\x93NUMPY" + header if name == target else src.read(name))
    assume(header)  # an empty body is the same as the truncation test
    load_bytes_or_checkpoint_error(out.read_bytes(), tmp_path)


@pytest.mark.parametrize("descr", ["'|O'", "'<f4'"])
def test_object_arrays_and_huge_shapes_are_refused_before_reading(tmp_path, descr):
    """An .npy header asking for pickled objects, or for 10^12 floats, is refused at once."""
    header = f"{{'descr': {descr}, 'fortran_order': False, 'shape': (1000000, 1000000), }}"
    body = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    src = zipfile.ZipFile(io.BytesIO(small_checkpoint_bytes()))
    out = tmp_path / "evil.npz"
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, body if name == "embedding.embeddings.npy" else src.read(name))
    with time_limit(5.0), pytest.raises(CheckpointError):
        load(out)


# ----------------------------------------------------------------------------- GPT-2 folders

GPT2_FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
_GPT2 = []


def small_gpt2_files() -> dict[str, bytes]:
    """A small valid GPT-2 folder (tinygpt's tiny test model, Hugging Face names), built once."""
    if not _GPT2:
        pytest.importorskip("safetensors", reason="safetensors writes the weights")
        from tests.tinygpt.checkpoint.test_files import (
            tiny_model,
            tiny_tokenizer,
            write_gpt2_folder,
        )

        with tempfile.TemporaryDirectory() as folder:
            write_gpt2_folder(Path(folder) / "g", tiny_model(), tiny_tokenizer())
            _GPT2.append({name: (Path(folder) / "g" / name).read_bytes() for name in GPT2_FILES})
    return _GPT2[0]


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)


@st.composite
def corrupted_gpt2_file(draw) -> tuple[str, bytes]:
    """(file name, new content): random bytes, a cut, flipped bytes, or wrong JSON types."""
    name = draw(st.sampled_from(GPT2_FILES))
    data = small_gpt2_files()[name]
    how = draw(st.sampled_from(["random", "cut", "flip", "json"]))
    if how == "random":
        return name, draw(st.binary(max_size=400))
    if how == "cut":
        return name, data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip":
        out = bytearray(data)
        for where, mask in draw(st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                                                   st.integers(1, 255)), min_size=1, max_size=4)):
            out[int(where * len(out))] ^= mask
        return name, bytes(out)
    if name == "model.safetensors":  # a field of one tensor's header entry gets a random value
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        tensor = draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
        header[tensor][draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(JSON_VALUE)
        text = json.dumps(header).encode()
        return name, len(text).to_bytes(8, "little") + text + data[8 + n :]
    if name == "merges.txt":
        return name, draw(st.text(max_size=60)).encode("utf-8", "surrogatepass")
    value = json.loads(data)
    if draw(st.booleans()):
        value = draw(JSON_VALUE)  # the whole file: a list, a number, ...
    else:
        value[draw(st.sampled_from(sorted(value)))] = draw(JSON_VALUE)
    return name, json.dumps(value).encode()


@settings(max_examples=80, deadline=None)
@given(damage=st.lists(corrupted_gpt2_file(), min_size=1, max_size=2))
@example(damage=[("vocab.json", b'["a", "b"]')])
@example(damage=[("config.json", b"[" * 50_000 + b"]" * 50_000)])
@example(damage=[("config.json", b'{"activation_function": ["gelu"]}')])
def test_corrupted_gpt2_folders_give_checkpoint_error(damage):
    """Any damage to any file of a GPT-2 folder: the model, or a CheckpointError that names
    the file without a server path; never another exception, never more than 32 MB."""
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        folder = models / "gpt2"
        folder.mkdir(parents=True)
        for name, data in small_gpt2_files().items():
            (folder / name).write_bytes(data)
        for name, data in damage:
            (folder / name).write_bytes(data)
        tracemalloc.start()
        try:
            with time_limit(10.0):
                model, tok = load(folder, root=models)
        except CheckpointError as err:
            assert tmp not in str(err), str(err)
            return
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < 32 * 2**20, f"{peak / 2**20:.1f} MB"
        ids = np.array(tok.encode("hello there")[: model.config.n_ctx], dtype=np.int64)
        assert np.isfinite(model.forward(ids)).all()
