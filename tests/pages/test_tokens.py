"""Page 1, tokens and embeddings: the view selector and the BPE merge replay."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import PROMPTS, assert_clean, chart_z, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/2_Tokens_and_embeddings.py"


def test_tokens_page_view_selector_changes_the_heatmap():
    at = open_page(PAGE, "Hello world")
    token = chart_z(at, "Token embedding")
    at.radio(key="tokens.view").set_value("Position embedding P[t]").run()
    assert_clean(at)
    position = chart_z(at, "Position embedding")
    at.radio(key="tokens.view").set_value("Sum: the block input x = E[id] + P[t]").run()
    total = chart_z(at, "Sum")
    np.testing.assert_allclose(total, token + position, rtol=1e-5, atol=1e-6)


def test_merge_replay_offers_only_chunks_inside_the_window():
    at = open_page(PAGE, PROMPTS["over_long"])
    assert_clean(at)
    replay = at.selectbox(key="tokens.chunk")
    assert 0 < len(replay.options) <= 64  # the window holds 64 tokens, so at most 64 chunks
    assert replay.value == int(replay.options[-1].split(":")[0])  # the last token's chunk


def test_merge_replay_starts_from_the_chunk_of_the_inspected_token():
    """A fixed widget key still follows the position: a new position, a new start."""
    at = open_page(PAGE, "one two three four")
    last = at.selectbox(key="tokens.chunk").value
    at.selectbox(key="tokens.chunk").set_value(0).run()
    assert at.selectbox(key="tokens.chunk").value == 0  # the student's choice stays...
    at.sidebar.select_slider[0].set_value(2).run()
    assert_clean(at)
    assert 0 < at.selectbox(key="tokens.chunk").value < last  # ...until the position moves


def markdown_bytes(at) -> int:
    """What the page sent as markdown (chips included): the bulk of its HTML."""
    return sum(len(m.value.encode()) for m in at.markdown)


def test_a_20k_letter_paste_renders_in_bounded_time_html_and_memory():
    """Issue 12, finding 1: one 20,000-letter chunk without spaces used to draw a full row of
    chips for every merge step (64 MB of HTML, minutes, then out of memory). Now each row is
    cut to a window and the page says what it shows ("the first N of M merges")."""
    import random
    import string
    import time
    import tracemalloc

    from tinygpt_app.compute import caches

    rng = random.Random(0)
    letters = "".join(rng.choice(string.ascii_letters) for _ in range(20_000))
    start = time.perf_counter()
    at = open_page(PAGE, letters)
    seconds = time.perf_counter() - start
    assert_clean(at)
    assert seconds < 40, f"{seconds:.1f} s"  # ~4 s of it is encoding the prompt, on a busy box
    assert markdown_bytes(at) < 1_000_000, markdown_bytes(at)
    assert any("Showing the first" in c.value and "merges" in c.value for c in at.caption), [
        c.value for c in at.caption]
    # the same page again with the replay recomputed (the tokenizer's chunk cache is warm, so
    # this measures the replay and the drawing, not the encoding): memory stays small
    caches._bpe_replay_cached.cache.drop_idle(0)  # every entry
    tracemalloc.start()
    try:
        again = open_page(PAGE, letters)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_clean(again)
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MB"


def deep_size(value, seen=None) -> int:
    """Bytes of a session_state value: containers, text and arrays walked (each object once)."""
    import sys

    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value) + (getattr(value, "nbytes", 0) or 0)  # a component: None
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        size += sum(deep_size(v, seen) for v in value)
    return size


def test_session_state_stays_small_after_20_distinct_long_prompts():
    """Issue 12, finding 2: no widget key made from the prompt, nothing per prompt kept."""
    at = open_page(PAGE, "warm up")
    sizes, keys = [], []
    for i in range(20):
        at.sidebar.text_area[0].set_value(f"Prompt {i}: " + "All the world's a stage. " * 40).run()
        assert_clean(at)
        state = {k: at.session_state[k] for k in at.session_state}
        keys.append(len(state))
        sizes.append(sum(deep_size(k) + deep_size(v) for k, v in state.items()))
    assert keys[-1] == keys[1], keys  # the same keys whatever the prompt
    assert sizes[-1] < 64_000, sizes  # prompts of ~1 kB: a few copies of the current one
    assert sizes[-1] <= sizes[1] * 1.2, sizes
