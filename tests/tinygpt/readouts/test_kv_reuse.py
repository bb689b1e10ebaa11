"""tinygpt.readouts.kv_reuse: the numbers it reports are what the real KVCache does during
generate."""

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, generate, kv_cache_reuse
from tinygpt.readouts.kv_reuse import forward_multiply_adds, work_saved

CFG = GPTConfig(vocab_size=40, n_ctx=16, n_embd=12, n_head=3, n_layer=2)


@pytest.fixture(scope="module")
def model() -> GPT:
    return GPT(CFG, seed=0)


class CacheRecorder:
    """The model, passed to generate, noting each cached forward: tokens in, cache length
    before and after, and a copy of layer 0's keys before the step."""

    def __init__(self, model: GPT) -> None:
        self.model, self.config, self.calls = model, model.config, []

    def new_cache(self, batch_size: int = 1):
        self.cache = self.model.new_cache(batch_size)
        return self.cache

    def forward(self, ids):
        raise AssertionError("with use_cache=True generate must not recompute")

    def forward_cached(self, new_ids, cache, *, last_only: bool = False):
        before, keys_before = cache.length, cache.keys[0].copy()
        logits = self.model.forward_cached(new_ids, cache, last_only=last_only)
        self.calls.append((np.asarray(new_ids).shape[1], before, cache.length, keys_before))
        return logits


@pytest.mark.parametrize("prompt_length, new_tokens", [(5, 6), (1, 4), (10, 20), (16, 3)])
def test_matches_the_real_cache_during_generate(model, prompt_length, new_tokens):
    ids = np.arange(prompt_length) % CFG.vocab_size
    recorder = CacheRecorder(model)
    result = generate(recorder, ids, new_tokens, use_cache=True)
    r = kv_cache_reuse(model, prompt_length, new_tokens)
    tokens_in = [c[0] for c in recorder.calls]
    assert len(r.tokens_in) == len(recorder.calls) == len(result.tokens)
    np.testing.assert_array_equal(r.tokens_in, tokens_in)
    np.testing.assert_array_equal(r.computed, tokens_in)
    np.testing.assert_array_equal(r.reused, [c[1] for c in recorder.calls])
    np.testing.assert_array_equal(r.cache_length, [c[2] for c in recorder.calls])
    assert r.stopped_at_context == (result.stop_reason == "context_full")
    if not recorder.calls:
        return
    cache = recorder.cache
    assert r.bytes_allocated == sum(a.nbytes for a in cache.keys + cache.values)
    filled = slice(0, cache.length)
    assert r.bytes_held[-1] == sum(a[:, :, filled].nbytes for a in cache.keys + cache.values)
    np.testing.assert_array_equal(r.bytes_computed + r.bytes_reused, r.bytes_held)


def test_reused_keys_are_untouched_and_new_keys_are_the_full_forwards(model):
    """Reused positions keep their keys bit for bit; the new ones equal a full forward's."""
    prompt_length = 6
    recorder = CacheRecorder(model)
    result = generate(recorder, np.arange(prompt_length), 5, use_cache=True)
    _, trace = model.run_with_trace(result.all_ids[:-1])  # every token fed to the model
    full_keys = trace["blocks.0.attn.k"]  # (H, T, hs)
    r = kv_cache_reuse(model, prompt_length, 5)
    keys_after = [c[3] for c in recorder.calls[1:]] + [recorder.cache.keys[0]]
    for step, (_, _, _, keys_before) in enumerate(recorder.calls):
        old = slice(0, r.reused[step])
        new = slice(r.reused[step], r.cache_length[step])
        after = keys_after[step]
        np.testing.assert_array_equal(after[:, :, old], keys_before[:, :, old])
        np.testing.assert_allclose(after[0, :, new], full_keys[:, new], atol=1e-6)
        assert not keys_before[:, :, new].any()  # computed in this step: empty before it


def test_multiply_adds_by_hand():
    """C=12, L=2, V=40. Feeding t tokens against T_k keys: per layer 12 t C^2 + 2 t T_k C."""
    cfg = CFG
    r = kv_cache_reuse(GPT(cfg, init=False), 3, 3)
    # step 0: the prompt, 3 tokens, 3 keys
    step0 = 2 * (12 * 3 * 144 + 2 * 3 * 3 * 12) + 3 * 12 * 40
    # step 1 with the cache: 1 token against 4 keys; without: 4 tokens against 4 keys
    step1_cached = 2 * (12 * 1 * 144 + 2 * 1 * 4 * 12) + 1 * 12 * 40
    step1_recompute = 2 * (12 * 4 * 144 + 2 * 4 * 4 * 12) + 4 * 12 * 40
    assert r.multiply_adds_cached[:2].tolist() == [step0, step1_cached]
    assert r.multiply_adds_recompute[:2].tolist() == [step0, step1_recompute]
    assert (r.multiply_adds_recompute[1:] > r.multiply_adds_cached[1:]).all()
    assert forward_multiply_adds(cfg, np.array([1]), np.array([1])).dtype == np.int64


def test_bytes_follow_the_dtype():
    r32 = kv_cache_reuse(GPT(CFG, init=False), 4, 2)
    r64 = kv_cache_reuse(GPT(CFG, init=False, dtype=np.float64), 4, 2)
    assert r32.bytes_per_position == 2 * 12 * 4
    assert r64.bytes_per_position == 2 * r32.bytes_per_position
    assert r32.bytes_allocated == 16 * 2 * r32.bytes_per_position  # n_ctx x layers x per position


@pytest.mark.parametrize(
    "prompt_length, new_tokens, message",
    [(0, 3, "prompt_length"), (17, 3, "context"), (4, -1, "new_tokens"), (True, 3, "integer")],
)
def test_bad_arguments(model, prompt_length, new_tokens, message):
    with pytest.raises(ValueError, match=message):
        kv_cache_reuse(model, prompt_length, new_tokens)


def test_work_saved_totals_the_steps(model):
    reuse = kv_cache_reuse(model, 5, 7)
    saved = work_saved(reuse)
    assert saved.cached == sum(int(m) for m in reuse.multiply_adds_cached)
    assert saved.recompute == sum(int(m) for m in reuse.multiply_adds_recompute)
    assert saved.ratio == saved.recompute / saved.cached > 1
    assert work_saved(kv_cache_reuse(model, 5, 0)).ratio == 1.0
