"""Checkpoints: round trips, and every kind of broken file gives a CheckpointError."""

import json
import zipfile

import numpy as np
import pytest

from tinygpt import GPT, CheckpointError, GPTConfig, load, save
from tinygpt.checkpoint.hf_gpt2 import gpt2_parameters
from tinygpt.network.model import parameter_shapes
from tinygpt.safe_io import read_safetensors
from tinygpt.tokenizer.bpe import BPETokenizer

IDS = np.array([[1, 5, 104, 256, 7, 0, 3], [2, 2, 9, 255, 256, 11, 4]])


def tiny_tokenizer() -> BPETokenizer:
    """256 byte tokens + one merge ('h' + 'e') + <|endoftext|>: 258 tokens."""
    vocab = [bytes([b]) for b in range(256)] + [b"he", b"<|endoftext|>"]
    return BPETokenizer(vocab, [(104, 101, 256)], {"<|endoftext|>": 257})


def tiny_model(seed=0, dtype=np.float32, **kw) -> GPT:
    cfg = dict(vocab_size=258, n_ctx=16, n_embd=16, n_head=2, n_layer=2)
    cfg.update(kw)
    model = GPT(GPTConfig(**cfg), seed=seed, dtype=dtype)
    # non-trivial LayerNorm and bias values, so a mix-up between arrays would show
    rng = np.random.default_rng(seed + 100)
    for p in model.parameters().values():
        if p.ndim == 1:
            p += rng.standard_normal(p.shape).astype(p.dtype) * 0.1
    return model


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "model.npz"
    save(tiny_model(), tiny_tokenizer(), path)
    return path


def arrays_of(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def assert_load_refuses(path, arrays: dict, match: str) -> None:
    """Write `arrays` back as the checkpoint: load() must refuse it with a matching message."""
    np.savez(path, **arrays)
    with pytest.raises(CheckpointError, match=match):
        load(path)


def header_of(arrays) -> dict:
    return json.loads(arrays["__config__"].tobytes().decode())


def json_array(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj).encode(), dtype=np.uint8)


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    "kw",
    [{}, {"tie_weights": False}, {"output_bias": True}, {"tie_weights": False, "output_bias": True},
     {"activation": "gelu"},
     {"norm": "rmsnorm", "position": "rope", "rope_theta": 500.0, "n_kv_head": 1, "mlp": "swiglu",
      "n_inner": 24, "attn_bias": True, "proj_bias": False, "mlp_bias": False,
      "tie_weights": False}],
)
def test_round_trip_gives_identical_logits(tmp_path, kw):
    model, tok = tiny_model(**kw), tiny_tokenizer()
    save(model, tok, tmp_path / "m.npz", metadata={"step": 12, "loss": 1.5})
    model2, tok2 = load(tmp_path / "m.npz")
    assert model2.config == model.config
    assert model2.dtype == np.float32
    np.testing.assert_array_equal(model2.forward(IDS), model.forward(IDS))
    for name, p in model.parameters().items():
        np.testing.assert_array_equal(model2.parameters()[name], p, err_msg=name)
    assert model2.metadata == {"step": 12, "loss": 1.5}


def test_a_checkpoint_saved_before_the_modern_parts_loads_as_gpt2(saved):
    """Old headers have none of the new GPTConfig fields: they get GPT-2's parts."""
    arrays = arrays_of(saved)
    header = header_of(arrays)
    for field in ("norm", "position", "rope_theta", "n_kv_head", "mlp", "n_inner", "attn_bias",
                  "proj_bias", "mlp_bias"):
        del header["config"][field]
    arrays["__config__"] = json_array(header)
    np.savez(saved, **arrays)
    model, _ = load(saved)
    assert model.config == tiny_model().config
    np.testing.assert_array_equal(model.forward(IDS), tiny_model().forward(IDS))


def test_loaded_model_is_trainable_and_tied(saved):
    model, _ = load(saved)
    for p in model.parameters().values():
        assert p.flags.writeable
    assert np.shares_memory(model.output.W_out, model.embedding.embeddings)


