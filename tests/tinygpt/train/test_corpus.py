"""The shipped corpus: split by whole plays, clean of licence text, every speech marked."""

import gzip
import re

import pytest

from tinygpt.train import corpus
from tinygpt.train.corpus import (
    EOT,
    list_plays,
    load_corpus,
    load_manifest,
    split_held_out,
)


def split_speeches(text: str) -> list[str]:
    """Speeches of a corpus text, each without its end marker, e.g. "HAMLET:\\nTo be, ...\\n"."""
    return [part for part in text.split(EOT + "\n") if part]


# Lines that occur once in Shakespeare, in the held-out plays only.
VAL_LINES = [
    "Full fathom five thy father lies:",  # The Tempest
    "How beauteous mankind is! O brave new world",  # The Tempest
    "If music be the food of love, play on,",  # Twelfth Night
    "Make me a willow cabin at your gate,",  # Twelfth Night
]
TRAIN_LINES = [
    "To be, or not to be,--that is the question:--",  # Hamlet
    "Now is the winter of our discontent",  # Richard III
]
SPEAKER_LINE = re.compile(r"^[A-Z][A-Z0-9'&. -]*:$")


@pytest.fixture(scope="module")
def train() -> str:
    return load_corpus("train")


@pytest.fixture(scope="module")
def val() -> str:
    return load_corpus("val")


def test_splits_are_disjoint_by_play():
    train_plays, val_plays = set(list_plays("train")), set(list_plays("val"))
    assert len(val_plays) >= 2
    assert not train_plays & val_plays
    assert {"The Tempest", "Twelfth Night"} == val_plays
    assert "Hamlet" in train_plays
    assert len(train_plays | val_plays) == 37  # every play, no poems
    assert not any("Sonnet" in t or "Lucrece" in t for t in train_plays | val_plays)


def test_held_out_lines_never_in_train(train, val):
    for line in VAL_LINES:
        assert line in val, line
        assert line not in train, line
    for line in TRAIN_LINES:
        assert line in train, line
        assert line not in val, line


def test_every_speech_is_a_speaker_then_text_then_marker(train, val):
    for text in (train, val):
        assert text.endswith("\n" + EOT + "\n")
        speeches = split_speeches(text)
        assert len(speeches) == text.count(EOT)
        for speech in speeches:
            lines = speech.split("\n")
            assert SPEAKER_LINE.match(lines[0]), speech[:80]
            assert lines[-1] == "" and all(line.strip() == line and line for line in lines[1:-1])
            assert len(lines) >= 3  # speaker, at least one spoken line, trailing newline


def test_split_speeches_round_trip():
    text = "HAMLET:\nTo be.\n" + EOT + "\nHORATIO:\nMy lord.\n" + EOT + "\n"
    assert split_speeches(text) == ["HAMLET:\nTo be.\n", "HORATIO:\nMy lord.\n"]
    assert "".join(s + EOT + "\n" for s in split_speeches(text)) == text


def test_no_licence_text_or_stage_directions(train, val):
    for text in (train, val):
        for banned in ("Project Gutenberg", "PROJECT GUTENBERG", "END OF THE PROJECT",
                       "*** START", "*** END", "http://", "[Exit", "[Enter"):
            assert banned not in text, banned


def test_files_are_deterministic_utf8_gzip():
    for split in corpus.SPLITS:
        raw = corpus.corpus_path(split).read_bytes()
        assert raw[:2] == b"\x1f\x8b"
        assert raw[4:8] == b"\x00\x00\x00\x00"  # gzip mtime 0: rebuilding gives the same bytes
        gzip.decompress(raw).decode("utf-8")  # raises if not UTF-8


def test_sizes_match_manifest_and_are_sane(train, val):
    manifest = load_manifest()
    assert manifest["eot"] == EOT
    for split, text in (("train", train), ("val", val)):
        plays = manifest["splits"][split]
        assert len(text) == manifest[f"{split}_characters"]
        assert sum(p["characters"] for p in plays) == len(text)
        assert sum(p["speeches"] for p in plays) == text.count(EOT)
    assert 4_000_000 < len(train) < 6_000_000
    assert 150_000 < len(val) < 400_000
    assert 25_000 < train.count(EOT) and 1_000 < val.count(EOT)
    # Each play contributes real text, none dominates.
    for play in manifest["splits"]["train"] + manifest["splits"]["val"]:
        assert 80_000 < play["characters"] < 200_000, play["title"]


def test_unknown_split_and_missing_file(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="unknown split"):
        load_corpus("test")
    monkeypatch.setattr(corpus, "DATA_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="build_corpus"):
        load_corpus("train")


@pytest.mark.parametrize("length", [0, 1, 9, 10, 11, 1234])
def test_split_held_out_keeps_every_character_and_holds_out_the_last_tenth(length):
    text = "".join(chr(65 + i % 26) for i in range(length))
    train_part, held_out = split_held_out(text)
    assert train_part + held_out == text
    assert len(train_part) == int(length * 0.9)
    with pytest.raises(ValueError):
        split_held_out(text, fraction=1.0)
