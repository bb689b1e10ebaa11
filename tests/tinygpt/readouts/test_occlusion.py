"""tinygpt.readouts.occlusion: the batched shortcut equals a separate forward of every shortened
prompt."""

import math
import tracemalloc

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, occlusion
from tinygpt.readouts.occlusion import last_position_logits, occlusion_variants, rows_per_slice

CFG = GPTConfig(vocab_size=70, n_ctx=32, n_embd=16, n_head=2, n_layer=2, output_bias=True)
IDS = np.random.default_rng(5).integers(0, CFG.vocab_size, 20)


def make_model(dtype=np.float32) -> GPT:
    model = GPT(CFG, seed=1, dtype=np.float64)
    rng = np.random.default_rng(2)
    for p in model.parameters().values():
        p += rng.standard_normal(p.shape) * 0.3  # confident predictions, LayerNorms not 1 / 0
    return model.astype(dtype)


@pytest.fixture(scope="module")
def model() -> GPT:
    return make_model()


def softmax64(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits.astype(np.float64) - logits.max())
    return z / z.sum()


def separate_forwards(model: GPT, ids: np.ndarray, position: int, token: int):
    """Reference: each shortened prompt run on its own through model.forward."""
    base = softmax64(model.forward(ids[: position + 1])[-1])
    probs, kls = [], []
    for i in range(position + 1):
        shortened = np.delete(ids[: position + 1], i)  # one token shorter
        q = softmax64(model.forward(shortened)[-1])
        probs.append(q[token])
        kls.append(sum(p * math.log2(p / qq) for p, qq in zip(base, q, strict=True) if p > 0))
    return base, np.array(probs), np.array(kls)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("position", [1, 9, 19])
def test_equals_separate_forwards(position, dtype):
    model = make_model(dtype)
    o = occlusion(model, IDS, position)
    base, probs, kls = separate_forwards(model, IDS, position, o.token)
    assert o.token == int(np.argmax(base))  # the default: the unchanged prompt's top choice
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert o.base_prob == pytest.approx(base[o.token], abs=tol)
    np.testing.assert_array_equal(o.removed, np.arange(position + 1))
    np.testing.assert_allclose(o.probs, probs, rtol=0, atol=tol)
    np.testing.assert_allclose(o.change, probs - base[o.token], rtol=0, atol=tol)
    np.testing.assert_allclose(o.kl_bits, kls, rtol=1e-4, atol=1e-5)  # float32 bits
    assert o.not_scored == 0 and o.position == position
    assert np.ptp(o.probs) > 1e-3  # removing different tokens really changes the prediction


@pytest.mark.parametrize("position", [1, 9, 19])
def test_the_prompts_logits_from_a_full_forward_stand_for_the_base_run(model, position):
    """A page hands occlusion the trace's row of the whole prompt (a forward of all 20 tokens)
    instead of a forward of the first position + 1: the same result, to float rounding."""
    logits = model.forward(IDS)  # (T, V): the whole prompt, later tokens included
    given = occlusion(model, IDS, position, token=3, base_logits=logits[position])
    ran = occlusion(model, IDS, position, token=3)
    base, probs, _ = separate_forwards(model, IDS, position, 3)
    assert given.base_prob == pytest.approx(ran.base_prob, abs=1e-6)
    assert given.base_prob == pytest.approx(base[3], abs=1e-5)
    np.testing.assert_allclose(given.probs, probs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(given.kl_bits, ran.kl_bits, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="base_logits"):
        occlusion(model, IDS, position, base_logits=logits[position, :5])


def test_a_chosen_token_and_later_tokens_play_no_part(model):
    o = occlusion(model, IDS, 7, token=3)
    _, probs, _ = separate_forwards(model, IDS, 7, 3)
    assert o.token == 3
    np.testing.assert_allclose(o.probs, probs, rtol=0, atol=1e-5)
    later_changed = IDS.copy()
    later_changed[8:] = (later_changed[8:] + 1) % CFG.vocab_size
    np.testing.assert_array_equal(occlusion(model, later_changed, 7, token=3).probs, o.probs)


def test_one_batched_forward_of_the_n_variants(model, monkeypatch):
    """Each block runs twice: the unchanged prompt (1, n), then all n variants (n, n - 1)."""
    shapes = []
    block = model.blocks[0]
    original = block.forward

    def spy(x, *args, **kwargs):
        shapes.append(x.shape[:2])
        return original(x, *args, **kwargs)

    monkeypatch.setattr(block, "forward", spy)
    occlusion(model, IDS, 12)
    assert shapes == [(1, 13), (13, 12)]


def test_slices_give_the_same_numbers_and_bound_memory():
    model = make_model()
    ids = np.random.default_rng(3).integers(0, CFG.vocab_size, CFG.n_ctx)
    whole = occlusion(model, ids, CFG.n_ctx - 1, max_bytes=2**40)
    peaks = {}
    for max_bytes in (2**40, 1):  # everything in one slice; one row per slice
        tracemalloc.start()
        sliced = occlusion(model, ids, CFG.n_ctx - 1, max_bytes=max_bytes)
        peaks[max_bytes] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        np.testing.assert_allclose(sliced.probs, whole.probs, rtol=0, atol=1e-6)
        np.testing.assert_allclose(sliced.kl_bits, whole.kl_bits, rtol=1e-5, atol=1e-6)
    assert peaks[1] < peaks[2**40] / 4
    assert rows_per_slice(CFG, 31, 4, max_bytes=1) == 1


def test_cap_keeps_the_nearest_tokens(model):
    full = occlusion(model, IDS, 15)
    capped = occlusion(model, IDS, 15, max_tokens=4)
    np.testing.assert_array_equal(capped.removed, [12, 13, 14, 15])
    assert capped.not_scored == 12
    np.testing.assert_allclose(capped.probs, full.probs[12:], rtol=0, atol=1e-6)
    assert capped.token == full.token and capped.base_prob == full.base_prob


def test_variants_are_the_prompt_without_one_token():
    prompt = np.array([10, 11, 12, 13, 14])
    removed = np.arange(5)
    expected = np.stack([np.delete(prompt, i) for i in removed])
    np.testing.assert_array_equal(occlusion_variants(prompt, removed), expected)


def test_last_position_logits_equal_the_forward(model):
    batch = np.random.default_rng(4).integers(0, CFG.vocab_size, (5, 9))
    np.testing.assert_allclose(
        last_position_logits(model, batch, max_bytes=1), model.forward(batch)[:, -1],
        rtol=1e-5, atol=1e-5,  # float32: one sequence at a time vs a batch sums in another order
    )


@pytest.mark.parametrize(
    "position, token, kwargs, message",
    [
        (0, None, {}, "position >= 1"),
        (20, None, {}, "position must be in"),
        (3, 70, {}, "token id must be in"),
        (3, None, {"max_tokens": 0}, "max_tokens"),
    ],
)
def test_bad_arguments(model, position, token, kwargs, message):
    with pytest.raises(ValueError, match=message):
        occlusion(model, IDS, position, token, **kwargs)


def test_occlusion_cost_counts_the_shortened_prompts():
    from tinygpt.readouts.occlusion import occlusion_cost

    model = GPT(GPTConfig(vocab_size=50, n_ctx=32, n_embd=16, n_head=2, n_layer=1), seed=0)
    p = model.num_parameters()
    assert occlusion_cost(model, 9) == 10 * 9 * p  # 10 prompts of 9 tokens
    assert occlusion_cost(model, 9, max_tokens=4) == 4 * 9 * p
