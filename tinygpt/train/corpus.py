"""The shipped Shakespeare corpus: 37 plays, split by whole plays into train and validation.

The text is a run of speeches, each one a speaker's turn followed by the end-of-text marker:

    HAMLET:
    To be, or not to be,--that is the question:--
    ...
    <|endoftext|>

Built by scripts/build_corpus.py (see data/README.md); nothing here touches the network.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

EOT = "<|endoftext|>"
SPLITS = ("train", "val")


def _data_dir() -> Path:
    """data/ of the repository, or its copy inside the installed package (tinygpt/_data,
    written by setup.py's build: an installed tinygpt has no repository around it)."""
    package = Path(__file__).resolve().parents[1]
    shipped = package / "_data"
    return shipped if (shipped / "manifest.json").is_file() else package.parent / "data"


DATA_DIR = _data_dir()


def corpus_path(split: str = "train") -> Path:
    """Path of the gzip file holding one split."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {SPLITS}")
    return DATA_DIR / f"shakespeare_{split}.txt.gz"


def load_corpus(split: str = "train") -> str:
    """The whole text of a split ("train" or "val") as one string."""
    path = corpus_path(split)
    if not path.is_file():
        raise FileNotFoundError(
            f"corpus file {path} is missing: it ships with the repository in data/; "
            "rebuild it with `python scripts/build_corpus.py`"
        )
    with gzip.open(path, "rb") as f:
        return f.read().decode("utf-8")


def split_held_out(text: str, fraction: float = 0.1) -> tuple[str, str]:
    """(train text, held-out text): the last `fraction` of the characters are held out."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be between 0 and 1, got {fraction!r}")
    cut = int(len(text) * (1.0 - fraction))
    return text[:cut], text[cut:]


def load_manifest() -> dict:
    """data/manifest.json: the source, and for each split its plays with their sizes."""
    path = DATA_DIR / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"corpus manifest {path} is missing")
    return json.loads(path.read_text(encoding="utf-8"))


def list_plays(split: str = "train") -> list[str]:
    """Titles of the plays in a split, e.g. ["The Tempest", "Twelfth Night"] for "val"."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}: expected one of {SPLITS}")
    return [play["title"] for play in load_manifest()["splits"][split]]
