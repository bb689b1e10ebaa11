"""The KV cache section of the Decoding page: its bars, bytes and saved-work numbers are
tinygpt.kv_cache_reuse's for the page's own greedy run; the new-tokens slider changes them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    chart,
    decode,
    metric,
    open_page,
    widget,
)
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt.readouts.kv_reuse import kv_cache_reuse, work_saved  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/8_Decoding.py"


def reference(new: int):
    model, tok = load(TINY)
    ids = np.array(tok.encode(NORMAL))
    greedy = generate(model, ids, strategy="greedy", max_new_tokens=new,
                      eos_token_id=getattr(tok, "eos_token_id", None))
    return kv_cache_reuse(model, len(ids), len(greedy.tokens))


def check_section(at, reuse) -> None:
    bars = chart(at, "Keys and values at each of")
    np.testing.assert_array_equal(decode(bars["data"][0]["y"], float), reuse.computed)
    np.testing.assert_array_equal(decode(bars["data"][1]["y"], float), reuse.reused)
    held = decode(chart(at, "Bytes the cache holds")["data"][0]["y"], float)
    np.testing.assert_allclose(held * 1024, reuse.bytes_held)
    work = chart(at, "Multiply-adds at each step")
    np.testing.assert_array_equal(decode(work["data"][0]["y"], float),
                                  reuse.multiply_adds_cached)
    saved = work_saved(reuse)
    assert metric(at, "Multiply-adds with the cache") == saved.cached
    assert metric(at, "Recomputing every step") == saved.recompute
    assert metric(at, "Work saved") == round(saved.ratio, 2)


def test_kv_cache_section_shows_kv_cache_reuse():
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    reuse = reference(40)  # the page's default number of new tokens
    assert len(reuse.computed) > 1
    check_section(at, reuse)


def test_new_tokens_slider_changes_the_section():
    at = open_page(PAGE, NORMAL)
    widget(at.slider, "New tokens").set_value(7).run()
    assert_clean(at)
    check_section(at, reference(7))
