"""tinygpt.tokenizer.hf_json: tokenizer.json files of Llama-3, Qwen2, SmolLM2 and GPT-2 style,
built offline with the `tokenizers` library, must cut text exactly as that library does."""

from __future__ import annotations

import gzip
import json
import os
import re
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinygpt.checkpoint.safe_io import MAX_TOKENIZER_BYTES, CheckpointError
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.hf_json import (
    BosEos,
    load_folder_tokenizer,
    load_tokenizer_json,
    read_bos_eos,
)
from tinygpt.tokenizer.pipeline import KNOWN_SPLIT_PATTERNS, TextPipeline, unicode_classes
from tinygpt.tokenizer.pretokenizer import bytes_to_gpt2_string

tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers library is the reference")
Tokenizer, Regex = tokenizers.Tokenizer, tokenizers.Regex
decoders, models, normalizers = tokenizers.decoders, tokenizers.models, tokenizers.normalizers
pre_tokenizers, trainers = tokenizers.pre_tokenizers, tokenizers.trainers

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


KINDS = ["llama3", "qwen2", "smollm2", "gpt2"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[BPETokenizer, Tokenizer, Path]]:
    folder = tmp_path_factory.mktemp("hf")
    out = {}
    for kind in KINDS:
        path = build(kind, folder)
        out[kind] = (load_tokenizer_json(path), Tokenizer.from_file(str(path)), path)
    return out


def reference_ids(ref: Tokenizer, text: str) -> list[int]:
    return ref.encode(text, add_special_tokens=False).ids


def expected_text(kind: str, text: str) -> str:
    return unicodedata.normalize("NFC", text) if kind == "qwen2" else text


# --------------------------------------------------------------------------- exact ids


@pytest.mark.parametrize("kind", KINDS)
def test_ids_match_the_tokenizers_library(built, kind):
    ours, ref, _ = built[kind]
    for text in TEXTS:
        assert ours.encode(text) == reference_ids(ref, text), (kind, text)
        assert ours.decode(ours.encode(text)) == expected_text(kind, text), (kind, text)


def test_the_files_use_what_the_models_use(built):
    """The built files really exercise the features (else the parity above proves less)."""
    llama = json.loads(built["llama3"][2].read_text())
    assert llama["model"]["ignore_merges"] is True
    assert llama["pre_tokenizer"]["pretokenizers"][0]["type"] == "Split"
    assert built["qwen2"][0].pipeline.normalizer == "NFC"
    assert built["smollm2"][0].pipeline.steps == ("digit", "gpt2")
    assert built["qwen2"][0].special_tokens["<tool_call>"] == built["qwen2"][1].token_to_id(
        "<tool_call>")
    # ignore_merges changes ids somewhere: a word in the vocab that the merges do not reach
    ours, ref, _ = built["llama3"]
    whole = [c for c in ours.explain(" ".join(TEXTS)) if c.taken_whole]
    assert whole and all(len(c.final) == 1 for c in whole)


@pytest.mark.parametrize("kind", ["llama3", "qwen2"])
def test_merges_written_as_strings_load_the_same(built, kind, tmp_path):
    ours, _, path = built[kind]
    data = json.loads(path.read_text())
    data["model"]["merges"] = [" ".join(pair) for pair in data["model"]["merges"]]
    legacy = tmp_path / "tokenizer.json"
    legacy.write_text(json.dumps(data))
    theirs = Tokenizer.from_file(str(legacy))
    mine = load_tokenizer_json(legacy)
    assert mine.merges == ours.merges
    for text in TEXTS:
        assert mine.encode(text) == reference_ids(theirs, text)


ASSIGNED = st.characters(exclude_categories=("Cs", "Cn"))  # assigned in Unicode 14
MIXED = st.lists(st.one_of(ASSIGNED, st.sampled_from(list(" \n\t\r'0123456789sStT\u0301")),
                           st.sampled_from(QWEN_SPECIALS + LLAMA_SPECIALS + ["<tool_call>"])),
                 max_size=40).map("".join)


@pytest.mark.parametrize("kind", KINDS)
def test_random_text_matches_the_tokenizers_library(built, kind):
    ours, ref, _ = built[kind]

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(MIXED)
    def check(text):
        assert ours.encode(text) == reference_ids(ref, text)
        assert ours.decode(ours.encode(text)) == expected_text(kind, text)

    check()


# --------------------------------------------------------------------------- pre-tokenizers


