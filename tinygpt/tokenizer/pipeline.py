"""How text becomes chunks, for tokenizers read from a Hugging Face tokenizer.json.

A `TextPipeline` is the part of tokenizer.json that runs before the BPE merges:
1. added tokens ("<|im_start|>") are cut out of the raw text;
2. the normalizer (only NFC here) rewrites each remaining piece;
3. added tokens marked "normalized" are cut out of the normalized pieces, matched by their
   normalized form (both cuts in one pass each, tinygpt.tokenizer.added_tokens);
4. the pre-tokenizers cut each piece into chunks, one after the other (a `Split` by a known
   regex, `Digits`, ByteLevel's own GPT-2 regex); merges never cross a chunk boundary.
`ignore_merges` (Llama-3) is also kept here: a chunk that is a whole vocabulary token becomes
that token at once, without the merges.

The split patterns are written for the stdlib `re`, as GPT-2's is in `pretokenizer.py`:
`re` has no \\p{L} / \\p{N}, so the classes are spelled out from the unicodedata tables
(Unicode 14 in Python 3.11) plus the letters and numbers that Unicode 15.0-16.0 added, which
the tokenizers library's regex engine (Oniguruma) knows. Only patterns listed in
`KNOWN_SPLIT_PATTERNS` are accepted: an unknown one is refused, never approximated.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from tinygpt.tokenizer.added_tokens import AddedTokens
from tinygpt.tokenizer.pretokenizer import _WHITESPACE, _char_class

__all__ = ["KNOWN_SPLIT_PATTERNS", "Matchers", "TextPipeline"]

Matchers = tuple[AddedTokens, AddedTokens]  # (tokens of the raw text, of the normalized text)

# Letters (\p{L}) and numbers (\p{N}) assigned by Unicode 15.0-16.0: Oniguruma in tokenizers
# 0.23 counts them, Python 3.11's unicodedata (14.0) calls them unassigned. Measured by
# splitting every code point with tokenizers' Split(\p{L}) and Split(\p{N}).
_NEW_LETTERS = (
    (0x1C89, 0x1C8A), (0xA7CB, 0xA7CD), (0xA7DA, 0xA7DC), (0x105C0, 0x105F3),
    (0x10D4A, 0x10D65), (0x10D6F, 0x10D85), (0x10EC2, 0x10EC4), (0x1123F, 0x11240),
    (0x11380, 0x11389), (0x1138B, 0x1138B), (0x1138E, 0x1138E), (0x11390, 0x113B5),
    (0x113B7, 0x113B7), (0x113D1, 0x113D1), (0x113D3, 0x113D3), (0x11BC0, 0x11BE0),
    (0x11F02, 0x11F02), (0x11F04, 0x11F10), (0x11F12, 0x11F33), (0x1342F, 0x1342F),
    (0x13441, 0x13446), (0x13460, 0x143FA), (0x16100, 0x1611D), (0x16D40, 0x16D6C),
    (0x18CFF, 0x18CFF), (0x1B132, 0x1B132), (0x1B155, 0x1B155), (0x1DF25, 0x1DF2A),
    (0x1E030, 0x1E06D), (0x1E4D0, 0x1E4EB), (0x1E5D0, 0x1E5ED), (0x1E5F0, 0x1E5F0),
    (0x2B739, 0x2B739), (0x2EBF0, 0x2EE5D), (0x31350, 0x323AF),
)
_NEW_NUMBERS = (
    (0x10D40, 0x10D49), (0x116D0, 0x116E3), (0x11BF0, 0x11BF9), (0x11F50, 0x11F59),
    (0x16130, 0x16139), (0x16D70, 0x16D79), (0x1CCF0, 0x1CCF9), (0x1D2C0, 0x1D2D3),
    (0x1E4F0, 0x1E4F9), (0x1E5F1, 0x1E5FA),
)
# The Digits pre-tokenizer is not a regex but Rust's char::is_numeric, which knows Unicode 17:
# these numbers too (measured by running Digits over every code point).
_RUST_NUMBERS = ((0x11DE0, 0x11DE9), (0x16FF4, 0x16FF6))

# tokenizer.json's pattern text -> the name we build it under
KNOWN_SPLIT_PATTERNS = {
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+": "gpt2",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama3",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
}


def _ranges(pairs: tuple[tuple[int, int], ...]) -> str:
    return "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in pairs)


@functools.cache
def unicode_classes() -> tuple[str, str, str]:
    """Bodies of the classes \\p{L}, \\p{N} and \\s, as the tokenizers library's engine has them."""
    return (_char_class("L") + _ranges(_NEW_LETTERS), _char_class("N") + _ranges(_NEW_NUMBERS),
            _WHITESPACE)


