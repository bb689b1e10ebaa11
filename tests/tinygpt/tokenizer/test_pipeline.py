"""tinygpt.tokenizer.pipeline: the character classes, Digits and the split patterns cut text as
the `tokenizers` library does (on every code point), and the pipeline's own rules."""

from __future__ import annotations

import re
import unicodedata

import pytest

from tests.tinygpt.tokenizer.hf_files import KINDS, build_all, tokenizers
from tinygpt.tokenizer.pipeline import TextPipeline, isolate, split_regex, unicode_classes
from tinygpt.tokenizer.pretokenizer import bytes_to_gpt2_string

pre_tokenizers, Regex = tokenizers.pre_tokenizers, tokenizers.Regex


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_all(tmp_path_factory.mktemp("hf"))


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
        chunks = [c for c, _ in ours.pipeline.chunks(text, ours.pipeline.matchers([]))]
        assert [bytes_to_gpt2_string(c.encode("utf-8")) for c in chunks] == pieces, template


# --------------------------------------------------------------------------- the pipeline's rules


def test_isolate_keeps_the_stretches_between_matches():
    assert isolate(re.compile("a+"), "xaaxx a") == ["x", "aa", "xx ", "a"]
    assert isolate(re.compile("z"), "abc") == ["abc"]


def test_normalized_added_tokens_are_found_after_nfc_the_others_before():
    text = "cafe\u0301!"
    late = TextPipeline(normalizer="NFC", steps=(), normalized_tokens=("é!",))
    assert late.chunks(text, late.matchers(["é!"])) == [("caf", False), ("é!", True)]
    early = TextPipeline(normalizer="NFC", steps=())
    # the raw text has no "é!"
    assert early.chunks(text, early.matchers(["é!"])) == [("café!", False)]


def test_steps_run_on_every_piece_of_the_step_before():
    pipeline = TextPipeline(steps=("digit", "gpt2"))
    assert pipeline.pretokenize("ab 123 cd") == ["ab", " ", "1", "2", "3", " cd"]
    assert split_regex("llama3").findall("12345 x") == ["123", "45", " x"]
    assert split_regex("qwen2").findall("123") == ["1", "2", "3"]


def test_to_dict_round_trip_and_refusals():
    pipeline = TextPipeline("NFC", ("qwen2",), True, ("<x>",))
    assert TextPipeline.from_dict(pipeline.to_dict()) == pipeline
    with pytest.raises(ValueError, match="unknown pre-tokenizer"):
        TextPipeline(steps=("perl",))
    with pytest.raises(ValueError, match="NFKC"):
        TextPipeline(normalizer="NFKC")
    with pytest.raises(ValueError):
        TextPipeline.from_dict({"steps": "gpt2"})


def test_nfc_agrees_with_the_library_on_every_character_and_common_mark_sequences():
    """Every code point alone, and base letters with marks in common scripts. (A documented
    limit: long runs of marks in rare scripts, e.g. U+0898 after U+0899, are ordered
    differently by the library's Rust tables.)"""
    library = tokenizers.normalizers.NFC()
    ours = TextPipeline(normalizer="NFC")
    every = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    assert "\n".join(ours.normalize(ch) for ch in every) == library.normalize_str("\n".join(every))
    marks = [chr(cp) for cp in range(0x300, 0x370)] + ["\u05b4", "\u064e", "\u0651", "\u093c"]
    bases = "aeiouAEOncszCSZαωиЯ\u05d0\u0628\u0915"
    text = " ".join(b + m1 + m2 for b in bases for m1 in marks for m2 in marks[::7])
    text += " \u1100\u1161\u11a8 \u1112\u1161\u11ab"  # Hangul jamo compose into syllables
    assert ours.normalize(text) == library.normalize_str(text)
