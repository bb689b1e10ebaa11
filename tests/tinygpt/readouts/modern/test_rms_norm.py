"""RMSNorm's readout against numbers recomputed by hand from the trace's input."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.modern_models import GPT2, LLAMA, prompt, random_model
from tinygpt.readouts.modern.rms_norm import layer_norm_instead, rms_norm_statistics


@pytest.fixture(scope="module")
def traced():
    model = random_model(LLAMA, np.float32)
    _, trace = model.run_with_trace(prompt())
    return model, trace


@pytest.mark.parametrize("name", ["blocks.0.ln1", "blocks.1.ln2", "ln_f"])
def test_the_rms_is_the_root_mean_square_of_the_input(traced, name):
    model, trace = traced
    stats = rms_norm_statistics(model, trace, name)
    x = trace[f"{name}.input"].astype(np.float64)  # (T, C)
    by_hand = np.array([np.sqrt(sum(v * v for v in row) / len(row) + stats.eps) for row in x])
    np.testing.assert_allclose(stats.rms, by_hand, rtol=1e-5)
    # and it is what the model divided by: x / rms * gamma is the norm's output
    np.testing.assert_allclose(x / by_hand[:, None] * stats.gamma, trace[f"{name}.output"],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats.mean, [sum(row) / len(row) for row in x], atol=1e-6)


def test_layer_norm_instead_centres_and_scales_the_same_vector(traced):
    model, trace = traced
    stats = rms_norm_statistics(model, trace, "blocks.0.ln1")
    x = trace["blocks.0.ln1.input"][3].astype(np.float64)
    instead = layer_norm_instead(x, stats.eps)
    mu = sum(x) / len(x)
    sigma2 = sum((v - mu) ** 2 for v in x) / len(x)
    np.testing.assert_allclose(instead, (x - mu) / np.sqrt(sigma2 + stats.eps), rtol=1e-10)
    assert stats.layer_norm_denominator[3] == pytest.approx(np.sqrt(sigma2 + stats.eps))
    assert abs(instead.mean()) < 1e-12 and not np.allclose(instead, x / stats.rms[3])


def test_a_layer_norm_is_refused_with_its_kind():
    model = random_model(GPT2)
    _, trace = model.run_with_trace(prompt())
    with pytest.raises(ValueError, match="is a LayerNorm"):
        rms_norm_statistics(model, trace, "ln_f")
