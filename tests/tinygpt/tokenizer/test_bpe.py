"""Tests for tinygpt.tokenizer.bpe.BPETokenizer.

References: the `regex` module and Hugging Face `tokenizers` (GPT-2 pre-tokenizer),
Hugging Face `transformers.GPT2Tokenizer` (encoding), a naive BPE trainer (training),
and hand-built vocabularies whose answers are worked out by hand.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
import re
import tracemalloc
import unicodedata
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinygpt.caps import MAX_TOKENIZER_BYTES
from tinygpt.tokenizer.bpe import (
    MAX_REPLAY_CHUNKS,
    MAX_REPLAY_IDS,
    MAX_REPLAY_STEPS,
    BPETokenizer,
    bytes_to_gpt2_string,
    bytes_to_unicode,
    merge_pair,
    pretokenize,
)

EOT = "<|endoftext|>"

VARIED_TEXTS = [
    "",
    "Hello world",
    " Hello world",
    "I'm sure they've gone; we'll see what's done, you'd agree. I'D SHOUT 'TIS",
    "Numbers 1234567890, 3.14159, ²³ ½ Ⅻ ١٢٣ and x2y3",
    "Whitespace:   three  two\ttab\t\ttabs\n\nnewlines\r\nCRLF\r \u00a0nbsp\u3000ideo  ",
    "Emoji 👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 😀😀",
    "CJK 日本語のテキスト 中文字符 한국어",
    "Combining e\u0301 a\u0308 n\u0303 \u0915\u093f Zalgo z\u0336\u0353a\u0335",
    "Control \x00\x01\x07\x1b[0m\x1c\x1d\x7f\x85 end",
    "Mixed: naïve café résumé — “quotes” «guillemets» ½ ∑ ∫ →",
    "trailing spaces   ",
    "   leading spaces",
    "\n",
    f"doc one{EOT}doc two {EOT}\n",
]


def corpus_text() -> str:
    """A small varied corpus: this test file and the tokenizer source, plus the texts."""
    here = Path(__file__).read_text(encoding="utf-8")
    bpe = Path(__file__).resolve().parents[3] / "tinygpt" / "tokenizer" / "bpe.py"
    src = bpe.read_text("utf-8")
    return here + src + "\n".join(VARIED_TEXTS) * 5


@pytest.fixture(scope="module")
def tok() -> BPETokenizer:
    return BPETokenizer.train(corpus_text(), vocab_size=600)


# --------------------------------------------------------------------------- byte alphabet


def test_bytes_to_unicode_is_gpt2_alphabet():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers not installed")
    assert set(table.values()) == set(tokenizers.pre_tokenizers.ByteLevel.alphabet())


# --------------------------------------------------------------------------- pre-tokenizer


def sample_characters() -> list[str]:
    """Every assigned character below U+3100 plus every 37th code point above."""
    cps = list(range(0x3100)) + list(range(0x3100, 0x110000, 37))
    return [chr(cp) for cp in cps
            if not 0xD800 <= cp < 0xE000 and unicodedata.category(chr(cp)) != "Cn"]


def test_pretokenize_matches_regex_module():
    regex = pytest.importorskip("regex", reason="the `regex` module is the reference here")
    gpt2 = regex.compile(
        r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    )
    for text in VARIED_TEXTS:
        assert pretokenize(text) == gpt2.findall(text), text
    for ch in sample_characters():
        for text in (ch, f" {ch}{ch}x", f"  {ch}", f"a{ch}1 "):
            assert pretokenize(text) == gpt2.findall(text), hex(ord(ch))


def test_pretokenize_matches_hf_bytelevel():
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers not installed")
    byte_level = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    for text in VARIED_TEXTS + ["".join(sample_characters()[::50])]:
        expected = [piece for piece, _ in byte_level.pre_tokenize_str(text)]
        ours = [bytes_to_gpt2_string(chunk.encode("utf-8")) for chunk in pretokenize(text)]
        assert ours == expected, text


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("text", VARIED_TEXTS)
def test_round_trip(tok, text):
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode_bytes(ids) == text.encode("utf-8")


def test_round_trip_with_specials_disabled(tok):
    text = f"a{EOT}b"
    ids = tok.encode(text, allowed_special=False)
    assert tok.eos_token_id not in ids
    assert tok.decode(ids) == text


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_round_trip_any_text(text):
    tok = _hypothesis_tok()
    assert tok.decode(tok.encode(text)) == text


_HYP_TOK: list[BPETokenizer] = []


def _hypothesis_tok() -> BPETokenizer:
    # hypothesis does not mix well with function-scoped fixtures: build once, by hand
    if not _HYP_TOK:
        _HYP_TOK.append(BPETokenizer.train(corpus_text(), vocab_size=400))
    return _HYP_TOK[0]


def test_lone_surrogate_is_rejected(tok):
    with pytest.raises(ValueError, match="surrogate"):
        tok.encode("ok \ud800 no")
    with pytest.raises(ValueError, match="surrogate"):
        BPETokenizer.train("ab \udfff", vocab_size=300)


def test_decode_of_a_split_character_uses_replacement(tok):
    ids = tok.encode("日")  # 3 UTF-8 bytes
    first_byte_only = tok.decode_bytes(ids)[:1]
    byte_token = [i for i in range(tok.vocab_size) if tok.token_bytes(i) == first_byte_only]
    assert tok.decode(byte_token) == "\ufffd"
    assert tok.decode_bytes(byte_token) == b"\xe6"


# --------------------------------------------------------------------------- training


def naive_train(text: str, n_merges: int) -> list[tuple[int, int, int]]:
    """Textbook BPE: recount every pair after every merge; ties -> smallest pair."""
    words = [list(chunk.encode("utf-8")) for chunk in pretokenize(text)]
    merges = []
    for new_id in range(256, 256 + n_merges):
        counts = Counter(p for w in words for p in pairwise(w))
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        words = [merge_pair(w, best, new_id) for w in words]
        merges.append((best[0], best[1], new_id))
    return merges


def test_training_matches_naive_trainer():
    text = "\n".join(VARIED_TEXTS[:-1]) * 3 + Path(__file__).read_text("utf-8")[:6000]
    tok = BPETokenizer.train(text, vocab_size=256 + 120, special_tokens=())
    assert tok.merges == naive_train(text, 120)
    assert tok.vocab_size == 376


def test_training_is_deterministic_and_order_free():
    docs = corpus_text().split("\n\n")
    a = BPETokenizer.train(EOT.join(docs), vocab_size=500)
    b = BPETokenizer.train(EOT.join(docs), vocab_size=500)
    c = BPETokenizer.train(EOT.join(reversed(docs)), vocab_size=500)
    assert a.merges == b.merges == c.merges
    assert a.vocab == c.vocab and a.special_tokens == c.special_tokens


def test_training_vocab_layout():
    tok = BPETokenizer.train("aaab aab ab" * 3, vocab_size=300, special_tokens=(EOT, "<|pad|>"))
    assert tok.vocab[:256] == [bytes([b]) for b in range(256)]
    assert tok.eos_token_id == tok.vocab_size - 2
    assert tok.special_tokens["<|pad|>"] == tok.vocab_size - 1
    # few distinct pairs: training stops early instead of inventing merges
    assert tok.vocab_size < 300
    assert BPETokenizer.train("abc", 256, special_tokens=()).eos_token_id is None
    with pytest.raises(ValueError):
        BPETokenizer.train("abc", vocab_size=256)  # no room for <|endoftext|>


def test_special_markers_are_not_learned_from():
    tok = BPETokenizer.train((f"hello there{EOT}" * 50), vocab_size=400)
    learned = tok.vocab[256:tok.eos_token_id]
    assert not any(b"<|" in t or b"|>" in t for t in learned)


# --------------------------------------------------------------------------- special tokens


def test_special_tokens_exact_marker_only(tok):
    eos = tok.eos_token_id
    assert tok.encode(EOT) == [eos]
    ids = tok.encode(f"one{EOT}two")
    assert ids.count(eos) == 1 and tok.decode(ids) == f"one{EOT}two"
    for near_miss in ("<|endoftext|", "<|EndOfText|>", "< |endoftext|>", "<|endoftext |>"):
        assert eos not in tok.encode(near_miss)
    assert eos not in tok.encode(EOT, allowed_special=False)
    assert tok.encode(EOT, allowed_special={EOT}) == [eos]
    with pytest.raises(ValueError):
        tok.encode("x", allowed_special={"<|nope|>"})


# --------------------------------------------------------------------------- tokens page


def test_explain_replays_the_merges(tok):
    text = f"Hello, tokenizer world! 日本 {EOT} I'm   done\n"
    chunks = tok.explain(text)
    assert [i for c in chunks for i in c.final] == tok.encode(text)
    assert "".join(c.text for c in chunks) == text
    for c in chunks:
        if c.is_special:
            assert c.initial == [tok.eos_token_id] and c.steps == []
            continue
        assert tok.decode_bytes(c.initial) == c.text.encode("utf-8")
        assert all(len(tok.token_bytes(i)) == 1 for i in c.initial)
        tokens = c.initial
        for step in c.steps:
            tokens = merge_pair(tokens, step.pair, step.new_id)
            assert step.tokens == tokens
            assert tok.token_bytes(step.new_id) == b"".join(map(tok.token_bytes, step.pair))
    assert any(c.steps for c in chunks)
    json.dumps([dataclasses.asdict(c) for c in chunks])  # plain data


def test_token_display(tok):
    def one(text):
        ids = tok.encode(text, allowed_special=False)
        return "".join(tok.token_display(i) for i in ids)

    assert one(" the") == "·the"
    assert one("a\n\tb\r") == "a\\n\\tb\\r"
    assert one("\x01\x7f") == "\\x01\\x7f"
    assert one("日") in ("日", "\\xe6\\x97\\xa5")  # one token, or three byte tokens
    assert tok.token_display(tok.encode("日")[0])[:2] in ("日", "\\x")
    byte_e6 = [i for i in range(tok.vocab_size) if tok.token_bytes(i) == b"\xe6"][0]
    assert tok.token_display(byte_e6) == "\\xe6"
    assert tok.token_string(tok.encode(" ")[0]) == "Ġ"


# --------------------------------------------------------------------------- save / load


def test_save_load_round_trip(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(path)
    again = BPETokenizer.load(path)
    assert again.vocab == tok.vocab and again.merges == tok.merges
    assert again.special_tokens == tok.special_tokens and again.vocab_size == tok.vocab_size
    from_str = BPETokenizer.from_json_dict(json.loads(json.dumps(tok.to_json_dict())))
    text = VARIED_TEXTS[4] + VARIED_TEXTS[6]
    assert from_str.encode(text) == tok.encode(text)


def test_from_json_dict_rejects_bad_input(tok):
    with pytest.raises(ValueError):
        BPETokenizer.from_json_dict({"format": "something else"})
    d = tok.to_json_dict()
    d["merges"][0] = [d["merges"][0][0], d["merges"][0][1], 5]  # bytes do not concatenate
    with pytest.raises(ValueError):
        BPETokenizer.from_json_dict(d)


# --------------------------------------------------------------------------- GPT-2 files


def write_gpt2_files(tmp_path: Path, tokens: list[str], merges: list[str]) -> tuple[Path, Path]:
    """vocab.json with GPT-2's 256 byte tokens first, then `tokens`; merges.txt."""
    encoder = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    for t in tokens:
        encoder[t] = len(encoder)
    vocab, merges_file = tmp_path / "vocab.json", tmp_path / "merges.txt"
    vocab.write_text(json.dumps(encoder), encoding="utf-8")
    merges_file.write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
    return vocab, merges_file


