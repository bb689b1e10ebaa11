"""tinygpt.tokenizer.hf_json: tokenizer.json files of Llama-3, Qwen2, SmolLM2 and GPT-2 style,
built offline with the `tokenizers` library, must cut text exactly as that library does."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tinygpt.tokenizer.hf_files import (
    KINDS,
    LLAMA_SPECIALS,
    QWEN_SPECIALS,
    ROOT,
    TEXTS,
    build_all,
    expected_text,
    reference_ids,
    tokenizers,
)
from tinygpt.caps import MAX_TOKENIZER_BYTES
from tinygpt.safe_io import CheckpointError
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.hf_json import (
    BosEos,
    load_folder_tokenizer,
    load_tokenizer_json,
    read_bos_eos,
)
from tinygpt.tokenizer.pretokenizer import bytes_to_gpt2_string

Tokenizer = tokenizers.Tokenizer


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_all(tmp_path_factory.mktemp("hf"))


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
    for empty in ({"bos_token_id": []}, {"eos_token_id": []}):  # was an IndexError
        (folder / "generation_config.json").write_text(json.dumps(empty))
        with pytest.raises(CheckpointError, match="generation_config.json.*empty list"):
            load_folder_tokenizer(folder)
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
}


def without_byte(data: dict, char: str) -> None:
    """tokenizer.json without the token of one byte (and its merges), renumbered 0 .. n-1."""
    vocab = data["model"]["vocab"]
    gone = vocab.pop(char)
    data["model"]["vocab"] = {t: i - (i > gone) for t, i in vocab.items()}
    for added in data["added_tokens"]:
        added["id"] -= added["id"] > gone
    data["model"]["merges"] = [m for m in data["model"]["merges"]
                               if char not in (m.split(" ") if isinstance(m, str) else m)]


def test_a_byte_without_a_token_is_dropped_as_tokenizers_drops_it(built, tmp_path):
    """SmolLM2's vocabulary has no token for 21 bytes (0x04, 0xF5, ...): their bytes vanish
    from the ids, as in the tokenizers library (no unknown token) and llama.cpp."""
    path = edited(built["smollm2"][2], tmp_path, lambda d: without_byte(d, "\u0104"))
    ours, ref = load_tokenizer_json(path), Tokenizer.from_file(str(path))
    for text in ["a\x04b", "x\x04\x04 the \x04", "\x04", "plain text"]:
        assert ours.encode(text) == reference_ids(ref, text)


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


@pytest.mark.parametrize("ignore_merges", [True, False])
def test_ignore_merges_takes_a_vocabulary_word_whole(tmp_path, ignore_merges):
    """"abc" is in the vocab but the merges only reach "a" + "bc": Llama-3's ignore_merges
    gives the one token, plain BPE the two."""
    alphabet = [bytes_to_gpt2_string(bytes([b])) for b in range(256)]
    vocab = {tok: i for i, tok in enumerate(alphabet + ["bc", "abc"])}
    data = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None, "post_processor": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": True, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore_merges, "vocab": vocab, "merges": [["b", "c"]]}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    ours, ref = load_tokenizer_json(path), Tokenizer.from_file(str(path))
    expected = [vocab["abc"]] if ignore_merges else [vocab["a"], vocab["bc"]]
    assert reference_ids(ref, "abc") == ours.encode("abc") == expected
    (chunk,) = ours.explain("abc")
    assert chunk.taken_whole is ignore_merges and chunk.final == expected