def every_code_point() -> str:
    return "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)


def matched_by_library(pattern: str, text: str) -> set[str]:
    """The characters of `text` that the library's regex engine matches with `pattern`."""
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed")
    kept = {ch for piece, _ in split.pre_tokenize_str(text) for ch in piece}
    return set(text) - kept


@pytest.mark.parametrize("which", [0, 1, 2])
def test_letter_number_space_classes_match_the_library_on_every_code_point(which):
    text = every_code_point()
    body = unicode_classes()[which]
    ours = set(re.findall(f"[{body}]", text))
    assert ours == matched_by_library([r"\p{L}", r"\p{N}", r"\s"][which], text)


@pytest.mark.parametrize("individual", [True, False])
def test_digits_match_the_library_on_every_code_point(individual):
    text = "x".join(every_code_point())  # "x" keeps digits apart
    digits = pre_tokenizers.Digits(individual_digits=individual)
    pieces = [piece for piece, _ in digits.pre_tokenize_str(text)]
    pipeline = TextPipeline(steps=("digit" if individual else "digits",))
    assert pipeline.pretokenize(text) == pieces


@pytest.mark.parametrize("kind", KINDS)
def test_chunks_match_around_sampled_code_points(built, kind):
    """Code points (every 97th, and the first of each range the Unicode tables disagree on)
    between letters, after a space, doubled, after an apostrophe, between digits."""
    ours, ref, _ = built[kind]
    chars = every_code_point()[::97] + "\u1c89\U00031350\U00010d40\U00011de0\u0897\u017f"
    for template in ("a{}b", " {}{}1", "'{}", "1{}23 \n"):
        text = "".join(template.format(ch, ch) for ch in chars)
        if kind == "qwen2":
            text = unicodedata.normalize("NFC", text)  # pre_tokenize_str does not normalize
        pieces = [p for p, _ in ref.pre_tokenizer.pre_tokenize_str(text)]
        chunks = [c for c, _ in ours.pipeline.chunks(text, [])]
        assert [bytes_to_gpt2_string(c.encode("utf-8")) for c in chunks] == pieces, template


# --------------------------------------------------------------------------- the app's needs


def test_replay_and_chips_work(built):
    ours, _, _ = built["qwen2"]
    text = "<|im_start|>user\nCafé 2026! 日本<|im_end|>"
    chunks = ours.explain(text)
    assert [i for c in chunks for i in c.final] == ours.encode(text)
    assert chunks[0].is_special and chunks[0].text == "<|im_start|>"
    for chunk in chunks:
        if not chunk.is_special:
            assert ours.decode_bytes(chunk.initial) == chunk.text.encode("utf-8")
    assert ours.token_display(ours.encode(" a")[0]) == "·a"


def test_checkpoint_dict_round_trip_keeps_the_pipeline(built):
    ours, ref, _ = built["llama3"]
    again = BPETokenizer.from_json_dict(json.loads(json.dumps(ours.to_json_dict())))
    assert again.pipeline == ours.pipeline
    for text in TEXTS:
        assert again.encode(text) == reference_ids(ref, text)


@pytest.mark.parametrize("change", [
    {"pipeline": "NFC"}, {"pipeline": {"normalizer": "NFKC", "steps": [], "ignore_merges": False,
                                       "normalized_tokens": []}},
    {"pipeline": {"normalizer": None, "steps": ["perl"], "ignore_merges": False,
                  "normalized_tokens": []}},
    {"eos_token_id": -1}, {"bos_token_id": "0"},
])
def test_checkpoint_dict_with_a_bad_pipeline_is_a_value_error(built, change):
    d = built["qwen2"][0].to_json_dict() | change
    with pytest.raises(ValueError):
        BPETokenizer.from_json_dict(d)


def test_gpt2_dict_is_unchanged():
    tok = BPETokenizer.train("hello world " * 20, vocab_size=270)
    assert set(tok.to_json_dict()) == {"format", "version", "vocab", "merges", "special_tokens"}


# --------------------------------------------------------------------------- BOS / EOS


