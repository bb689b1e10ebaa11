"""Hostile tokenizer.json files (issue 45): 150,000 added tokens load and then encode in time
that grows with the text only; too many merges, added tokens or too long ones are refused by
their caps before any is read; a flag that is not true / false is refused."""

from __future__ import annotations

import json
import time

import pytest

from bench.hostile_files import added_token, tokenizer_json
from tests.core_support import time_limit
from tinygpt.caps import MAX_ADDED_TOKEN_CHARS, MAX_ADDED_TOKENS
from tinygpt.safe_io import CheckpointError
from tinygpt.tokenizer.hf_json import load_tokenizer_json, tokenizer_from_dict

PROMPT = "Hello <x7> world, <x149999> and <x12 (not one) <x> " * 4  # ~210 characters


def cpu_seconds(fn, *args, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.thread_time()
        fn(*args)
        times.append(time.thread_time() - start)
    return sorted(times)[len(times) // 2]


@pytest.mark.parametrize("special", [False, True], ids=["normalized", "special"])
def test_150k_added_tokens_encode_in_time_that_grows_with_the_text_only(tmp_path, special):
    """Before: with 150,000 normalized added tokens one 7-character encode took over 298 s
    (each encode tested every token against the whole list); with special ones 0.1 s."""
    data = tokenizer_json([added_token(f"<x{i}>", special=special, short=True)
                           for i in range(150_000)], nfc=True)  # 11 MB
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data, separators=(",", ":")))
    with time_limit(30.0):
        tok = load_tokenizer_json(path)
        tok.encode("warm up")  # builds the matcher, once (measured: ~1 s for these)
    ids = tok.encode(PROMPT)
    assert tok.special_tokens["<x7>"] in ids and tok.special_tokens["<x149999>"] in ids
    assert tok.decode(ids) == PROMPT
    short = PROMPT * 10  # 2,100 characters, then twice that
    t_short = cpu_seconds(lambda: tok._chunks(short, True))
    t_long = cpu_seconds(lambda: tok._chunks(short * 2, True))
    assert t_short < 0.1  # measured: 2 ms
    assert t_long < 3 * t_short + 0.002  # twice the text, about twice the time (not 4x)


def test_duplicate_merges_are_refused_by_their_cap_before_any_is_read(tmp_path):
    """Before: 2.2 M copies of one merge loaded, in 11.3 s and 385 MB."""
    path = tmp_path / "tokenizer.json"
    data = tokenizer_json(merges=["a b"] * 2_200_000, extra_vocab=["ab"])
    path.write_text(json.dumps(data, separators=(",", ":")))
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match=r"2,200,000 for 257 tokens; the cap is 1,028"):
        load_tokenizer_json(path)
    assert time.perf_counter() - start < 5.0  # measured: 0.5 s, the JSON parse


def test_too_many_added_tokens_are_refused_before_any_is_read():
    data = tokenizer_json()
    data["added_tokens"] = [None] * (MAX_ADDED_TOKENS + 1)  # not one of them is looked at
    with pytest.raises(ValueError, match=f"{MAX_ADDED_TOKENS + 1:,} added tokens; the cap"):
        tokenizer_from_dict(data)


def test_an_added_token_longer_than_its_cap_is_refused():
    long = "<" + "x" * MAX_ADDED_TOKEN_CHARS + ">"
    with pytest.raises(ValueError, match=f"characters; the cap is {MAX_ADDED_TOKEN_CHARS}"):
        tokenizer_from_dict(tokenizer_json([added_token(long)]))


@pytest.mark.parametrize("where, key, value", [
    ("token", "normalized", "no"), ("token", "special", 1), ("token", "lstrip", "false"),
    ("model", "ignore_merges", "yes"), ("model", "byte_fallback", "no"),
    ("pre_tokenizer", "use_regex", "no"), ("pre_tokenizer", "add_prefix_space", 0),
])
def test_a_flag_that_is_not_true_or_false_is_refused(where, key, value):
    data = tokenizer_json([added_token("<x>")])
    part = {"token": data["added_tokens"][0], "model": data["model"],
            "pre_tokenizer": data["pre_tokenizer"]}[where]
    part[key] = value
    with pytest.raises(ValueError, match=f"{key} .* is not true or false"):
        tokenizer_from_dict(data)