@functools.cache
def split_regex(name: str) -> re.Pattern[str]:
    """The compiled pattern of a known split ("gpt2", "llama3", "qwen2") or digits step."""
    L, N, S = unicode_classes()
    numeric = N + _ranges(_RUST_NUMBERS)  # what the Digits pre-tokenizer calls a digit
    contractions = "'s|'t|'re|'ve|'m|'ll|'d"
    # Llama-3 and Qwen2: a letter run may take one leading non-letter (" word", "(word"),
    # numbers come in runs of at most 3 (Llama-3) or one by one (Qwen2), punctuation keeps
    # the newlines after it, and a whitespace run ending in newlines is a chunk of its own
    modern = (rf"(?i:{contractions})|[^\r\n{L}{N}]?[{L}]+|{{digits}}"
              rf"| ?[^{S}{L}{N}]+[\r\n]*|[{S}]*[\r\n]+|[{S}]+(?![^{S}])|[{S}]+")
    patterns = {
        "gpt2": rf"{contractions}| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+",
        "llama3": modern.replace("{digits}", f"[{N}]{{1,3}}"),
        "qwen2": modern.replace("{digits}", f"[{N}]"),
        "digit": f"[{numeric}]",  # Digits(individual_digits=True): each digit alone
        "digits": f"[{numeric}]+",  # Digits(individual_digits=False): runs of digits
    }
    return re.compile(patterns[name])


def isolate(pattern: re.Pattern[str], text: str) -> list[str]:
    """Split "Isolated": every match is a piece, and so is every stretch between matches."""
    pieces: list[str] = []
    at = 0
    for match in pattern.finditer(text):
        start, end = match.span()
        if start > at:
            pieces.append(text[at:start])
        if end > start:
            pieces.append(text[start:end])
        at = end
    if at < len(text):
        pieces.append(text[at:])
    return pieces


@dataclass(frozen=True)
class TextPipeline:
    """tokenizer.json's steps before the merges (see the module docstring).

    normalizer: "NFC" or None. steps: the pre-tokenizers in order, each the name of a
    pattern of `split_regex` applied "Isolated" (ByteLevel's own regex is "gpt2").
    normalized_tokens: the added tokens matched after normalization (the others before).
    """

    normalizer: str | None = None
    steps: tuple[str, ...] = ("gpt2",)
    ignore_merges: bool = False
    normalized_tokens: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.normalizer not in (None, "NFC"):
            raise ValueError(f"normalizer {self.normalizer!r} is not supported (only NFC)")
        unknown = [s for s in self.steps if s not in ("gpt2", "llama3", "qwen2", "digit", "digits")]
        if unknown:
            raise ValueError(f"unknown pre-tokenizer step(s) {unknown}")

    def normalize(self, text: str) -> str:
        return unicodedata.normalize("NFC", text) if self.normalizer == "NFC" else text

    def pretokenize(self, text: str) -> list[str]:
        """One normalized piece -> its chunks, every step applied to every piece of the last."""
        pieces = [text]
        for step in self.steps:
            pattern = split_regex(step)
            pieces = [chunk for piece in pieces for chunk in isolate(pattern, piece)]
        return pieces

    def matchers(self, allowed: Iterable[str]) -> Matchers:
        """The added tokens of `allowed`, as the tokenizers library matches them: those not
        "normalized" in the raw text, the others in the normalized text by their normalized
        form (the first token of a form wins). Built once per tokenizer (BPETokenizer)."""
        normalized = frozenset(self.normalized_tokens)
        allowed = list(allowed)
        late: dict[str, str] = {}
        for token in allowed:
            if token in normalized:
                late.setdefault(self.normalize(token), token)
        return AddedTokens([t for t in allowed if t not in normalized]), AddedTokens(late)

    def chunks(self, text: str, matchers: Matchers) -> list[tuple[str, bool]]:
        """Text -> [(chunk, is_added_token)], as the tokenizers library cuts it: an added
        token's chunk is the token itself (its text, as the vocabulary has it)."""
        raw, late = matchers
        out: list[tuple[str, bool]] = []
        for piece, token in raw.split(text):
            if token is not None:
                out.append((token, True))
                continue
            for part, late_token in late.split(self.normalize(piece)):
                if late_token is not None:
                    out.append((late_token, True))
                else:
                    out.extend((chunk, False) for chunk in self.pretokenize(part))
        return out

    def to_dict(self) -> dict:
        return {"normalizer": self.normalizer, "steps": list(self.steps),
                "ignore_merges": self.ignore_merges,
                "normalized_tokens": list(self.normalized_tokens)}

    @classmethod
    def from_dict(cls, d: dict) -> TextPipeline:
        """Inverse of to_dict; ValueError on anything malformed."""
        if not isinstance(d, dict) or set(d) != {"normalizer", "steps", "ignore_merges",
                                                 "normalized_tokens"}:
            raise ValueError("pipeline must hold normalizer, steps, ignore_merges, "
                             "normalized_tokens")
        steps, tokens = d["steps"], d["normalized_tokens"]
        if not (isinstance(steps, list) and all(isinstance(s, str) for s in steps)
                and isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)
                and isinstance(d["ignore_merges"], bool)):
            raise ValueError("pipeline steps and normalized_tokens must be lists of strings")
        return cls(d["normalizer"], tuple(steps), d["ignore_merges"], tuple(tokens))
