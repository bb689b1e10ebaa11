"""tinygpt against Hugging Face transformers on the same GPT-2 weights.

A small random GPT2LMHeadModel is saved with `save_pretrained` (safetensors) and loaded with
`tinygpt.load`: logits, hidden states and attention weights must match PyTorch's.
"""

import json
import string

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch runs the reference GPT-2")
transformers = pytest.importorskip(
    "transformers", reason="transformers defines the reference GPT-2"
)

from tinygpt import load  # noqa: E402
from tinygpt.tokenizer.bpe import bytes_to_unicode  # noqa: E402

pytestmark = pytest.mark.parity

VOCAB = 500
N_LAYER = 2


def write_tokenizer_files(folder) -> None:
    """vocab.json + merges.txt with exactly VOCAB tokens: 256 bytes, letter pairs, <|endoftext|>."""
    byte_str = bytes_to_unicode()
    encoder = {byte_str[b]: b for b in range(256)}
    pairs = [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
    merges = pairs[: VOCAB - 257]
    for pair in merges:
        encoder[pair] = len(encoder)
    encoder["<|endoftext|>"] = len(encoder)
    assert len(encoder) == VOCAB
    (folder / "vocab.json").write_text(json.dumps(encoder))
    lines = ["#version: 0.2"] + [f"{p[0]} {p[1]}" for p in merges]
    (folder / "merges.txt").write_text("\n".join(lines) + "\n")


def make_hf_model(folder, seed=0, **config):
    """Random GPT-2 with every parameter perturbed (LayerNorms and biases not at 1 / 0)."""
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        n_layer=N_LAYER, n_head=4, n_embd=64, vocab_size=VOCAB, n_positions=128,
        bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1, **config,
    )  # fmt: skip
    cfg._attn_implementation = "eager"  # explicit softmax weights we can compare
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    folder.mkdir()
    model.save_pretrained(folder, safe_serialization=True)
    write_tokenizer_files(folder)
    return model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2") / "tanh"
    hf = make_hf_model(folder)
    model, tok = load(folder)
    return hf, model, tok


def random_ids(shape, seed=1):
    return np.random.default_rng(seed).integers(0, VOCAB, size=shape)


def hf_logits(hf, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(torch.from_numpy(ids)).logits.numpy()


def test_loaded_config(pair):
    _, model, tok = pair
    c = model.config
    assert (c.vocab_size, c.n_ctx, c.n_embd, c.n_head, c.n_layer) == (VOCAB, 128, 64, 4, N_LAYER)
    assert c.activation == "gelu_tanh" and c.tie_weights and not c.output_bias
    assert tok.vocab_size == VOCAB


def test_logits_match(pair):
    hf, model, _ = pair
    ids = random_ids((3, 40))
    ours, theirs = model.forward(ids), hf_logits(hf, ids)
    assert ours.dtype == np.float32
    assert np.abs(theirs).max() > 1.0  # the comparison is not between near-zero numbers
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)


def test_trace_matches_hidden_states_and_attention(pair):
    hf, model, _ = pair
    ids = random_ids(40, seed=2)
    with torch.no_grad():
        out = hf(torch.from_numpy(ids[None]), output_hidden_states=True, output_attentions=True)
    logits, trace = model.run_with_trace(ids)
    hidden = [h[0].numpy() for h in out.hidden_states]  # n_layer + 1 of (T, C)
    assert len(hidden) == N_LAYER + 1
    np.testing.assert_allclose(trace["embed.sum"], hidden[0], atol=1e-5)
    for i in range(N_LAYER - 1):
        np.testing.assert_allclose(trace[f"blocks.{i}.resid_ffn"], hidden[i + 1], atol=1e-4)
    # Hugging Face applies ln_f to the last hidden state
    np.testing.assert_allclose(trace["ln_f.output"], hidden[-1], atol=1e-4)
    for i in range(N_LAYER):
        np.testing.assert_allclose(
            trace[f"blocks.{i}.attn.weights"], out.attentions[i][0].numpy(), atol=1e-5
        )
    np.testing.assert_allclose(logits, out.logits[0].numpy(), atol=1e-4)


@pytest.mark.parametrize(
    "config",
    [{"activation_function": "gelu"}, {"tie_word_embeddings": False}],
    ids=["exact-gelu", "untied"],
)
def test_variants_match(tmp_path, config):
    hf = make_hf_model(tmp_path / "m", seed=3, **config)
    model, _ = load(tmp_path / "m")
    if "activation_function" in config:
        assert model.config.activation == "gelu"
    else:
        assert not model.config.tie_weights
    ids = random_ids((3, 40), seed=4)
    np.testing.assert_allclose(model.forward(ids), hf_logits(hf, ids), rtol=0, atol=1e-4)


def test_kv_cache_matches_full_recompute(pair):
    _, model, _ = pair
    ids = random_ids((2, 30), seed=5)
    full = model.forward(ids)
    cache = model.new_cache(batch_size=2)
    steps = [model.forward_cached(ids[:, :10], cache)]  # a prompt, then one token at a time
    for t in range(10, 30):
        steps.append(model.forward_cached(ids[:, t : t + 1], cache))
    assert cache.length == 30
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-5)


def test_tokenizer_matches_hugging_face(pair, tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers is the reference")
    _, _, tok = pair
    write_tokenizer_files(tmp_path)
    hf_tok = tokenizers.ByteLevelBPETokenizer(
        str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"), add_prefix_space=False
    )
    for text in ["hello world", "  the quick brown fox, jumps!", "naïve café 123"]:
        assert tok.encode(text) == hf_tok.encode(text).ids, text