def test_from_gpt2_hand_built_vocab(tmp_path):
    # ids 0..255 are GPT-2's byte tokens; new tokens are numbered from 256 in this order
    new = ["He", "ll", "Hell", "Hello", "Ġw", "or", "Ġwor", "Ġworl", "Ġworld", "el",
           EOT]
    merges = ["H e", "l l", "He ll", "Hell o", "o r", "Ġ w", "Ġw or", "Ġwor l", "Ġworl d",
              "e l"]  # "e l" is learned last, so "Hello" never goes through "el"
    tok = BPETokenizer.from_gpt2(*write_gpt2_files(tmp_path, new, merges))
    ids = {t: 256 + k for k, t in enumerate(new)}
    space = list(bytes_to_unicode().values()).index("Ġ")
    assert tok.vocab_size == 256 + len(new)
    assert tok.encode("Hello world") == [ids["Hello"], ids["Ġworld"]]
    assert tok.encode(" Hello world") == [space, ids["Hello"], ids["Ġworld"]]
    assert tok.encode("Hel") == [ids["He"], ord("l") - ord("!")]  # 'l' is byte token 75
    assert tok.encode(f"Hello{EOT}") == [ids["Hello"], ids[EOT]]
    assert tok.eos_token_id == ids[EOT]
    steps = tok.explain("Hello")[0].steps
    assert [s.new_id for s in steps] == [ids["He"], ids["ll"], ids["Hell"], ids["Hello"]]