def test_float64_round_trip(tmp_path):
    model = tiny_model().astype(np.float64)
    save(model, tiny_tokenizer(), tmp_path / "m.npz")
    model2, _ = load(tmp_path / "m.npz")
    assert model2.dtype == np.float64
    assert model2.metadata == {}
    np.testing.assert_array_equal(model2.forward(IDS), model.forward(IDS))


def test_tokenizer_round_trip(saved):
    tok = tiny_tokenizer()
    _, tok2 = load(saved)
    assert tok2.vocab == tok.vocab
    assert tok2.merges == tok.merges
    assert tok2.special_tokens == tok.special_tokens
    text = "the hero said hello<|endoftext|>"
    assert tok2.encode(text) == tok.encode(text)


def test_save_is_atomic_and_overwrites(tmp_path):
    path = tmp_path / "m.npz"
    save(tiny_model(seed=1), tiny_tokenizer(), path)
    save(tiny_model(seed=2), tiny_tokenizer(), path)
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file left behind
    model, _ = load(path)
    np.testing.assert_array_equal(model.forward(IDS), tiny_model(seed=2).forward(IDS))


def test_save_refuses_mismatched_tokenizer(tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        save(tiny_model(vocab_size=300), tiny_tokenizer(), tmp_path / "m.npz")
    assert not list(tmp_path.iterdir())


def test_a_model_with_padding_rows_round_trips(tmp_path):
    """Qwen2.5's case: more embedding rows than tokens; the tokenizer's padded_size is saved."""
    tok = tiny_tokenizer()
    padded = BPETokenizer(tok.vocab, tok.merges, tok.special_tokens, padded_size=300)
    save(tiny_model(vocab_size=300), padded, tmp_path / "m.npz")
    model, tok2 = load(tmp_path / "m.npz")
    assert (tok2.vocab_size, tok2.padded_size, model.config.vocab_size) == (258, 300, 300)
    assert tok2.token_display(299) == "⟨unused id 299⟩"


def test_checkpoint_holds_only_plain_arrays(saved):
    arrays = arrays_of(saved)  # np.load without pickle reads every entry
    assert header_of(arrays)["config"] == tiny_model().config.to_dict()
    assert header_of(arrays)["dtype"] == "float32"


@pytest.mark.parametrize(
    "cfg",
    [
        GPTConfig(vocab_size=10, n_ctx=4, n_embd=8, n_head=2, n_layer=1),
        GPTConfig(vocab_size=10, n_ctx=4, n_embd=8, n_head=1, n_layer=3, tie_weights=False),
        GPTConfig(vocab_size=7, n_ctx=5, n_embd=6, n_head=3, n_layer=2, output_bias=True),
    ],
)
def test_parameter_shapes_match_the_model(cfg):
    model = GPT(cfg)
    assert parameter_shapes(cfg) == {k: v.shape for k, v in model.parameters().items()}
    assert list(parameter_shapes(cfg)) == list(model.parameters())


# ----------------------------------------------------------------------------- broken files


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="no such"):
        load(tmp_path / "nothing.npz")


def test_empty_file(tmp_path):
    (tmp_path / "e.npz").write_bytes(b"")
    with pytest.raises(CheckpointError):
        load(tmp_path / "e.npz")


def test_random_bytes(tmp_path):
    path = tmp_path / "r.npz"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(CheckpointError):
        load(path)


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.25, 0.5, 0.9, 0.999])
def test_truncated_file(saved, fraction):
    data = saved.read_bytes()
    saved.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(CheckpointError):
        load(saved)


def test_file_cut_just_before_the_end(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[:-1])
    with pytest.raises(CheckpointError):
        load(saved)


def test_zip_with_a_corrupted_member(saved):
    """Flip bytes inside one array's data: the zip CRC check must catch it."""
    with zipfile.ZipFile(saved) as zf:
        info = zf.getinfo("blocks.0.attn.W_qkv.npy")
    data = bytearray(saved.read_bytes())
    inside = info.header_offset + 30 + len(info.filename) + 200  # past local header + npy header
    data[inside : inside + 8] = b"\xff" * 8
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        load(saved)


