"""tinygpt.decoding.generation on its own: distributions, filters, sampling, stopping, the KV cache.

Each check uses an independent route to the answer: brute force over every sequence, a full
recompute instead of the cache, a chi-square test against the filtered probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.decoding.generation import (
    generate,
    pick_token,
    process_logits,
    read_prompt,
    top_k_filter,
    top_p_filter,
)
from tinygpt.decoding.generation import (
    softmax_with_temperature as softmax_t,
)
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


# ----------------------------------------------------------------------------- distributions


def test_softmax_is_stable_and_sums_to_one() -> None:
    probs = softmax_t(np.array([1000.0, 999.0, -1000.0]))
    np.testing.assert_allclose(probs.sum(), 1.0)
    np.testing.assert_allclose(probs[:2], [1 / (1 + np.exp(-1)), 1 / (1 + np.e)])


def test_temperature_zero_is_one_hot_on_the_first_argmax() -> None:
    assert softmax_t(np.array([1.0, 3.0, 3.0, 2.0]), 0.0).tolist() == [0, 1, 0, 0]
    np.testing.assert_array_equal(
        softmax_t(np.array([[0.0, 5.0], [7.0, 7.0]]), 0), [[0.0, 1.0], [1.0, 0.0]]
    )


def test_temperature_sharpens_and_flattens() -> None:
    logits = np.array([2.0, 1.0, 0.0])
    np.testing.assert_allclose(softmax_t(logits, 0.5), softmax_t(2 * logits))
    assert softmax_t(logits, 0.5)[0] > softmax_t(logits)[0] > softmax_t(logits, 2.0)[0]


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "hot", None])
def test_bad_temperature_is_rejected(bad) -> None:
    with pytest.raises(ValueError, match="temperature"):
        softmax_t(np.zeros(3), bad)


def test_log_softmax_matches_log_of_softmax() -> None:
    logits = np.random.default_rng(0).standard_normal((3, 10)) * 4
    np.testing.assert_allclose(log_softmax(logits), np.log(softmax_t(logits)), atol=1e-12)


# ----------------------------------------------------------------------------- filters


def test_top_k_keeps_ties_with_the_kth_value() -> None:
    logits = np.array([1.0, 3.0, 2.0, 2.0, 0.0])
    assert np.isfinite(top_k_filter(logits, 2)).tolist() == [False, True, True, True, False]
    assert np.isfinite(top_k_filter(logits, 1)).tolist() == [False, True, False, False, False]


def test_filters_are_no_ops_at_their_limits() -> None:
    logits = np.random.default_rng(1).standard_normal((2, 7))
    np.testing.assert_array_equal(top_k_filter(logits, 7), logits)
    np.testing.assert_array_equal(top_k_filter(logits, 100), logits)
    np.testing.assert_array_equal(top_p_filter(logits, 1.0), logits)


def test_top_p_keeps_at_least_one_token() -> None:
    logits = np.array([0.0, 5.0, 1.0])
    assert np.isfinite(top_p_filter(logits, 1e-12)).tolist() == [False, True, False]


def test_filters_work_row_by_row() -> None:
    logits = np.random.default_rng(2).standard_normal((4, 9))
    for row, filtered in zip(logits, top_p_filter(logits, 0.7), strict=True):
        np.testing.assert_array_equal(top_p_filter(row, 0.7), filtered)
    for row, filtered in zip(logits, top_k_filter(logits, 3), strict=True):
        np.testing.assert_array_equal(top_k_filter(row, 3), filtered)


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "3"])
def test_bad_top_k_is_rejected(k) -> None:
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(np.zeros(4), k)


@pytest.mark.parametrize("p", [0.0, -0.5, 1.5, float("nan"), "half"])
def test_bad_top_p_is_rejected(p) -> None:
    with pytest.raises(ValueError, match="top_p"):
        top_p_filter(np.zeros(4), p)


def test_process_logits_records_every_stage() -> None:
    logits = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    rec = process_logits(logits, temperature=0.5, top_k=4, top_p=0.9)
    probs = np.exp(logits / 0.5) / np.exp(logits / 0.5).sum()  # written out by hand
    np.testing.assert_allclose(rec.probs, probs)
    assert rec.top_k_cutoff == 0.0  # the 4th highest scaled score
    np.testing.assert_allclose(rec.top_k_removed_mass, probs[4:].sum())
    np.testing.assert_allclose(rec.probs_after_top_k, np.r_[probs[:4], 0, 0] / probs[:4].sum())
    # top-p on the renormalised top-4: keep while the mass above is below 0.9
    after_k = rec.probs_after_top_k
    mass_above = np.r_[0.0, np.cumsum(after_k)[:-1]]
    expected_kept = (mass_above < 0.9) & (after_k > 0)
    np.testing.assert_array_equal(rec.kept, expected_kept)
    np.testing.assert_allclose(rec.top_p_removed_mass, after_k[~expected_kept].sum())
    assert rec.top_p_threshold == pytest.approx(after_k[expected_kept].min())
    np.testing.assert_allclose(
        rec.final_probs, np.where(expected_kept, probs, 0) / probs[expected_kept].sum()
    )


def test_process_logits_temperature_zero_keeps_only_the_argmax() -> None:
    rec = process_logits(np.array([0.0, 2.0, 2.0, 1.0]), temperature=0, top_k=3, top_p=0.5)
    assert rec.kept.tolist() == [False, True, False, False]
    assert rec.final_probs.tolist() == [0.0, 1.0, 0.0, 0.0]


# ----------------------------------------------------------------------------- sampling


def test_pick_token_follows_the_cumulative_bar() -> None:
    probs = np.array([0.2, 0.0, 0.5, 0.3])
    assert [pick_token(probs, u)[0] for u in (0.0, 0.19, 0.2, 0.69, 0.7, 0.999999)] == [
        0,
        0,
        2,
        2,
        3,
        3,
    ]
    assert pick_token(probs, 1.0 - 1e-17)[0] == 3  # never a token with probability 0


def test_sampling_matches_the_filtered_distribution_chi_square() -> None:
    stats = pytest.importorskip("scipy.stats", reason="the chi-square p-value uses scipy")
    logits = np.random.default_rng(3).standard_normal(30) * 1.5
    probs = process_logits(logits, temperature=0.8, top_k=12, top_p=0.9).final_probs
    rng = np.random.default_rng(1234)
    n = 20_000
    draws = np.array([pick_token(probs, rng.random())[0] for _ in range(n)])
    counts = np.bincount(draws, minlength=len(probs))
    assert counts[probs == 0].sum() == 0  # filtered tokens are never drawn
    kept = probs > 0
    chi2, p_value = stats.chisquare(counts[kept], n * probs[kept])
    assert p_value > 0.001, (chi2, p_value)
    # and the test has teeth: top-k alone (top-p not applied) is clearly rejected
    rec = process_logits(logits, temperature=0.8, top_k=12)
    support = rec.final_probs > 0
    assert stats.chisquare(counts[support], n * rec.final_probs[support])[1] < 1e-6


def test_same_seed_same_text_different_seed_different_text(model: GPT) -> None:
    kwargs = dict(strategy="sample", temperature=1.5, top_k=20, top_p=0.95)
    a = generate(model, [1, 2], 15, seed=7, **kwargs)
    b = generate(model, [1, 2], 15, seed=7, **kwargs)
    c = generate(model, [1, 2], 15, seed=8, **kwargs)
    assert a.tokens.tolist() == b.tokens.tolist()
    assert a.tokens.tolist() != c.tokens.tolist()
    assert [s.u for s in a.steps] == [s.u for s in b.steps]
    for step in a.steps:  # each token is the one the recorded u points at
        assert pick_token(step.processed.final_probs, step.u)[0] == step.token
        assert step.processed.kept[step.token]


def test_temperature_zero_and_top_k_one_sample_greedily(model: GPT) -> None:
    greedy = generate(model, [3], 12).tokens.tolist()
    assert generate(model, [3], 12, strategy="sample", temperature=0, seed=1).tokens.tolist() == (
        greedy
    )
    assert generate(model, [3], 12, strategy="sample", top_k=1, seed=2).tokens.tolist() == greedy


def test_greedy_takes_the_argmax_of_a_full_recompute(model: GPT) -> None:
    result = generate(model, [5, 6], 10, use_cache=True)
    for i, step in enumerate(result.steps):
        logits = model.forward(result.all_ids[: 2 + i])[-1]
        assert step.token == int(np.argmax(logits))
        np.testing.assert_allclose(
            step.processed.logits, logits, atol=1e-4
        )  # big weights: float32 noise ~1e-5


# ----------------------------------------------------------------------------- cache and stopping


def test_cached_logits_equal_a_full_recompute() -> None:
    model = small_model(scale=3.0)
    ids = np.random.default_rng(4).integers(0, 32, size=20)
    cache = model.new_cache(1)
    incremental = [model.forward_cached(ids[None, :5], cache)[0]]  # prompt of 5 at once
    for t in range(5, 20):
        incremental.append(model.forward_cached(ids[None, t : t + 1], cache)[0])
    incremental = np.concatenate(incremental)  # (20, V)
    assert np.abs(incremental - model.forward(ids)).max() <= 1e-5


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(strategy="greedy"),
        dict(strategy="sample", seed=3, temperature=1.2, top_p=0.9),
        dict(strategy="beam", num_beams=3, eos_token_id=4),
    ],
)
def test_cache_and_no_cache_give_the_same_tokens(model: GPT, kwargs) -> None:
    with_cache = generate(model, [7, 8, 9], 12, use_cache=True, **kwargs)
    without = generate(model, [7, 8, 9], 12, use_cache=False, **kwargs)
    assert with_cache.tokens.tolist() == without.tokens.tolist()
    for a, b in zip(with_cache.steps, without.steps, strict=True):
        np.testing.assert_allclose(
            a.processed.logits, b.processed.logits, atol=1e-4
        )  # big weights: float32 noise ~1e-5


def test_stop_reasons(model: GPT) -> None:
    free = generate(model, [1], 6)
    assert free.stop_reason == "max_new_tokens" and len(free.tokens) == 6
    eos = int(free.tokens[2])  # the third new token: make it the end-of-text token
    stopped = generate(model, [1], 6, eos_token_id=eos)
    assert stopped.stop_reason == "eos"
    assert stopped.tokens[-1] == eos and eos not in stopped.tokens[:-1].tolist()
    full = generate(model, np.zeros(20, dtype=int), 10)  # context 24: 4 tokens of room
    assert full.stop_reason == "context_full" and len(full.all_ids) == 24
    exact = generate(model, np.zeros(20, dtype=int), 4)  # fills the context exactly as asked
    assert exact.stop_reason == "max_new_tokens"
    none = generate(model, [1, 2], 0)
    assert none.tokens.tolist() == [] and none.all_ids.tolist() == [1, 2]
    beam_full = generate(model, np.zeros(20, dtype=int), 10, strategy="beam", num_beams=2)
    assert beam_full.stop_reason == "context_full" and len(beam_full.tokens) == 4


def test_record_steps_false_keeps_only_the_choices(model: GPT) -> None:
    light = generate(model, [1], 5, strategy="sample", seed=0, record_steps=False)
    full = generate(model, [1], 5, strategy="sample", seed=0)
    assert light.tokens.tolist() == full.tokens.tolist()
    assert all(s.processed is None and s.cumulative is None for s in light.steps)


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (([], 5), {}, "non-empty"),
        (([[1, 2]], 5), {}, "1-D"),
        (([1.5], 5), {}, "integers"),
        (([99], 5), {}, "vocabulary"),
        ((list(range(25)), 5), {}, "at most 24"),
        (([1], -1), {}, "max_new_tokens"),
        (([1], 5), {"strategy": "nucleus"}, "strategy"),
        (([1], 5), {"strategy": "beam", "num_beams": 0}, "num_beams"),
        (([1], 5), {"eos_token_id": 32}, "eos_token_id"),
        (([1], 5), {"early_stopping": "sometimes"}, "early_stopping"),
        (([1], 5), {"strategy": "sample", "temperature": -1}, "temperature"),
        (([1], 5), {"strategy": "sample", "top_p": 0}, "top_p"),
    ],
)
def test_generate_rejects_bad_arguments(model: GPT, args, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        generate(model, *args, **kwargs)


def test_generate_from_a_prompt_read_once_gives_the_same_tokens_and_leaves_it_unchanged():
    from tinygpt.decoding.generation import read_prompt
    from tinygpt.network.model import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=64, n_ctx=48, n_embd=16, n_head=2, n_layer=2), seed=2)
    ids = np.arange(10)
    prompt = read_prompt(model, ids)
    keys = [k.copy() for k in prompt.cache.keys]
    for options in ({"strategy": "greedy"}, {"strategy": "sample", "seed": 3, "top_p": 0.9},
                    {"strategy": "beam", "num_beams": 3}):
        alone = generate(model, ids, 12, **options)
        shared = generate(model, ids, 12, prompt=prompt, **options)
        np.testing.assert_array_equal(shared.all_ids, alone.all_ids)
    for before, after in zip(keys, prompt.cache.keys, strict=True):
        np.testing.assert_array_equal(before, after)
    with pytest.raises(ValueError, match="same ids"):
        generate(model, ids[:-1], 3, prompt=prompt)


def test_continuation_logits_are_the_rows_of_a_full_forward(model) -> None:
    from tinygpt.decoding.generation import continuation_logits, read_prompt

    ids = np.array([3, 1, 4, 1, 5])
    new = np.array([9, 2, 6, 5])
    full = model.forward(np.concatenate([ids, new]))  # (9, V)
    rows = continuation_logits(model, read_prompt(model, ids), new)
    np.testing.assert_allclose(rows, full[len(ids) - 1:-1], rtol=1e-4, atol=1e-4)
    assert continuation_logits(model, read_prompt(model, ids), new[:1]).shape == (1, 32)
    assert continuation_logits(model, read_prompt(model, ids), new[:0]).shape == (0, 32)


def test_a_generation_keeps_room_for_its_own_tokens_only():
    """Rows copied from the prompt's cache hold the prompt and the new tokens, not the whole
    context: on GPT-2 small a full-context row is 75 MB of keys and values. (One row read here
    goes on in the buffer it was read in: no copy at all.)"""
    model = GPT(GPTConfig(vocab_size=40, n_ctx=64, n_embd=16, n_head=2, n_layer=2), seed=0)
    caches = []
    real = model.forward_cached

    def spy(new_ids, cache, **options):
        caches.append(cache)
        return real(new_ids, cache, **options)

    model.forward_cached = spy
    ids = np.arange(5)
    for kwargs in (dict(strategy="beam", num_beams=3), dict(prompt=read_prompt(model, ids)),
                   dict(strategy="sample", seed=1, prompt=read_prompt(model, ids))):
        caches.clear()
        result = generate(model, ids, 6, **kwargs)
        assert len(result.tokens) == 6
        assert caches[-1].capacity == len(ids) + 6


def test_a_generation_on_a_long_context_allocates_only_what_it_needs(monkeypatch):
    """A model with a context of 8,192 (SmolLM2's) and grouped-query attention: generate,
    reading the prompt itself, makes key/value buffers for the prompt and the new tokens only
    (on SmolLM2 a full-context row is 377 MB). Counted: the bytes of every buffer made."""
    from tinygpt.network import kv_cache

    config = GPTConfig(vocab_size=50, n_ctx=8192, n_embd=16, n_head=4, n_kv_head=2, n_layer=2,
                       mlp="swiglu", norm="rmsnorm", position="rope")
    model = GPT(config, seed=0)
    per_token = 2 * config.n_layer * config.kv_heads * config.head_size * 4  # float32: 512 B
    made = []
    init, copy_rows = kv_cache.KVCache.__init__, kv_cache._copy_rows

    def counted_init(cache, *args, **kwargs):
        init(cache, *args, **kwargs)
        made.append(sum(a.nbytes for a in cache.keys + cache.values))

    def counted_copy(*args):
        new = copy_rows(*args)
        made.append(new.nbytes)
        return new

    monkeypatch.setattr(kv_cache.KVCache, "__init__", counted_init)
    monkeypatch.setattr(kv_cache, "_copy_rows", counted_copy)
    ids = np.arange(7)
    for options, expected in (({}, (7 + 5) * per_token),  # read in its own row's room
                              ({"strategy": "sample", "seed": 0}, (7 + 5) * per_token),
                              # read once (7), then 3 rows of 7 + 5
                              ({"strategy": "beam", "num_beams": 3}, (7 + 3 * 12) * per_token)):
        made.clear()
        result = generate(model, ids, 5, **options)
        assert len(result.tokens) == 5
        assert sum(made) == expected, options
