"""The batched readouts the app caches once per trace, against the one-at-a-time readouts:
the logit lens as one product over all stages, and top_tokens / top_columns from one softmax."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt import readouts as ti
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.readouts import forward_pass


@pytest.fixture(scope="module")
def run():
    model = GPT(GPTConfig(vocab_size=300, n_ctx=64, n_embd=32, n_head=2, n_layer=3), seed=0)
    ids = np.random.default_rng(1).integers(0, 300, 40)
    logits, trace = model.run_with_trace(ids)
    return model, ids, logits, trace


@pytest.mark.parametrize("sublayers", [False, True])
def test_logit_lens_matches_stage_by_stage(run, sublayers, monkeypatch):
    model, _, _, trace = run
    monkeypatch.setattr(forward_pass, "LENS_ROWS_PER_PRODUCT", 7)  # several chunks
    positions = [3, 5, 7, 39]
    lens = ti.logit_lens(model, trace, k=3, sublayers=sublayers, positions=positions)
    for s, (_, name) in enumerate(ti.residual_stages(model.config.n_layer, sublayers)):
        logits = model.readout(trace[name][positions])
        ids, probs = ti.top_k(logits, 3)
        np.testing.assert_array_equal(lens.ids[s], ids)
        np.testing.assert_allclose(lens.probs[s], probs, rtol=1e-6)
        np.testing.assert_allclose(lens.entropy[s], ti.entropy(ti.probabilities(logits)),
                                   rtol=1e-5)


def test_top_tokens_and_columns_match_top_k_and_shift(run):
    _, ids, logits, _ = run
    top = ti.top_tokens(logits, ids, 10)
    ref_ids, ref_probs = ti.top_k(logits, 10)
    np.testing.assert_array_equal(top.ids, ref_ids)
    np.testing.assert_allclose(top.probs, ref_probs, rtol=1e-6)
    shift = ti.shift_by_one(logits, ids)
    np.testing.assert_allclose(top.shift.logprobs, shift.logprobs, rtol=1e-6)
    np.testing.assert_array_equal(top.shift.hits, shift.hits)
    np.testing.assert_array_equal(top.shift.guesses, shift.guesses)
    for k in (1, 4, 10):
        for most in (None, 5, 100):
            np.testing.assert_array_equal(ti.top_columns(top.ids, k, most),
                                          ti.vocab_columns(logits, k, most))
