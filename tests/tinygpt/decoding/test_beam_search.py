"""tinygpt.decoding.beam_search, through generate(strategy="beam"): brute force over every sequence,
the score recomputed from a full forward pass, the history's parent pointers, the KV cache
against a full recompute, and the partial sort against the full stable sort. (Parity with
transformers is in tests/parity/test_decoding_parity.py.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinygpt.decoding.beam_search import _descending
from tinygpt.decoding.generation import generate
from tinygpt.network.functional import log_softmax
from tinygpt.network.model import GPT, GPTConfig


def small_model(vocab_size: int = 32, n_ctx: int = 24, scale: float = 1.0) -> GPT:
    model = GPT(GPTConfig(vocab_size=vocab_size, n_ctx=n_ctx, n_embd=16, n_head=2, n_layer=2))
    if scale != 1.0:  # bigger weights: peakier distributions, fewer near-ties
        for p in model.parameters().values():
            p *= scale
    return model


@pytest.fixture(scope="module")
def model() -> GPT:
    return small_model(scale=8.0)


def sequence_logprob(model: GPT, prompt: list[int], tokens: list[int]) -> float:
    ids = np.array(prompt + tokens)
    logp = log_softmax(model.forward(ids).astype(np.float64))  # (T, V)
    return float(sum(logp[len(prompt) - 1 + i, t] for i, t in enumerate(tokens)))


def test_beam_search_with_enough_beams_finds_the_best_sequence() -> None:
    """4 tokens, 3 steps, 16 beams: nothing is ever pruned, so beam search is exhaustive."""
    model = small_model(vocab_size=4, n_ctx=8, scale=4.0)
    result = generate(
        model, [0], 3, strategy="beam", num_beams=16, length_penalty=0.0, early_stopping="never"
    )
    scores = {
        seq: sequence_logprob(model, [0], list(seq))
        for seq in itertools.product(range(4), repeat=3)
    }
    best = max(scores, key=scores.get)
    assert tuple(result.tokens.tolist()) == best
    assert result.score == pytest.approx(scores[best], abs=1e-5)


@pytest.mark.parametrize("length_penalty", [0.5, 1.0, 2.0])
def test_beam_score_is_the_length_penalised_logprob(model: GPT, length_penalty: float) -> None:
    result = generate(
        model,
        [2, 3],
        8,
        strategy="beam",
        num_beams=3,
        eos_token_id=4,
        length_penalty=length_penalty,
    )
    tokens = result.tokens.tolist()
    expected = sequence_logprob(model, [2, 3], tokens) / len(tokens) ** length_penalty
    assert result.score == pytest.approx(expected, abs=1e-4)


def test_beam_history_is_a_tree_with_parent_pointers(model: GPT) -> None:
    result = generate(model, [1, 2], 8, strategy="beam", num_beams=3, eos_token_id=4)
    history = result.beam_history
    previous = [[]] * 3
    for step in history:
        assert len(step.candidates) == 6  # 2 * num_beams considered
        scores = [c.score for c in step.candidates]
        assert scores == sorted(scores, reverse=True)
        for c in step.candidates:
            parent_score = (
                0.0
                if step is history[0]
                else history[history.index(step) - 1].running_scores[c.parent]
            )
            assert c.score == pytest.approx(parent_score + c.token_logprob, abs=1e-9)
            if c.status == "running":
                assert step.running[c.slot] == previous[c.parent] + [c.token]
            if c.status in ("finished", "finished_discarded"):
                assert c.rank < 3 and (c.is_eos or step is history[-1])
        running = [c for c in step.candidates if c.status == "running"]
        assert len(running) == 3 or step is history[-1]
        assert [h.score for h in step.finished] == sorted(
            [h.score for h in step.finished], reverse=True
        )
        previous = step.running
    assert history[-1].finished[0].tokens == result.tokens.tolist()


@pytest.mark.parametrize("num_beams", [2, 4])
def test_beam_search_with_and_without_the_cache_walks_the_same_tree(num_beams: int) -> None:
    """The cache reorders its rows in place each step: every step must match a full recompute."""
    model = small_model(vocab_size=48, n_ctx=32, scale=4.0)
    cached = generate(model, [3, 1, 4], 20, strategy="beam", num_beams=num_beams, use_cache=True)
    full = generate(model, [3, 1, 4], 20, strategy="beam", num_beams=num_beams, use_cache=False)
    assert cached.tokens.tolist() == full.tokens.tolist()
    assert cached.score == pytest.approx(full.score, abs=1e-4)
    assert len(cached.beam_history) == len(full.beam_history)
    for a, b in zip(cached.beam_history, full.beam_history, strict=True):
        assert a.running == b.running
        np.testing.assert_allclose(a.running_scores, b.running_scores, atol=1e-4)


@given(scores=st.lists(st.integers(-3, 3) | st.floats(-1e30, 1e30), min_size=1, max_size=60),
       k=st.integers(1, 70))
def test_partial_descending_order_equals_the_full_stable_sort(scores, k) -> None:
    """Beam search keeps its 2 * num_beams best by a partial sort; ties must break the same way
    (lowest index first) as the full stable sort, which is what transformers does."""
    x = np.asarray(scores, dtype=np.float64)
    expected = np.argsort(-x, kind="stable")[:k]
    np.testing.assert_array_equal(_descending(x, k), expected)
