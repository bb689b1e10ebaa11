"""Added tokens ("<|im_start|>", "<tool_call>") found in a text in one pass over it.

Before the merges, a tokenizer cuts its added tokens out of the text. The tokenizers library
does it with an Aho-Corasick automaton, "leftmost-longest": reading from the left, the first
position where some token starts wins, and there the longest token that starts. This module
does the same with a trie of the tokens, built once per tokenizer:

    "<|im_start|>", "<|im_end|>", "<|endoftext|>"   ->   "<|" ─┬─ "im_" ─┬─ "start|>"
                                                                │        └─ "end|>"
                                                                └─ "endoftext|>"

Each edge holds a whole run of characters (a radix tree), so a walk compares runs, not
characters. Finding the tokens costs, per character of the text, one look-up to see if a
token can start there and at most one walk down the trie, never longer than the longest
token (MAX_ADDED_TOKEN_CHARS, tinygpt.caps): the cost grows with the text, and not with
how many tokens there are. (A regex alternation of the tokens tries every token at every
position: 150,000 tokens made one short encode take seconds.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["AddedTokens"]

# Where a token may start is found by a regex character class while the tokens start with
# few distinct characters ("<", "[", " "); Python's re then jumps between them in C. A class
# of many scattered characters is slow in re (it tries them one by one: 75,000 took 90 µs a
# character), so beyond this a set look-up per character is used (about 0.07 µs).
REGEX_STARTS = 64


class AddedTokens:
    """A fixed set of added tokens, matched leftmost-longest in one pass (`split`).

    patterns: the tokens, or {pattern: token} when a token is matched by another text (a
    "normalized" added token is matched by its normalized form). When two tokens have the
    same pattern, the first one given wins.
    """

    def __init__(self, patterns: Iterable[str] | dict[str, str]):
        if not isinstance(patterns, dict):
            patterns = {p: p for p in patterns}
        # a node is [the token that ends here or None, {first char: (edge text, child)}]
        self._root: list = [None, {}]
        for pattern, token in patterns.items():
            if pattern:
                _insert(self._root, pattern, token)
        starts = self._root[1].keys()
        self._start_set = frozenset(starts)
        self._start_regex = None
        if 0 < len(starts) <= REGEX_STARTS:
            self._start_regex = re.compile("[" + "".join(map(re.escape, starts)) + "]")

    def __bool__(self) -> bool:
        return bool(self._start_set)

    def split(self, text: str) -> list[tuple[str, str | None]]:
        """Text -> [(piece, token)], in order: `token` is the added token a piece is matched
        as, None for the text between tokens. The pieces put end to end give back `text`."""
        if not self._start_set:
            return [(text, None)] if text else []
        out: list[tuple[str, str | None]] = []
        done = 0  # text[:done] is in `out`
        for start in self._starts(text):
            if start < done:
                continue  # inside a token already cut out
            end, token = self._longest_at(text, start)
            if token is not None:
                if start > done:
                    out.append((text[done:start], None))
                out.append((text[start:end], token))
                done = end
        if done < len(text):
            out.append((text[done:], None))
        return out

    def _starts(self, text: str) -> Iterable[int]:
        """Every position of `text` where some token could start, left to right."""
        if self._start_regex is not None:
            return (m.start() for m in self._start_regex.finditer(text))
        first = self._start_set
        return (i for i, ch in enumerate(text) if ch in first)

    def _longest_at(self, text: str, start: int) -> tuple[int, str | None]:
        """(end, token) of the longest token at text[start:], or (start, None)."""
        node, at = self._root, start
        best: tuple[int, str | None] = (start, None)
        while node[1] and at < len(text):
            entry = node[1].get(text[at])
            if entry is None or not text.startswith(entry[0], at):
                break
            at += len(entry[0])
            node = entry[1]
            if node[0] is not None:
                best = (at, node[0])
        return best


def _insert(root: list, pattern: str, token: str) -> None:
    """Put `pattern` into the radix tree under `root`, splitting an edge where it parts."""
    node, at = root, 0
    while at < len(pattern):
        if node[1] is None:
            node[1] = {}
        entry = node[1].get(pattern[at])
        if entry is None:
            node[1][pattern[at]] = (pattern[at:], [token, None])
            return
        edge, child = entry
        common = len(edge) if pattern.startswith(edge, at) else _shared(edge, pattern, at)
        if common < len(edge):  # the pattern leaves this edge part-way: split it there
            middle = [None, {edge[common]: (edge[common:], child)}]
            node[1][pattern[at]] = (edge[:common], middle)
            child = middle
        node, at = child, at + common
    if node[0] is None:
        node[0] = token


def _shared(edge: str, pattern: str, at: int) -> int:
    """How many leading characters `edge` shares with pattern[at:] (the first is shared)."""
    n = min(len(edge), len(pattern) - at)
    i = 1
    while i < n and edge[i] == pattern[at + i]:
        i += 1
    return i