def test_zip_with_a_garbage_member(tmp_path):
    path = tmp_path / "g.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__config__.npy", b"\x93NUMPY garbage")
        zf.writestr("__tokenizer__.npy", b"")
    with pytest.raises(CheckpointError):
        load(path)


def test_not_a_checkpoint_npz(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(CheckpointError, match="__config__"):
        load(tmp_path / "x.npz")


def test_missing_array(saved):
    arrays = arrays_of(saved)
    del arrays["blocks.1.ffn.W2"]
    assert_load_refuses(saved, arrays, r"missing.*blocks\.1\.ffn\.W2")


def test_unexpected_array(saved):
    arrays = arrays_of(saved)
    arrays["blocks.7.ffn.W2"] = np.zeros((64, 16), np.float32)
    assert_load_refuses(saved, arrays, r"unexpected.*blocks\.7\.ffn\.W2")


def test_untied_weight_in_a_tied_checkpoint_is_unexpected(saved):
    arrays = arrays_of(saved)
    arrays["output.W_out"] = np.zeros((16, 258), np.float32)
    assert_load_refuses(saved, arrays, "output.W_out")


def test_wrong_shape(saved):
    arrays = arrays_of(saved)
    arrays["blocks.0.attn.W_qkv"] = np.zeros((16, 47), np.float32)
    assert_load_refuses(saved, arrays, r"blocks\.0\.attn\.W_qkv.*\(16, 47\).*\(16, 48\)")


def test_transposed_matrix(saved):
    arrays = arrays_of(saved)
    arrays["blocks.0.ffn.W1"] = arrays["blocks.0.ffn.W1"].T.copy()
    assert_load_refuses(saved, arrays, r"blocks\.0\.ffn\.W1")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values(saved, bad):
    arrays = arrays_of(saved)
    arrays["ln_f.gamma"][3] = bad
    assert_load_refuses(saved, arrays, r"ln_f\.gamma.*NaN")


def test_integer_parameter(saved):
    arrays = arrays_of(saved)
    arrays["ln_f.beta"] = np.zeros(16, np.int32)
    assert_load_refuses(saved, arrays, r"ln_f\.beta.*float")


def test_object_array_is_refused(saved):
    arrays = arrays_of(saved)
    arrays["ln_f.beta"] = np.array([{"evil": 1}] * 16, dtype=object)  # np.savez pickles this
    assert_load_refuses(saved, arrays, "pickle")


def test_object_array_config_is_refused(saved):
    arrays = arrays_of(saved)
    arrays["__config__"] = np.array({"format": "tinygpt-checkpoint"}, dtype=object)
    assert_load_refuses(saved, arrays, "pickle")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda h: "not json {", "JSON"),
        (lambda h: [1, 2], "header"),
        (lambda h: {**h, "format": "other"}, "header"),
        (lambda h: {**h, "version": 99}, "version"),
        (lambda h: {**h, "dtype": "int8"}, "dtype"),
        (lambda h: {**h, "surprise": 1}, "surprise"),
        (lambda h: {**h, "config": {**h["config"], "n_heads": 2}}, "n_heads"),
        (lambda h: {**h, "config": {**h["config"], "n_head": 3}}, "divisible"),
        (lambda h: {**h, "config": {**h["config"], "n_layer": -1}}, "n_layer"),
        (lambda h: {k: v for k, v in h.items() if k != "config"}, "config"),
    ],
)
def test_bad_config(saved, change, message):
    arrays = arrays_of(saved)
    new = change(header_of(arrays))
    if isinstance(new, str):
        arrays["__config__"] = np.frombuffer(new.encode(), dtype=np.uint8)
    else:
        arrays["__config__"] = json_array(new)
    assert_load_refuses(saved, arrays, message)