def test_bos_eos_from_generation_config_first(built, tmp_path):
    ours, _, path = built["llama3"]
    folder = path.parent
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>"}}))
    ids = read_bos_eos(folder, ours)
    assert ids == BosEos(ours.special_tokens["<|begin_of_text|>"],
                         (ours.special_tokens["<|end_of_text|>"],))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 0, "eos_token_id": [2, 1]}))
    assert read_bos_eos(folder, ours) == BosEos(0, (2, 1))
    tok = load_folder_tokenizer(folder)
    assert (tok.bos_token_id, tok.eos_token_id) == (0, 2)
    assert BPETokenizer.from_json_dict(tok.to_json_dict()).eos_token_id == 2
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": 10**6}))
    with pytest.raises(CheckpointError, match="generation_config.json"):
        read_bos_eos(folder, ours)
    for name in ("generation_config.json", "tokenizer_config.json"):
        os.remove(folder / name)
    assert read_bos_eos(folder, ours) == BosEos(None, ())


# --------------------------------------------------------------------------- refusals


def edited(path: Path, tmp_path: Path, change) -> Path:
    data = json.loads(path.read_text())
    change(data)
    out = tmp_path / "models" / "m" / "tokenizer.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    return out


REFUSED = {
    "Metaspace": lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁"}),
    "WordPiece": lambda d: d["model"].update(type="WordPiece"),
    "Unigram": lambda d: d.update(model={"type": "Unigram", "vocab": []}),
    "byte_fallback": lambda d: d["model"].update(byte_fallback=True),
    "NFKC": lambda d: d.update(normalizer={"type": "NFKC"}),
    "not one of the known": lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(
        pattern={"Regex": r"\p{L}+|\s+"}),
    "Whitespace": lambda d: d.update(pre_tokenizer={"type": "Whitespace"}),
    "decoder": lambda d: d.update(decoder={"type": "Metaspace"}),
    "lstrip": lambda d: d["added_tokens"][0].update(lstrip=True),
    "dropout": lambda d: d["model"].update(dropout=0.1),
    "not byte-level": lambda d: d["model"]["vocab"].update({"\u2581x": 700}),
    "truncation": lambda d: d.update(truncation={"max_length": 5}),
    "is not two tokens": lambda d: d["model"]["merges"].append(["a", "b", "c"]),
    "ids must be exactly": lambda d: d["added_tokens"][0].update(id=10**6),
    "256 bytes": lambda d: d["model"]["vocab"].update(ÿÿÿ=d["model"]["vocab"].pop("ÿ")),
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_unsupported_features_are_refused_by_name(built, tmp_path, what):
    path = edited(built["qwen2"][2], tmp_path, REFUSED[what])
    with pytest.raises(CheckpointError, match=what) as err:
        load_tokenizer_json(path, root=tmp_path / "models")
    assert "m/tokenizer.json" in str(err.value) and str(tmp_path) not in str(err.value)


def test_a_huge_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "tokenizer.json"
    with open(path, "wb") as f:
        f.truncate(MAX_TOKENIZER_BYTES + 1)
    with pytest.raises(CheckpointError, match="limit"):
        load_tokenizer_json(path)


def test_a_link_out_of_the_models_folder_is_refused(built, tmp_path):
    inside = tmp_path / "models" / "m"
    inside.mkdir(parents=True)
    (inside / "tokenizer.json").symlink_to(built["gpt2"][2])
    with pytest.raises(CheckpointError, match="outside the models folder"):
        load_tokenizer_json(inside / "tokenizer.json", root=tmp_path / "models")


def test_bad_json_names_the_file(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("{not json")
    with pytest.raises(CheckpointError, match="tokenizer.json: not valid JSON"):
        load_tokenizer_json(path)


# --------------------------------------------------------------------------- speed


def test_encoding_speed_is_reported(built, capsys):
    """Not a benchmark: one timing of ~100 KB, printed for the record (-s shows it)."""
    text = gzip.open(ROOT / "data" / "shakespeare_val.txt.gz", "rt", encoding="utf-8").read()
    text = text[:100_000]
    for kind in KINDS:
        ours, ref, _ = built[kind]
        fresh = BPETokenizer.from_json_dict(ours.to_json_dict())  # an empty chunk cache
        start = time.perf_counter()
        ids = fresh.encode(text)
        seconds = time.perf_counter() - start
        assert ids == reference_ids(ref, text)
        print(f"{kind}: {len(text):,} chars -> {len(ids):,} tokens in {seconds:.3f} s")
    ours = built["gpt2"][0]
    plain = BPETokenizer(ours.vocab, ours.merges, ours.special_tokens)  # today's GPT-2 path
    start = time.perf_counter()
    assert plain.encode(text) == ours.encode(text)
    print(f"the same vocab without a pipeline: {time.perf_counter() - start:.3f} s")
