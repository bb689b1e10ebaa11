"""The pages' readouts on a Llama/Qwen2-shaped model (RMSNorm, rotary positions, grouped-query
attention, SwiGLU), each against an independent computation: the logit lens's last stage is
the model's own output, occlusion equals separate forwards of the shortened prompts, surprise
equals -log p of the model's own logits, the top tokens equal a full sort."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.test_attribution import modern_model
from tinygpt import occlusion, surprise
from tinygpt.network.functional import log_softmax
from tinygpt.readouts import forward_pass as fp

IDS = np.array([3, 17, 5, 41, 8, 22, 9, 30, 2, 11])


@pytest.fixture(scope="module")
def model():
    return modern_model(np.float64)


def test_the_lens_last_stage_is_the_models_prediction(model):
    logits, trace = model.run_with_trace(IDS)
    lens = fp.logit_lens(model, trace, k=3, sublayers=True)
    assert lens.ids.shape[:2] == (2 * model.config.n_layer + 1, len(IDS))
    np.testing.assert_array_equal(lens.ids[-1, :, 0], logits.argmax(-1))
    p = np.exp(log_softmax(logits, axis=-1))
    np.testing.assert_allclose(lens.probs[-1, :, 0], p.max(-1), rtol=1e-5)


def test_occlusion_equals_separate_forwards(model):
    position = 7
    result = occlusion(model, IDS, position)
    for i, removed in enumerate(result.removed):
        shortened = np.delete(IDS[: position + 1], removed)
        p = np.exp(log_softmax(model.forward(shortened)[-1], axis=-1))
        assert result.probs[i] == pytest.approx(p[result.token], rel=1e-5, abs=1e-9)


def test_surprise_is_minus_log_p_of_each_next_token(model):
    expected = -log_softmax(model.forward(IDS), axis=-1)[np.arange(len(IDS) - 1), IDS[1:]]
    np.testing.assert_allclose(surprise(model, IDS), expected, rtol=1e-6)


def test_top_tokens_equal_a_full_sort(model):
    logits = model.forward(IDS)
    top = fp.top_tokens(logits, IDS, k=5)
    np.testing.assert_array_equal(top.ids, np.argsort(-logits, axis=-1, kind="stable")[:, :5])
