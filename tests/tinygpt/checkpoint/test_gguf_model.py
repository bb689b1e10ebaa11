"""tinygpt.checkpoint.gguf_model: GGUF files of both architectures, every tensor type, loaded
into the same numbers as a Hugging Face folder holding the dequantized weights; the float32
copy (where, tied to the file's hash, rebuilt when damaged); the refusals by name.

The files are written by the gguf package's GGUFWriter (tests/tinygpt/checkpoint/gguf_files.py).
Parity with transformers' own GGUF loading: tests/parity/test_gguf_parity.py."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.tinygpt.checkpoint.gguf_files import ALL_TYPES, SMALL, write_gguf
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer
from tinygpt.checkpoint import gguf_model
from tinygpt.checkpoint.files import load, load_modern_model
from tinygpt.checkpoint.gguf_model import CACHE_FOLDER, cache_dirs, unpermute
from tinygpt.safe_io import CheckpointError

st = pytest.importorskip("safetensors.numpy", reason="the reference folder is a safetensors file")

CASES = {"llama": "smollm2", "qwen2": "qwen2"}  # architecture -> tokenizer style
IDS = np.array([[5, 17, 300, 2, 44, 9, 100, 260, 3, 1]])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """{arch: (gguf path, reference folder)}: the same dequantized weights in both."""
    base = tmp_path_factory.mktemp("gguf")
    out = {}
    for arch, style in CASES.items():
        tokenizer_json = build_tokenizer(style, base / "tokenizers")
        models = base / arch
        models.mkdir()
        reference = write_gguf(models / f"{arch}.gguf", arch, tokenizer_json, style)
        folder = base / f"{arch}_folder"
        folder.mkdir()
        config = dict(SMALL, model_type=arch, hidden_act="silu", tie_word_embeddings=False,
                      vocab_size=reference["model.embed_tokens.weight"].shape[0])
        (folder / "config.json").write_text(json.dumps(config))
        st.save_file(reference, folder / "model.safetensors")
        out[arch] = (models / f"{arch}.gguf", folder)
    return out


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def logits(model) -> np.ndarray:
    return np.asarray(model.forward(IDS))


@pytest.mark.parametrize("arch", list(CASES))
def test_a_gguf_file_gives_the_numbers_of_its_dequantized_weights(files, arch):
    path, folder = files[arch]
    shutil.rmtree(path.parent / CACHE_FOLDER, ignore_errors=True)
    model, tok = load(path)
    assert model.metadata["source"] == "gguf" and not model.metadata["from_copy"]
    assert model.config.n_kv_head == 2 and model.config.attn_bias == (arch == "qwen2")
    np.testing.assert_array_equal(logits(model), logits(load_modern_model(folder)))
    again, _ = load(path)  # from the float32 copy
    assert again.metadata["from_copy"]
    np.testing.assert_array_equal(logits(again), logits(model))


def test_every_tensor_type_is_in_the_files():
    assert {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K",
            "Q6_K"} <= set(ALL_TYPES)
    assert set(ALL_TYPES) == {name for name, _, _ in gguf_model_types()}


def gguf_model_types():
    from tinygpt.checkpoint.gguf_file import TENSOR_TYPES
    return TENSOR_TYPES.values()


def test_unpermute_inverts_llama_cpp_s_permutation():
    from tests.tinygpt.checkpoint.gguf_files import permute
    w = np.arange(8 * 6 * 3, dtype=np.float32).reshape(48, 3)
    np.testing.assert_array_equal(unpermute(permute(w, 3), 3), w)
    assert not np.array_equal(permute(w, 3), w)


def test_the_copy_is_hidden_tied_to_the_hash_and_rebuilt_when_damaged(files, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    path = models / "m.gguf"
    shutil.copy(files["llama"][0], path)
    model, _ = load(path)
    copies = list((models / CACHE_FOLDER).iterdir())
    assert [c.name.split(".")[0] for c in copies] == [model.metadata["sha256"]]
    assert sorted(p.name for p in models.iterdir() if not p.name.startswith(".")) == ["m.gguf"]
    (copies[0] / "ln_f.gamma.npy").write_bytes(b"damaged")
    rebuilt, _ = load(path)
    assert not rebuilt.metadata["from_copy"]
    np.testing.assert_array_equal(logits(rebuilt), logits(model))
    data = bytearray(path.read_bytes())  # another file (one bit of a weight): another hash
    data[-3] ^= 1
    path.write_bytes(bytes(data))
    changed, _ = load(path)
    assert not changed.metadata["from_copy"]
    assert changed.metadata["sha256"] != model.metadata["sha256"]


def test_a_models_folder_that_cannot_hold_the_copy_uses_the_cache_folder(files, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    path = models / "m.gguf"
    shutil.copy(files["qwen2"][0], path)
    (models / CACHE_FOLDER).write_text("not a folder")  # mkdir fails, as on a read-only disk
    model, _ = load(path)
    assert cache_dirs(path)[1] == tmp_path / "xdg" / "tinygpt"
    assert len(list((tmp_path / "xdg" / "tinygpt").iterdir())) == 1
    assert load(path)[0].metadata["from_copy"]


def test_old_copies_go_first_when_the_cache_is_full(files, tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    for name in ("a", "b"):
        shutil.copy(files[{"a": "llama", "b": "qwen2"}[name]][0], models / f"{name}.gguf")
    load(models / "a.gguf")
    monkeypatch.setattr(gguf_model, "CACHE_BYTES", 1)  # room for the newest copy only
    load(models / "b.gguf")
    assert len(list((models / CACHE_FOLDER).iterdir())) == 1


def test_the_tokenizer_comes_from_the_metadata(files):
    model, tok = load(files["llama"][0])
    assert tok.padded_size == model.config.vocab_size
    assert (tok.bos_token_id, tok.eos_token_id, tok.add_bos_token) == (1, 2, False)
    assert tok.chat_template.startswith("{% for m in messages %}")
    assert tok.encode("<|im_start|>user")[0] == tok.special_tokens["<|im_start|>"]
    text = "Digits 12345, café 👍 <|im_end|>\n\tdef f(x): return x"
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("key,value,message", [
    ("general.architecture", "gemma2", "architecture 'gemma2' is not supported"),
    ("tokenizer.ggml.pre", "deepseek-coder", "'deepseek-coder' is not a known pre-tokenizer"),
    ("tokenizer.ggml.model", "llama", "tokenizer.ggml.model 'llama' is not supported"),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, key, value, message):
    path = tmp_path / "m.gguf"
    write_gguf(path, "llama", build_tokenizer("smollm2", tmp_path), "smollm2",
               edits={key: value})
    with pytest.raises(CheckpointError, match=message) as err:
        load(path)
    assert str(tmp_path) not in str(err.value)
