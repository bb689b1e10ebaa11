"""tinygpt.tokenizer.warm_up: a tokenizer too slow to serve is refused at load, by name,
within a fraction of a second of its budget; a real one passes far below it."""

from __future__ import annotations

import time

import pytest

from tests.core_support import app_tokenizer
from tinygpt.caps import WARM_UP_CHARS, WARM_UP_CPU_SECONDS
from tinygpt.safe_io import CheckpointError
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.warm_up import PIECE_CHARS, warm_up, warm_up_text


def test_a_real_tokenizer_warms_up_far_below_the_budget():
    spent = warm_up(app_tokenizer(), "tiny.npz: __tokenizer__")
    assert spent < WARM_UP_CPU_SECONDS / 5


def test_the_text_holds_the_longest_walk_of_the_added_token_matcher():
    tok = app_tokenizer()
    text = warm_up_text(tok)
    assert len(text) == WARM_UP_CHARS
    longest = max(tok.special_tokens, key=len)
    assert longest[:-1] + " " + longest[:-1] in text


class SlowTokenizer(BPETokenizer):
    """Each encode burns 20 ms of CPU: a stand-in for a tokenizer whose cost went wrong."""

    calls = 0

    def encode(self, text, allowed_special=True):
        SlowTokenizer.calls += 1
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass
        return super().encode(text, allowed_special)


def test_a_slow_tokenizer_is_refused_by_name_soon_after_its_budget():
    tok = app_tokenizer()
    slow = SlowTokenizer(tok.vocab, tok.merges, tok.special_tokens)
    start = time.thread_time()
    with pytest.raises(CheckpointError) as err:
        warm_up(slow, "m/tokenizer.json", budget=0.1)
    assert time.thread_time() - start < 0.1 + 0.1  # stopped within a piece or two
    assert SlowTokenizer.calls < WARM_UP_CHARS // PIECE_CHARS  # not every piece was tried
    message = str(err.value)
    assert message.startswith("m/tokenizer.json: the tokenizer is too slow to serve")
    assert "/tmp" not in message and "/work" not in message
