"""GPT-2's pre-tokenizer and byte alphabet.

- `pretokenize(text)` cuts text into the chunks that BPE merges never cross (words with their
  leading space, runs of digits, runs of punctuation, runs of whitespace).
- `bytes_to_unicode()` is GPT-2's map from each byte to a printable character, the alphabet
  of its vocab.json ('Ġ' is the space byte).
"""

from __future__ import annotations

import functools
import re
import unicodedata

# Unicode White_Space, the set that GPT-2's regex engine calls \s.
# (Python's re \s also matches U+001C..U+001F, which GPT-2's \s does not.)
_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


# ----------------------------------------------------------------------------------------
# Bytes <-> printable characters (GPT-2's vocab.json stores tokens in this alphabet)
# ----------------------------------------------------------------------------------------


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character.

    Printable Latin-1 bytes map to themselves; the others (control bytes, space, ...) are
    shifted to U+0100 and up, so the space byte 0x20 becomes 'Ġ' and newline becomes 'Ċ'.
    """
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shift)
            shift += 1
    return mapping


@functools.cache
def unicode_to_bytes() -> dict[str, int]:
    """Inverse of :func:`bytes_to_unicode`."""
    return {ch: b for b, ch in bytes_to_unicode().items()}


def bytes_to_gpt2_string(token: bytes) -> str:
    """Token bytes -> the string GPT-2's vocab.json uses for it (b' the' -> 'Ġthe')."""
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def gpt2_string_to_bytes(text: str) -> bytes:
    """Inverse of :func:`bytes_to_gpt2_string`; KeyError for characters outside the map."""
    table = unicode_to_bytes()
    return bytes(table[ch] for ch in text)


# ----------------------------------------------------------------------------------------
# Pre-tokenizer: GPT-2's regex written for the stdlib `re` module
# ----------------------------------------------------------------------------------------


def _char_class(category_prefix: str) -> str:
    """Regex character-class body for every code point whose category starts with the prefix.

    Builds ranges like \\U00000041-\\U0000005a from the unicodedata tables, which is what
    \\p{L} (prefix "L") and \\p{N} (prefix "N") mean in the `regex` module.
    """
    ranges: list[tuple[int, int]] = []
    for cp in range(0x110000):
        if unicodedata.category(chr(cp)).startswith(category_prefix):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


@functools.cache
def pretokenize_pattern() -> re.Pattern[str]:
    r"""GPT-2's pre-tokenizer pattern for the stdlib `re` module. GPT-2 wrote it as

        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+

    `re` has no \p{L} (letters) or \p{N} (numbers), so we spell those classes out, and
    \s becomes the exact Unicode White_Space set.

    Built once on first use (about 0.1 s to scan the Unicode tables).
    """
    L, N, S = _char_class("L"), _char_class("N"), _WHITESPACE
    return re.compile(
        rf"'s|'t|'re|'ve|'m|'ll|'d"
        rf"| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+"
        rf"|[{S}]+(?![^{S}])|[{S}]+"
    )


def pretokenize(text: str) -> list[str]:
    """Split text into GPT-2 chunks: 'Hello  world!' -> ['Hello', ' ', ' world', '!']."""
    return pretokenize_pattern().findall(text)
