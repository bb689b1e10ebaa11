"""tinygpt.tokenizer.added_tokens: added tokens found leftmost-longest in one pass, as the
tokenizers library finds them, at a cost that grows with the text and not with the number
of tokens."""

from __future__ import annotations

import json
import re
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from bench.hostile_files import added_token, tokenizer_json
from tests.core_support import QUICK
from tinygpt.caps import MAX_ADDED_TOKEN_CHARS
from tinygpt.tokenizer.added_tokens import REGEX_STARTS, AddedTokens
from tinygpt.tokenizer.hf_json import tokenizer_from_dict

ALPHABET = "ab<|>c"


def reference_split(tokens: list[str], text: str) -> list[tuple[str, str | None]]:
    """Leftmost-longest by a regex alternation, longest first (what was used before: right,
    but it tries every token at every position)."""
    if not tokens:
        return [(text, None)] if text else []
    pattern = "|".join(re.escape(t) for t in sorted(set(tokens), key=len, reverse=True))
    parts = re.split(f"({pattern})", text)
    return [(p, p if i % 2 else None) for i, p in enumerate(parts) if p]


def test_the_leftmost_token_wins_and_there_the_longest():
    tokens = AddedTokens(["ab", "abc", "bcd", "<|im_start|>", "<|im_end|>", "<|"])
    assert tokens.split("xabcd") == [("x", None), ("abc", "abc"), ("d", None)]
    assert tokens.split("<|im_end|><|im_x") == [("<|im_end|>", "<|im_end|>"), ("<|", "<|"),
                                                ("im_x", None)]
    assert tokens.split("") == [] and AddedTokens([]).split("abc") == [("abc", None)]
    assert not AddedTokens([]) and tokens


def test_a_pattern_may_stand_for_another_token_and_the_first_of_a_pattern_wins():
    tokens = AddedTokens({"é!": "e\u0301!", "ab": "first"})
    assert tokens.split("café!") == [("caf", None), ("é!", "e\u0301!")]
    assert AddedTokens({"x": "one"}).split("xx") == [("x", "one"), ("x", "one")]


@QUICK
@given(tokens=st.lists(st.text(ALPHABET, min_size=1, max_size=5), max_size=12),
       text=st.text(ALPHABET, max_size=60))
@example(tokens=["ab", "abc", "b", "bcab"], text="abcabcab")
@example(tokens=["a" * k + "b" for k in range(1, 6)], text="aaaaaaab")
def test_split_is_the_regex_alternation_longest_first(tokens, text):
    ours = AddedTokens(tokens).split(text)
    assert ours == reference_split(tokens, text)
    assert "".join(piece for piece, _ in ours) == text


def test_many_start_characters_take_the_set_look_up_with_the_same_result():
    tokens = [chr(0x4E00 + 2 * i) + "x" for i in range(REGEX_STARTS + 10)] + ["ab"]
    text = "".join(chr(0x4E00 + i) + "x" for i in range(200)) + "ab"
    assert AddedTokens(tokens)._start_regex is None
    assert AddedTokens(tokens).split(text) == reference_split(tokens, text)


# ----------------------------------------------------------------------------- the cost


def cpu_seconds(fn, *args, repeat: int = 3) -> float:
    """The median CPU time of `fn(*args)` (CPU, not wall: other processes share the cores)."""
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        fn(*args)
        times.append(time.thread_time() - start)
    return sorted(times)[len(times) // 2]


def test_the_cost_grows_with_the_text_not_with_the_number_of_tokens():
    many = AddedTokens([f"<|extra_{i}|>" for i in range(150_000)])
    few = AddedTokens([f"<|extra_{i}|>" for i in range(10)])
    text = "Hello <|extra_7|> world <|extra_149999|> <|extra_ <| x " * 40  # ~2,200 characters
    assert [t for _, t in many.split(text) if t][:2] == ["<|extra_7|>", "<|extra_149999|>"]
    t_many, t_few = cpu_seconds(many.split, text), cpu_seconds(few.split, text)
    t_double = cpu_seconds(many.split, text * 2)
    assert t_many < 0.05  # before: one 7-character encode took seconds with 150,000 tokens
    assert t_many < 5 * t_few + 0.005
    assert t_double < 3 * t_many + 0.005  # linear: twice the text, about twice the time


def test_the_longest_walk_is_bounded_by_the_longest_token():
    """The worst text for the matcher: every position walks down the longest token and
    matches nothing. Bounded by MAX_ADDED_TOKEN_CHARS, and linear in the text."""
    tokens = AddedTokens(["a" * k + "b" for k in range(1, MAX_ADDED_TOKEN_CHARS)])
    t_one, t_two = cpu_seconds(tokens.split, "a" * 2000), cpu_seconds(tokens.split, "a" * 4000)
    assert t_one < 1.0  # measured: 0.09 s (45 µs a character)
    assert t_two < 3 * t_one + 0.01


# ----------------------------------------------------------------------------- parity


ADDED = [added_token("<|", special=True), added_token("<|a|>", special=True),
         added_token("b|", normalized=False), added_token("ab"), added_token("abc"),
         added_token("bc"), added_token("cab"), added_token("é!"), added_token("e\u0301x"),
         added_token("e\u0301", special=True)]


@QUICK
@given(text=st.lists(st.sampled_from(["a", "b", "c", "<|", "|", ">", "é", "e", "\u0301", "!",
                                      "x", " "]), max_size=40).map("".join))
@example(text="e\u0301x e\u0301! <|a|>bc cab b|c")
def test_encode_matches_the_tokenizers_library(text):
    tokenizers = pytest.importorskip("tokenizers", reason="the reference")
    data = tokenizer_json(ADDED, nfc=True)
    ref = tokenizers.Tokenizer.from_str(json.dumps(data))
    ours = tokenizer_from_dict(data)
    assert ours.encode(text) == ref.encode(text, add_special_tokens=False).ids
