"""tinygpt.tokenizer.chunk_cache: encode()'s chunk cache stays within its byte budget."""

from __future__ import annotations

import random
import tracemalloc

from tinygpt.tokenizer.bpe import CHUNK_CACHE_BYTES, BPETokenizer


def test_chunk_cache_is_bounded_by_bytes():
    """Issue 12, finding 3: 100,000 entries of any size were kept (600 prompts: +477 MB)."""
    budget = 2 * 2**20
    tok = BPETokenizer([bytes([b]) for b in range(256)], [], cache_bytes=budget)
    assert BPETokenizer(tok.vocab, [])._cache.budget == CHUNK_CACHE_BYTES  # the default
    rng = random.Random(0)
    texts = ["".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(3000))
             for _ in range(40)]  # 40 distinct one-chunk texts, ~80 kB of cache each
    tok.encode(texts[0])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for text in texts:
            assert tok.decode(tok.encode(text)) == text
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert tok._cache.nbytes <= budget
    assert held <= budget * 1.05, f"{held / 2**20:.2f} MB"  # the count is real memory


def test_chunk_cache_drops_the_least_recently_used():
    tok = BPETokenizer([bytes([b]) for b in range(256)], [], cache_bytes=100_000)  # three entries
    words = [f"{w}{'x' * 3000}" for w in ("one", "two", "three", "four", "five")]
    for w in words[:3]:
        tok.encode(w)
    tok.encode(words[0])  # now the most recent
    for w in words[3:]:
        tok.encode(w)
    assert len(tok._cache) == 3 and tok._cache.nbytes <= 100_000
    assert tok._cache.get(words[0]) is not None and tok._cache.get(words[1]) is None
    assert tok.decode(tok.encode(words[1])) == words[1]