def test_config_bigger_than_the_arrays(saved):
    arrays = arrays_of(saved)
    header = header_of(arrays)
    header["config"]["n_layer"] = 3
    arrays["__config__"] = json_array(header)
    assert_load_refuses(saved, arrays, r"missing.*blocks\.2")


def test_mismatched_vocab_size(saved):
    arrays = arrays_of(saved)
    tok = tiny_tokenizer()
    smaller = BPETokenizer(tok.vocab[:257], tok.merges)  # drop <|endoftext|>
    arrays["__tokenizer__"] = json_array(smaller.to_json_dict())
    assert_load_refuses(saved, arrays, "257 tokens.*258")


def test_bad_tokenizer(saved):
    arrays = arrays_of(saved)
    arrays["__tokenizer__"] = json_array({"vocab": 3})
    assert_load_refuses(saved, arrays, "tokenizer")


def test_metadata_must_be_an_object(saved):
    arrays = arrays_of(saved)
    arrays["__metadata__"] = json_array([1, 2, 3])
    assert_load_refuses(saved, arrays, "metadata")


# ----------------------------------------------------------------------------- safetensors


def test_safetensors_reader_matches_the_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package is the reference")
    rng = np.random.default_rng(0)
    tensors = {
        "a": rng.standard_normal((3, 5)).astype(np.float32),
        "b.c": rng.standard_normal((7,)).astype(np.float16),
        "d": rng.standard_normal((2, 2, 2)).astype(np.float64),
        "e": np.arange(6, dtype=np.int64).reshape(2, 3),
        "empty": np.zeros((0, 4), np.float32),
    }
    st.save_file(tensors, tmp_path / "t.safetensors", metadata={"format": "np"})
    ours = read_safetensors(tmp_path / "t.safetensors")
    theirs = st.load_file(tmp_path / "t.safetensors")
    assert set(ours) == set(theirs)
    for k in theirs:
        assert ours[k].dtype == theirs[k].dtype, k
        np.testing.assert_array_equal(ours[k], theirs[k], err_msg=k)


def test_safetensors_bfloat16(tmp_path):
    torch = pytest.importorskip("torch", reason="torch writes the bfloat16 reference")
    st = pytest.importorskip("safetensors.torch", reason="safetensors writes the file")
    t = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    t[0, 0] = float("inf")
    st.save_file({"w": t}, tmp_path / "b.safetensors")
    ours = read_safetensors(tmp_path / "b.safetensors")["w"]
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours, t.float().numpy())


def write_raw_safetensors(path, header: dict, data: bytes, header_len: int | None = None):
    text = json.dumps(header).encode()
    n = len(text) if header_len is None else header_len
    path.write_bytes(n.to_bytes(8, "little") + text + data)


def test_safetensors_hand_written_layout(tmp_path):
    """The format from its spec, written by hand: checks offsets are relative to the data."""
    a = np.array([1.5, -2.0], "<f4")
    b = np.array([[1, 2], [3, 4]], "<f2")
    header = {
        "__metadata__": {"x": "y"},
        "b": {"dtype": "F16", "shape": [2, 2], "data_offsets": [8, 16]},
        "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    }
    write_raw_safetensors(tmp_path / "h.safetensors", header, a.tobytes() + b.tobytes())
    got = read_safetensors(tmp_path / "h.safetensors")
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], b)


def f32(shape, offsets):
    return {"a": {"dtype": "F32", "shape": shape, "data_offsets": offsets}}


