"""tinygpt.readouts.kv_reuse: the numbers it reports are what the real KVCache does during
generate."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, generate, kv_cache_reuse
from tinygpt.checkpoint.files import load
from tinygpt.decoding.generation import read_prompt
from tinygpt.fast import parts
from tinygpt.kernels import blocked_attention
from tinygpt.network import attention, kv_cache, layers, mlp
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

    def new_cache(self, batch_size: int = 1, capacity: int | None = None):
        self.cache = self.model.new_cache(batch_size, capacity=capacity)
        return self.cache

    def forward(self, ids):
        raise AssertionError("with use_cache=True generate must not recompute")

    def forward_cached(self, new_ids, cache, **options):
        before, keys_before = cache.length, cache.keys[0].copy()
        logits = self.model.forward_cached(new_ids, cache, **options)
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
    # step 0: the prompt, 3 tokens, 3 keys; the prompt read reads out its last position only,
    # running everything reads out all 3
    blocks0 = 2 * (12 * 3 * 144 + 2 * 3 * 3 * 12)
    # step 1 with the cache: 1 token against 4 keys; without: 4 tokens against 4 keys
    step1_cached = 2 * (12 * 1 * 144 + 2 * 1 * 4 * 12) + 1 * 12 * 40
    step1_recompute = 2 * (12 * 4 * 144 + 2 * 4 * 4 * 12) + 4 * 12 * 40
    assert r.multiply_adds_cached[:2].tolist() == [blocks0 + 1 * 12 * 40, step1_cached]
    assert r.multiply_adds_recompute[:2].tolist() == [blocks0 + 3 * 12 * 40, step1_recompute]
    assert (r.multiply_adds_recompute[1:] > r.multiply_adds_cached[1:]).all()
    assert forward_multiply_adds(cfg, np.array([1]), np.array([1])).dtype == np.int64


def test_bytes_follow_the_dtype():
    r32 = kv_cache_reuse(GPT(CFG, init=False), 4, 2)
    r64 = kv_cache_reuse(GPT(CFG, init=False, dtype=np.float64), 4, 2)
    assert r32.bytes_per_position == 2 * 12 * 4
    assert r64.bytes_per_position == 2 * r32.bytes_per_position
    # the prompt read (4 positions) and one row of room for 4 + 2 positions, 2 layers each
    assert r32.bytes_allocated == (4 + 6) * 2 * r32.bytes_per_position


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


# ----------------------------------------------------------------------------- the app's runs
# Issue 27: the view charged the prompt read the output layer for every prompt position (it
# reads out the last one only) and one full-context buffer per run (the app's runs allocate the
# prompt read's n positions and one row of n + k in the shared table). Checked here against a
# count of what a real run computes and allocates: the matrix products through
# tinygpt.network.layers.linear, the attention pairs through the softmax (by blocks: the
# exponentials) they go into, and the bytes of every KVCache buffer made.

SHIPPED = Path(__file__).resolve().parents[3] / "models" / "shakespeare.npz"
# GPT-2 small's widths, context and vocabulary; one block (the count is the same per block)
GPT2_SHAPE = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=1)


class Counter:
    """Multiply-adds of the products a forward runs, and the bytes of the caches it makes."""

    def __init__(self, monkeypatch, config) -> None:
        self.multiply_adds = self.bytes = 0
        head_size = config.n_embd // config.n_head
        linear, softmax = layers.linear, attention.softmax  # the one function, imported thrice
        exp_of_block = blocked_attention._exp_of_block  # attention by blocks: exp, then @ v, divide
        init, copy_rows = kv_cache.KVCache.__init__, kv_cache._copy_rows

        def counted_linear(x, W, b=None):
            self.multiply_adds += x.size // x.shape[-1] * W.shape[0] * W.shape[1]
            return linear(x, W, b)

        def counted_softmax(w, axis=-1, *, out=None):  # w (B, H, queries, keys): the pairs
            self.multiply_adds += 2 * w.size * head_size  # q . k and weights @ v
            return softmax(w, axis=axis, out=out)

        def counted_exp_of_block(block_scores):
            e, total = exp_of_block(block_scores)  # e (B, H, queries, keys): the pairs
            self.multiply_adds += 2 * e.size * head_size
            return e, total

        def counted_init(cache, *args, **kwargs):
            init(cache, *args, **kwargs)
            self.bytes += sum(a.nbytes for a in cache.keys + cache.values)

        def counted_copy(*args):
            new = copy_rows(*args)
            self.bytes += new.nbytes
            return new

        # where the products are made: attention (q, k, v, projection; a shared step's
        # projection in tinygpt.fast.parts), the feed-forward (GELU or SwiGLU), the output layer
        for module in (attention, mlp, layers, parts):
            monkeypatch.setattr(module, "linear", counted_linear)
        monkeypatch.setattr(attention, "softmax", counted_softmax)
        monkeypatch.setattr(blocked_attention, "_exp_of_block", counted_exp_of_block)
        monkeypatch.setattr(kv_cache.KVCache, "__init__", counted_init)
        monkeypatch.setattr(kv_cache, "_copy_rows", counted_copy)


def app_run(model, ids, new: int):
    """A greedy run as the Decoding page makes it for one user: the prompt read, then the run
    on a copy of its keys and values (a class server steps many runs in one table:
    tests/tinygpt_hosting/steps/test_lockstep.py counts that one)."""
    prompt = read_prompt(model, ids)
    return generate(model, ids, new, "greedy", record_steps=False, prompt=prompt)


def check_against_a_count(model, prompt_length: int, new: int, monkeypatch) -> None:
    ids = (np.arange(prompt_length) * 7) % model.config.vocab_size
    r = kv_cache_reuse(model, prompt_length, new)
    with monkeypatch.context() as patch:
        cached = Counter(patch, model.config)
        made = app_run(model, ids, new)
    assert len(made.tokens) == len(r.computed) == new
    assert cached.multiply_adds == work_saved(r).cached
    assert cached.bytes == r.bytes_allocated == r.bytes_prompt_read + r.bytes_per_row
    with monkeypatch.context() as patch:
        again = Counter(patch, model.config)
        generate(model, ids, new, use_cache=False, record_steps=False)
    assert again.multiply_adds == work_saved(r).recompute


@pytest.mark.skipif(not SHIPPED.exists(), reason="the shipped model is not in models/")
@pytest.mark.parametrize("prompt_length", [1, 12, 60, 129])
def test_shipped_model_numbers_match_a_count_of_a_real_run(prompt_length, monkeypatch):
    model, _ = load(SHIPPED)
    check_against_a_count(model, prompt_length, 20, monkeypatch)


def test_shipped_model_numbers_of_the_issue():
    """Prompt 12, 20 new: 15.2 times less work (13.9 was shown), 98,304 B for the prompt read
    and 262,144 B per row of the table (2,097,152 B, a full context, was shown)."""
    cfg = GPTConfig(vocab_size=4096, n_ctx=256, n_embd=256, n_head=4, n_layer=4)
    r = kv_cache_reuse(GPT(cfg, init=False), 12, 20)
    assert round(work_saved(r).ratio, 1) == 15.2
    assert (r.bytes_prompt_read, r.bytes_per_row) == (98_304, 262_144)
    gpt2 = GPTConfig(vocab_size=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)
    assert round(work_saved(kv_cache_reuse(GPT(gpt2, init=False), 100, 40)).ratio, 1) == 44.1


@pytest.mark.parametrize("prompt_length, new", [(1, 3), (100, 4), (200, 2)])
def test_gpt2_shape_numbers_match_a_count_of_a_real_run(prompt_length, new, monkeypatch):
    check_against_a_count(GPT(GPT2_SHAPE, seed=0), prompt_length, new, monkeypatch)


def test_asked_sets_the_tables_room(model):
    r = kv_cache_reuse(model, 4, 2, asked=5)
    assert r.bytes_per_row == (4 + 5) * r.n_layer * r.bytes_per_position
    with pytest.raises(ValueError, match="asked"):
        kv_cache_reuse(model, 4, 2, asked=1)  # fewer asked than made


# ----------------------------------------------------------------------------- Llama, Qwen2 shapes
# Issue 29: the view counted 2 C bytes per position and layer (3x a SmolLM2's cache: 3 query
# heads share each key/value head) and GPT-2's products (fused 3C q/k/v, a 4C GELU MLP).

# Llama-shaped: 8 query heads on 2 key/value heads, SwiGLU of width 176, RMSNorm, rotary
# positions, no biases, an untied output layer; a context long enough for attention by blocks
LLAMA_GQA = GPTConfig(vocab_size=300, n_ctx=512, n_embd=64, n_head=8, n_kv_head=2, n_layer=4,
                      mlp="swiglu", n_inner=176, norm="rmsnorm", position="rope",
                      tie_weights=False, attn_bias=False, proj_bias=False, mlp_bias=False)
# multi-query: one key/value head for all 8, with Qwen2's q/k/v biases and a tied output
QWEN_MQA = replace(LLAMA_GQA, n_kv_head=1, attn_bias=True, tie_weights=True, n_layer=2)


@pytest.mark.parametrize("config", [LLAMA_GQA, QWEN_MQA], ids=["gqa", "mqa"])
@pytest.mark.parametrize("prompt_length, new", [(1, 4), (12, 6), (129, 3), (300, 2)])
def test_grouped_query_numbers_match_a_count_of_a_real_run(config, prompt_length, new,
                                                           monkeypatch):
    check_against_a_count(GPT(config, seed=1), prompt_length, new, monkeypatch)


def test_grouped_query_multiply_adds_by_hand():
    """C=64, KV hs = 16 (2 heads of 8), I=176, L=4, V=300: one token against 5 keys."""
    r = kv_cache_reuse(GPT(LLAMA_GQA, init=False), 4, 2)
    per_token = 64 * 64 + 2 * 64 * 16 + 64 * 64 + 3 * 64 * 176  # q, k + v, projection, SwiGLU
    assert r.multiply_adds_cached[1] == 4 * (per_token + 2 * 64 * 5) + 64 * 300


@pytest.mark.parametrize("config", [CFG, LLAMA_GQA, QWEN_MQA], ids=["gpt2", "gqa", "mqa"])
def test_bytes_per_token_both_ways_are_kv_cache_buffers(config):
    """This model's cache per token, and the same model's with one key/value head per query
    head: the bytes of real KVCache buffers of one position, built both ways."""
    def one_position(cfg) -> int:
        cache = kv_cache.KVCache(cfg, 1, np.float32, capacity=1)
        return sum(a.nbytes for a in cache.keys + cache.values)

    r = kv_cache_reuse(GPT(config, init=False), 3, 2)
    assert r.bytes_per_token == one_position(config) == r.n_layer * r.bytes_per_position
    one_kv_per_query = replace(config, n_kv_head=config.n_head)
    assert r.bytes_per_token_one_kv_per_query == one_position(one_kv_per_query)
    assert r.bytes_per_token_one_kv_per_query == r.bytes_per_token * config.group_size
    assert r.kv_heads == config.kv_heads