def hf_trained_files(tmp_path: Path, vocab_size: int = 700) -> tuple[Path, Path]:
    tokenizers = pytest.importorskip("tokenizers", reason="HF tokenizers not installed")
    hf = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
    hf.train_from_iterator([corpus_text()], vocab_size=vocab_size, min_frequency=2,
                           special_tokens=[EOT], show_progress=False)
    hf.save_model(str(tmp_path))
    return tmp_path / "vocab.json", tmp_path / "merges.txt"


def test_matches_hf_gpt2_tokenizer_on_hf_trained_vocab(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    vocab, merges = hf_trained_files(tmp_path)
    ref = transformers.GPT2Tokenizer(str(vocab), str(merges))
    ours = BPETokenizer.from_gpt2(vocab, merges)
    assert ours.vocab_size == len(ref)
    for text in VARIED_TEXTS + [" ".join(VARIED_TEXTS), corpus_text()[:3000]]:
        assert ours.encode(text) == ref.encode(text), text
    assert ours.eos_token_id == ref.convert_tokens_to_ids(EOT)


def test_hf_reads_our_trained_vocab(tok, tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    vocab, merges = tmp_path / "vocab.json", tmp_path / "merges.txt"
    tok.save_gpt2(vocab, merges)
    ref = transformers.GPT2Tokenizer(str(vocab), str(merges))
    again = BPETokenizer.from_gpt2(vocab, merges)
    assert again.vocab == tok.vocab and again.merges == tok.merges
    for text in VARIED_TEXTS + [corpus_text()[:3000]]:
        assert tok.encode(text) == ref.encode(text), text


def find_offline_gpt2() -> tuple[Path, Path] | None:
    """GPT-2's real vocab if it is already on this machine (never downloaded)."""
    roots = [os.environ.get("TINYGPT_GPT2_DIR", "")]
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    for repo in ("models--gpt2", "models--openai-community--gpt2"):
        roots += [str(p) for p in (hub / repo / "snapshots").glob("*")]
    roots.append(str(Path(__file__).resolve().parents[3] / "models" / "gpt2"))
    for root in filter(None, roots):
        for names in (("vocab.json", "merges.txt"), ("encoder.json", "vocab.bpe")):
            files = [Path(root) / n for n in names]
            if all(f.is_file() for f in files):
                return files[0], files[1]
    return None


def test_real_gpt2_known_vectors():
    files = find_offline_gpt2()
    if files is None:
        pytest.skip("GPT-2 vocab.json/merges.txt not available offline (set TINYGPT_GPT2_DIR)")
    tok = BPETokenizer.from_gpt2(*files)
    assert tok.vocab_size == 50257 and tok.eos_token_id == 50256
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode(" Hello world") == [18435, 995]


def test_random_texts_match_hf(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    vocab, merges = hf_trained_files(tmp_path, vocab_size=500)
    ref = transformers.GPT2Tokenizer(str(vocab), str(merges))
    ours = BPETokenizer.from_gpt2(vocab, merges)
    rng = random.Random(0)
    alphabet = "aeiou tnsrl'\n\t  0123.,!?日é👍\u0301-" + "ABC"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert ours.encode(text) == ref.encode(text), repr(text)


# --------------------------------------------------------------------------- bounded costs
# A student can paste 20,000 letters with no space (one chunk) or thousands of short words:
# the replay, the merges and the chunk cache must stay within caps whatever the text.

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def app_tok() -> BPETokenizer:
    """The tokenizer of the app's test model (tests/fixtures/tiny.npz)."""
    from tinygpt.checkpoint.files import load

    return load(ROOT / "tests" / "fixtures" / "tiny.npz")[1]


def shakespeare_letters(n: int) -> str:
    """Real text with every non-letter removed: one chunk of n letters."""
    text = gzip.open(ROOT / "data" / "shakespeare_val.txt.gz", "rt", encoding="utf-8").read()
    return re.sub(r"[^A-Za-z]", "", text)[:n]


def reference_steps(tok: BPETokenizer, ids: list[int]) -> list[tuple[tuple, int, list[int]]]:
    """The textbook loop: merge the learned pair of lowest rank everywhere; repeat."""
    rank = {(a, b): r for r, (a, b, _) in enumerate(tok.merges)}
    merged = {(a, b): n for a, b, n in tok.merges}
    steps = []
    while (pairs := [p for p in pairwise(ids) if p in rank]):
        pair = min(pairs, key=rank.__getitem__)
        ids = merge_pair(ids, pair, merged[pair])
        steps.append((pair, merged[pair], ids))
    return steps


def test_explain_keeps_the_first_steps_and_counts_them_all(app_tok):
    text = shakespeare_letters(3000)
    (chunk,) = app_tok.explain(text, max_ids=10**9)
    expected = reference_steps(app_tok, chunk.initial)
    assert len(expected) > MAX_REPLAY_STEPS  # the cut is exercised
    assert chunk.steps_total == len(expected)
    assert len(chunk.steps) == MAX_REPLAY_STEPS
    assert [(s.pair, s.new_id, s.tokens) for s in chunk.steps] == expected[:MAX_REPLAY_STEPS]
    assert chunk.final == expected[-1][2] == app_tok.encode(text)


def test_explain_of_20k_letters_stays_small(app_tok):
    """Issue 12, finding 1: every intermediate token list was kept (and drawn)."""
    text = shakespeare_letters(20_000)
    app_tok.explain("warm up")
    tracemalloc.start()
    try:
        (chunk,) = app_tok.explain(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    kept_ids = sum(len(s.tokens) for s in chunk.steps)
    assert kept_ids <= MAX_REPLAY_IDS + len(chunk.initial)
    assert chunk.steps_total > len(chunk.steps) > 0
    assert chunk.final == app_tok.encode(text)
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MB"  # 18.6 MB before, growing with steps


def test_explain_keeps_the_last_chunks(app_tok):
    text = "To be or not " * 500 + EOT + " the end"
    chunks = app_tok.explain(text)
    everything = app_tok.explain(text, max_chunks=10**6)
    assert len(everything) == everything.chunks_total == chunks.chunks_total > MAX_REPLAY_CHUNKS
    assert len(chunks) == MAX_REPLAY_CHUNKS
    assert chunks.first_chunk == chunks.chunks_total - MAX_REPLAY_CHUNKS
    assert chunks == everything[chunks.first_chunk:]
    ids = app_tok.encode(text)
    kept = [i for c in chunks for i in c.final]
    assert kept == ids[len(ids) - len(kept):]
    assert [c.text for c in chunks][-3:] == [EOT, " the", " end"]


def test_explain_shares_one_budget_of_recorded_ids(app_tok):
    words = shakespeare_letters(40_000)
    text = " ".join(words[i:i + 400] for i in range(0, len(words), 400))  # 100 long chunks
    chunks = app_tok.explain(text)
    kept = sum(len(s.tokens) for c in chunks for s in c.steps)
    assert kept <= MAX_REPLAY_IDS + sum(len(c.initial) for c in chunks)
    assert all(1 <= len(c.steps) <= c.steps_total for c in chunks)
    assert [i for c in chunks for i in c.final] == app_tok.encode(text)


def random_merges_tokenizer(seed: int, n_merges: int) -> BPETokenizer:
    """Merges of random pairs over 'abc', listed in a shuffled order (ranks in any order)."""
    rng = random.Random(seed)
    vocab = [bytes([b]) for b in range(256)]
    merges = []
    pool = [ord("a"), ord("b"), ord("c")]
    for _ in range(n_merges):
        a, b = rng.choice(pool), rng.choice(pool)
        merges.append((a, b, len(vocab)))
        pool.append(len(vocab))
        vocab.append(vocab[a] + vocab[b])
    rng.shuffle(merges)
    return BPETokenizer(vocab, merges)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), n_merges=st.integers(1, 40),
       text=st.text(alphabet="abc", min_size=0, max_size=300))
def test_fast_merges_take_the_textbook_steps(seed, n_merges, text):
    """The O(n log n) merges (long chunks, explain) against the plain loop."""
    tok = random_merges_tokenizer(seed, n_merges)
    (chunk,) = tok.explain(text, max_ids=10**9, max_steps=10**9) if text else [None]
    if chunk is None:
        return
    expected = reference_steps(tok, chunk.initial)
    assert [(s.pair, s.new_id, s.tokens) for s in chunk.steps] == expected
    assert chunk.final == (expected[-1][2] if expected else chunk.initial)
    assert tok.encode(text) == chunk.final


# --------------------------------------------------------------------------- wrong files


@pytest.mark.parametrize("change", [
    {"special_tokens": ["<|endoftext|>"]},
    {"special_tokens": {"<|endoftext|>": "257"}},
    {"vocab": {"a": 1}},
    {"vocab": [1, 2]},
    {"merges": [[1, 2]]},
    {"merges": [[True, 2, 3]]},
    {"merges": 7},
])
def test_from_json_dict_wrong_types_are_value_errors(tok, change):
    """Issue 12, finding 6: a list where a dict belongs raised AttributeError."""
    with pytest.raises(ValueError):
        BPETokenizer.from_json_dict({**tok.to_json_dict(), **change})


@pytest.mark.parametrize("vocab_text, merges_text", [
    ('["a", "b"]', ""),  # a list, not an object
    ('{"a": "0"}', ""),
    ('{"a": true}', ""),
    pytest.param("[" * 100_000 + "]" * 100_000, "", id="deep"),  # RecursionError before
    ("{}", "a b c\n"),
    pytest.param("{}", "\xff\xfe", id="not-utf8"),
])
def test_from_gpt2_wrong_content_is_a_value_error(tmp_path, vocab_text, merges_text):
    vocab, merges = write_gpt2_files(tmp_path, [], [])
    if vocab_text != "{}":
        vocab.write_text(vocab_text, encoding="utf-8")
    if merges_text:
        merges.write_text(merges_text, encoding="latin-1")
    with pytest.raises(ValueError):
        BPETokenizer.from_gpt2(vocab, merges)


def test_huge_tokenizer_files_are_refused_before_reading(tmp_path):
    """Issue 12, finding 5: a 1 GB merges.txt was read whole (MemoryError)."""
    vocab, merges = write_gpt2_files(tmp_path, [], [])
    for big in (merges, vocab):
        saved = big.read_bytes()
        with open(big, "r+b") as f:
            f.truncate(MAX_TOKENIZER_BYTES * 4)  # sparse: no disk used
        tracemalloc.start()
        try:
            with pytest.raises(ValueError, match="limit"):
                BPETokenizer.from_gpt2(vocab, merges)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2**20
        big.write_bytes(saved)


def test_explanation_finds_the_chunk_of_a_token():
    from tinygpt.tokenizer.explanation import ChunkExplanation, Explanation

    chunks = Explanation([ChunkExplanation("a", False, [1, 2]),
                          ChunkExplanation("b", False, [3]),
                          ChunkExplanation("c", False, [4, 5, 6])], chunks_total=5)
    assert chunks.n_tokens == 6
    assert chunks.steps_total == 0  # no merges replayed
    merged = Explanation([ChunkExplanation("a", False, [1], steps_total=3),
                          ChunkExplanation("b", False, [2], steps_total=4)], chunks_total=9)
    assert merged.steps_total == 7  # every chunk's merges, cut or not
    assert [chunks.chunk_of_token(i) for i in range(6)] == [0, 0, 1, 2, 2, 2]
    assert chunks.chunk_of_token(-1) == 2 and chunks.chunk_of_token(-4) == 1
    for bad in (6, -7):
        with pytest.raises(IndexError):
            chunks.chunk_of_token(bad)


# --------------------------------------------------------------------------- padding rows


def test_padding_ids_decode_to_nothing_and_show_a_placeholder(tok):
    """ids vocab_size .. padded_size-1 (a model's padding rows) name no token: they decode to
    nothing, as the tokenizers library decodes an unknown id, and display visibly."""
    padded = BPETokenizer(tok.vocab, tok.merges, tok.special_tokens, padded_size=640)
    ids = tok.encode("hello world")
    assert padded.decode([*ids[:1], 600, 639, *ids[1:]]) == "hello world"
    assert padded.is_unused(600) and padded.is_unused(639) and not padded.is_unused(599)
    assert padded.token_display(639) == padded.token_string(639) == "⟨unused id 639⟩"
    assert padded.token_bytes(639) == b""
    for outside in (640, -1):
        with pytest.raises(IndexError):
            padded.token_bytes(outside)
    assert tok.padded_size == tok.vocab_size and "padded_size" not in tok.to_json_dict()
    assert BPETokenizer.from_json_dict(padded.to_json_dict()).padded_size == 640


def test_padded_size_below_the_vocab_is_refused(tok):
    with pytest.raises(ValueError, match="padded_size"):
        BPETokenizer(tok.vocab, tok.merges, tok.special_tokens, padded_size=tok.vocab_size - 1)