@pytest.mark.parametrize(
    "header, data, header_len, message",
    [
        (f32([2], [0, 8]), b"\0" * 8, 10**6, "fit"),
        (f32([2], [0, 8]), b"\0" * 8, 2**63, "fit"),
        (f32([10**6, 10**6], [0, 8]), b"\0" * 8, None, "needs"),
        (f32([2], [0, 8]), b"\0" * 4, None, "outside"),
        (f32([2], [4, 12]), b"\0" * 8, None, "outside"),
        (f32([3], [0, 8]), b"\0" * 8, None, "needs"),
        (f32([2], [8, 0]), b"\0" * 8, None, "outside"),
        (f32([-2], [0, 8]), b"\0" * 8, None, "shape"),
        ({"a": {"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "dtype"),
        ({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, None, "data_offsets"),
        ([1, 2], b"", None, "object"),
    ],
)
def test_safetensors_corrupt_header(tmp_path, header, data, header_len, message):
    path = tmp_path / "bad.safetensors"
    write_raw_safetensors(path, header, data, header_len)
    with pytest.raises(CheckpointError, match=message):
        read_safetensors(path)


@pytest.mark.parametrize("content", [b"", b"\x01\x02", b"\x05" + b"\0" * 7 + b"{bad}"])
def test_safetensors_garbage(tmp_path, content):
    (tmp_path / "g.safetensors").write_bytes(content)
    with pytest.raises(CheckpointError):
        read_safetensors(tmp_path / "g.safetensors")


# ----------------------------------------------------------------------------- GPT-2 folders

HF_BLOCK = {
    "ln1.gamma": "ln_1.weight", "ln1.beta": "ln_1.bias",
    "attn.W_qkv": "attn.c_attn.weight", "attn.b_qkv": "attn.c_attn.bias",
    "attn.W_proj": "attn.c_proj.weight", "attn.b_proj": "attn.c_proj.bias",
    "ln2.gamma": "ln_2.weight", "ln2.beta": "ln_2.bias",
    "ffn.W1": "mlp.c_fc.weight", "ffn.b1": "mlp.c_fc.bias",
    "ffn.W2": "mlp.c_proj.weight", "ffn.b2": "mlp.c_proj.bias",
}  # fmt: skip


def hf_state(model: GPT) -> dict[str, np.ndarray]:
    """A GPT-2 state dict written by hand from the Hugging Face names (the inverse mapping)."""
    p = model.parameters()
    state = {
        "transformer.wte.weight": p["embedding.embeddings"],
        "transformer.wpe.weight": p["embedding.position_embeddings"],
        "transformer.ln_f.weight": p["ln_f.gamma"],
        "transformer.ln_f.bias": p["ln_f.beta"],
        "lm_head.weight": p["embedding.embeddings"].copy(),
    }
    for i in range(model.config.n_layer):
        for ours, theirs in HF_BLOCK.items():
            state[f"transformer.h.{i}.{theirs}"] = p[f"blocks.{i}.{ours}"]
        n = model.config.n_ctx
        state[f"transformer.h.{i}.attn.bias"] = np.tril(np.ones((1, 1, n, n), np.float32))
    return state


def write_gpt2_folder(folder, model: GPT, tok: BPETokenizer, openai_names=False, **config):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package writes the file")
    folder.mkdir(exist_ok=True)
    st.save_file({k: np.ascontiguousarray(v) for k, v in hf_state(model).items()},
                 folder / "model.safetensors")
    c = model.config
    hf = {"model_type": "gpt2", "vocab_size": c.vocab_size, "n_positions": c.n_ctx,
          "n_embd": c.n_embd, "n_head": c.n_head, "n_layer": c.n_layer,
          "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
    hf.update(config)
    (folder / "config.json").write_text(json.dumps(hf))
    names = ("encoder.json", "vocab.bpe") if openai_names else ("vocab.json", "merges.txt")
    tok.save_gpt2(folder / names[0], folder / names[1])


@pytest.mark.parametrize("openai_names", [False, True])
def test_gpt2_folder_loads(tmp_path, openai_names):
    model, tok = tiny_model(), tiny_tokenizer()
    write_gpt2_folder(tmp_path / "gpt2", model, tok, openai_names)
    model2, tok2 = load(tmp_path / "gpt2")
    assert model2.config == model.config
    np.testing.assert_array_equal(model2.forward(IDS), model.forward(IDS))
    assert tok2.encode("hello there") == tok.encode("hello there")
    assert model2.metadata["source"] == "gpt2"
    # a GPT-2 model saved as a tinygpt checkpoint loads back the same
    save(model2, tok2, tmp_path / "m.npz")
    model3, _ = load(tmp_path / "m.npz")
    np.testing.assert_array_equal(model3.forward(IDS), model.forward(IDS))


def test_gpt2_folder_exact_gelu(tmp_path):
    model = tiny_model(activation="gelu")
    write_gpt2_folder(tmp_path / "g", model, tiny_tokenizer(), activation_function="gelu")
    model2, _ = load(tmp_path / "g")
    assert model2.config.activation == "gelu"
    np.testing.assert_array_equal(model2.forward(IDS), model.forward(IDS))


@pytest.mark.parametrize(
    "config, message",
    [
        ({"activation_function": "relu"}, "activation"),
        ({"model_type": "llama"}, "model_type"),
        ({"n_head": 5}, "divisible"),
        ({"vocab_size": 300}, "vocab_size"),
        ({"n_positions": 32}, "position_embeddings"),
    ],
)
def test_gpt2_folder_bad_config(tmp_path, config, message):
    write_gpt2_folder(tmp_path / "g", tiny_model(), tiny_tokenizer(), **config)
    with pytest.raises(CheckpointError, match=message):
        load(tmp_path / "g")


def test_gpt2_folder_missing_pieces(tmp_path):
    folder = tmp_path / "g"
    write_gpt2_folder(folder, tiny_model(), tiny_tokenizer())
    (folder / "merges.txt").unlink()
    with pytest.raises(CheckpointError, match="tokenizer"):
        load(folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="safetensors"):
        load(folder)
    (folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json"):
        load(folder)


def test_gpt2_folder_unknown_tensor(tmp_path):
    st = pytest.importorskip("safetensors.numpy", reason="the safetensors package writes the file")
    folder = tmp_path / "g"
    write_gpt2_folder(folder, tiny_model(), tiny_tokenizer())
    state = st.load_file(folder / "model.safetensors")
    state["transformer.h.0.attn.q_proj.weight"] = np.zeros((16, 16), np.float32)
    st.save_file(state, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="q_proj"):
        load(folder)


def test_gpt2_folder_truncated_weights(tmp_path):
    folder = tmp_path / "g"
    write_gpt2_folder(folder, tiny_model(), tiny_tokenizer())
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="outside"):
        load(folder)


def test_gpt2_weights_are_writable_without_touching_the_file(tmp_path):
    """Copy-on-write memory map: training a loaded GPT-2 must not write into model.safetensors."""
    folder = tmp_path / "g"
    write_gpt2_folder(folder, tiny_model(), tiny_tokenizer())
    before = (folder / "model.safetensors").read_bytes()
    model, _ = load(folder)
    model.blocks[0].attn.W_qkv += 1.0
    model.embedding.embeddings[:] = 0.0
    del model
    assert (folder / "model.safetensors").read_bytes() == before
    model, _ = load(folder)
    np.testing.assert_array_equal(model.forward(IDS), tiny_model().forward(IDS))


@pytest.mark.parametrize("index", ["\u00b2", "\u0663", "01", "1\uff10"])
def test_a_gpt2_layer_number_that_is_not_plain_ascii_is_refused(index):
    """int('\u00b2') raised a plain ValueError; '\u0663' and '01' silently replaced layer 1."""
    model = tiny_model()
    state = hf_state(model)
    state[f"transformer.h.{index}.ln_1.weight"] = np.ones(16, np.float32)
    with pytest.raises(CheckpointError, match="unexpected GPT-2 tensor"):
        gpt2_parameters(state, model.config, "gpt2/model.safetensors")


def test_two_gpt2_names_for_one_parameter_are_refused():
    model = tiny_model()
    state = hf_state(model)
    state["h.1.ln_1.weight"] = np.ones(16, np.float32)  # the same array without "transformer."
    with pytest.raises(CheckpointError, match="repeats blocks.1.ln1.gamma"):
        gpt2_parameters(state, model.config, "gpt2/model.safetensors")
