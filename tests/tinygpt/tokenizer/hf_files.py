"""Offline tokenizer.json files in the styles of Llama-3, Qwen2, SmolLM2 and GPT-2, trained
with the `tokenizers` library (the reference the tests compare against)."""

from __future__ import annotations

import gzip
import unicodedata
from pathlib import Path

import pytest

from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.hf_json import load_tokenizer_json
from tinygpt.tokenizer.pipeline import KNOWN_SPLIT_PATTERNS

tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers library is the reference")
Tokenizer, Regex = tokenizers.Tokenizer, tokenizers.Regex
decoders, models, normalizers = tokenizers.decoders, tokenizers.models, tokenizers.normalizers
pre_tokenizers, trainers = tokenizers.pre_tokenizers, tokenizers.trainers

KINDS = ["llama3", "qwen2", "smollm2", "gpt2"]
ROOT = Path(__file__).resolve().parents[3]
PATTERN = {name: text for text, name in KNOWN_SPLIT_PATTERNS.items()}
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]

TEXTS = [
    "", "Hello, world! It's a test.", "I'M HERE, you'LL see, she'S 'ſ done'd",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n\tpass\r\n",
    "12345678901234567890 3.14159 1,000,000 0x1F 2026-11-25", "   leading and trailing   ",
    "a\n\n\n b \n\t\n  c\r\n\r\nd", "\u3000\u00a0\u2009 mixed\u2028spaces\x1c\x1f",
    "日本語のテキストです。中文文本，还有标点。한국어 텍스트", "emoji 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ✨✨",
    "العربية نص من اليمين إلى اليسار עברית", "café naïve façade Ångström résumé",
    "cafe\u0301 nai\u0308ve A\u030angstro\u0308m \u1100\u1161\u11a8", "٣٤٥ ⅠⅡⅢ ½ ²³ ߁߂",
    "<|endoftext|>x<|im_start|>user\nhi<|im_end|><|im_end|", "<|begin_of_text|>Hi<|eot_id|>",
    "<tool_call>{\"a\": 1}</tool_call>", "cafe\u0301! café! e\u0301",
    "new letters \u1c89\u1c8a \U00031350 \U00010d40\U00010d41",
    "x" * 300 + " " + "ab" * 200, "''''' ... !!! ??? --- ___ ***", "\x00\x01\x7f\x80",
]


def corpus() -> list[str]:
    text = gzip.open(ROOT / "data" / "shakespeare_val.txt.gz", "rt", encoding="utf-8").read()
    return [text[:60_000]] + TEXTS * 3


def build(kind: str, folder: Path) -> Path:
    """Train a small byte-level BPE in the style of `kind`; its tokenizer.json."""
    specials = LLAMA_SPECIALS if kind == "llama3" else QWEN_SPECIALS
    tok = Tokenizer(models.BPE(ignore_merges=kind == "llama3"))
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=kind == "gpt2")
    if kind in ("llama3", "qwen2"):
        split = pre_tokenizers.Split(Regex(PATTERN[kind]), behavior="isolated", invert=False)
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    elif kind == "smollm2":
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        tok.pre_tokenizer = byte_level
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    if kind == "qwen2":
        tok.add_tokens([tokenizers.AddedToken("<tool_call>", normalized=False, special=False),
                        tokenizers.AddedToken("</tool_call>", normalized=False, special=False),
                        tokenizers.AddedToken("é!", normalized=True, special=False)])
    path = folder / kind / "tokenizer.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path




def build_all(folder: Path) -> dict[str, tuple[BPETokenizer, Tokenizer, Path]]:
    out = {}
    for kind in KINDS:
        path = build(kind, folder)
        out[kind] = (load_tokenizer_json(path), Tokenizer.from_file(str(path)), path)
    return out


def reference_ids(ref: Tokenizer, text: str) -> list[int]:
    return ref.encode(text, add_special_tokens=False).ids


def expected_text(kind: str, text: str) -> str:
    return unicodedata.normalize("NFC", text) if kind == "qwen2" else text
