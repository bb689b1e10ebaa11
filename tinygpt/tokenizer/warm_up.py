"""A loaded tokenizer's first encode, timed: a tokenizer too slow to serve is refused at load.

Every part of an encode is bounded by the caps (tinygpt.caps): added tokens are found in one
pass, the merges of a chunk take O(n log n). The warm-up checks it on the tokenizer itself,
once, before a model is served: it encodes a sample of every kind of text a student may type,
plus the text that makes this tokenizer's added-token matcher walk furthest (its longest added
token without its last character, again and again), a piece at a time, and gives up as soon as
the pieces have taken more than WARM_UP_CPU_SECONDS of this thread's CPU time. One piece is
short (PIECE_CHARS), so a tokenizer that is too slow is stopped within a fraction of a second
of its budget: the load ends in a CheckpointError that names the file, never in a hang.

The warm-up first builds what the first encode builds (the pre-tokenizer's regex, the
added-token matcher: a cost of the load, bounded by the file's caps, not timed here), so that
no student's click pays for it.
"""

from __future__ import annotations

import time

from tinygpt.caps import WARM_UP_CHARS, WARM_UP_CPU_SECONDS, CheckpointError
from tinygpt.tokenizer.bpe import BPETokenizer

__all__ = ["warm_up"]

PIECE_CHARS = 256  # characters encoded between two looks at the clock

# what students type: prose, code, digits, punctuation, whitespace runs, several scripts, emoji
SAMPLE = (
    "The quick brown fox jumps over the lazy dog. It's 12:45, isn't it? 3.14159 1,000,000\n"
    "def square(x):\n    return x ** 2  # comment\n\n\tindented\r\n    spaces   between   \n"
    "Bonjour, ça va ? Ångström naïve façade cafe\u0301 «quotes» “curly” — dash … ellipsis\n"
    "日本語のテキストです。中文文本，还有标点。한국어 텍스트 العربية עברית русский ελληνικά\n"
    "emoji 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ✨ <|endoftext|> <s> </s> [INST] <<SYS>> {\"key\": [1, 2]}\n"
)


def warm_up_text(tok: BPETokenizer) -> str:
    """WARM_UP_CHARS characters: the sample, then the added-token matcher's longest walk."""
    longest = max(tok.special_tokens, key=len, default="")
    near_miss = longest[:-1] + " " if len(longest) > 1 else ""
    text = SAMPLE + near_miss * (WARM_UP_CHARS // max(1, len(near_miss)))
    return (text * (WARM_UP_CHARS // len(text) + 1))[:WARM_UP_CHARS]


def warm_up(tok: BPETokenizer, label: str, budget: float | None = None) -> float:
    """Encode the warm-up text a piece at a time; the CPU seconds it took. CheckpointError
    naming `label` (the tokenizer's file, relative to the models folder) past `budget`
    (default: WARM_UP_CPU_SECONDS)."""
    budget = WARM_UP_CPU_SECONDS if budget is None else budget
    text = warm_up_text(tok)
    tok.encode("warm up")  # builds the matcher and the regexes: a load's cost, not an encode's
    start = time.thread_time()
    for at in range(0, len(text), PIECE_CHARS):
        tok.encode(text[at:at + PIECE_CHARS])
        spent = time.thread_time() - start
        if spent > budget:
            raise CheckpointError(
                f"{label}: the tokenizer is too slow to serve: encoding {at + PIECE_CHARS:,} "
                f"of {len(text):,} sample characters took {spent:.1f} s of CPU time; the "
                f"limit is {budget:g} s (tinygpt.caps.WARM_UP_CPU_SECONDS)")
    return time.thread_time() - start
