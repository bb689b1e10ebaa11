"""tinygpt.fast.parts: several sequences in one pass give each what it gets alone (a plain
forward of its full text, a separate reference), and every part is checked before any runs."""

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig
from tinygpt.fast.parts import forward_parts


def test_forward_parts_gives_each_sequence_what_it_gets_alone():
    """Sequences of other lengths, batch sizes and new-token counts in one pass: each part's
    logits equal a plain forward of that part's full text (an independent reference), and its
    cache carries on as if it had run alone."""
    model = GPT(GPTConfig(vocab_size=50, n_ctx=320, n_embd=32, n_head=4, n_layer=2), seed=3)
    rng = np.random.default_rng(0)
    texts = [rng.integers(0, 50, size=(b, n)) for b, n in [(1, 7), (3, 2), (2, 150), (1, 1)]]
    news = [rng.integers(0, 50, size=(b, t)) for (b, _), t in
            zip([(1, 7), (3, 2), (2, 150), (1, 1)], [1, 4, 1, 140], strict=True)]
    caches = []
    for text in texts:
        cache = model.new_cache(len(text), capacity=text.shape[1] + 145)
        model.forward_cached(text, cache)
        caches.append(cache)
    together = forward_parts(model, list(zip(news, caches, strict=True)))
    for text, new, cache, logits in zip(texts, news, caches, together, strict=True):
        full = np.concatenate([text, new], axis=1)
        assert logits.shape == (len(text), 50) and cache.length == full.shape[1]
        for row in range(len(text)):
            np.testing.assert_allclose(logits[row], model.forward(full[row])[-1],
                                       rtol=1e-4, atol=1e-5)
    nxt = forward_parts(model, [(np.array([[5]]), caches[0])])[0]  # carries on alone
    alone = model.forward(np.append(texts[0][0], [news[0][0, 0], 5]))[-1]
    np.testing.assert_allclose(nxt[0], alone, rtol=1e-4, atol=1e-5)


def test_forward_parts_checks_every_part_before_it_writes_any():
    model = GPT(GPTConfig(vocab_size=50, n_ctx=16, n_embd=16, n_head=2, n_layer=1), seed=0)
    small, other = model.new_cache(1, capacity=2), model.new_cache(1)
    with pytest.raises(ValueError, match="room for 2"):
        forward_parts(model, [(np.array([[1]]), other), (np.array([[1, 2, 3]]), small)])
    with pytest.raises(ValueError, match="a cache of its own"):
        forward_parts(model, [(np.array([[1]]), other), (np.array([[2]]), other)])
    with pytest.raises(ValueError, match="does not match"):
        forward_parts(model, [(np.array([[1], [2]]), other)])
    assert other.length == 0 and small.length == 0
