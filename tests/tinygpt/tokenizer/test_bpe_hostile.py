"""Hostile text for tinygpt.tokenizer.bpe (BPETokenizer, the tiny test model's): any Unicode
text round-trips; a lone surrogate is refused with a clear ValueError (property-based)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core_support import ANY_TEXT, QUICK, app_tokenizer


@QUICK
@given(text=ANY_TEXT | st.sampled_from(["", "\x00", "<|endoftext|>", "<|endoftext", "\r\n\t",
                                         "e\u0301", "👩🏽‍🔬", "\U0010ffff", "\ufeff"]))
def test_app_tokenizer_round_trips_any_unicode_text(text):
    tok = app_tokenizer()
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text


@settings(max_examples=30, deadline=None)
@given(before=ANY_TEXT, surrogate=st.characters(categories=["Cs"]), after=ANY_TEXT)
def test_a_lone_surrogate_is_refused_with_a_clear_error(before, surrogate, after):
    """Documented policy: text with a lone surrogate cannot be UTF-8 encoded -> ValueError."""
    with pytest.raises(ValueError, match="surrogate"):
        app_tokenizer().encode(before + surrogate + after)
