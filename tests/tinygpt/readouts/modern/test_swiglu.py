"""SwiGLU's parts for one token, against the trace and a feed-forward computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.modern_models import GPT2, LLAMA, QWEN2, prompt, random_model
from tinygpt.readouts.modern.swiglu import swiglu_parts, top_products


@pytest.mark.parametrize("shape", [LLAMA, {**QWEN2, "mlp_bias": True}], ids=["llama", "bias"])
def test_gate_times_up_through_down_is_the_mlp_output(shape):
    model = random_model(shape, np.float32)
    _, trace = model.run_with_trace(prompt())
    ffn = model.blocks[1].ffn
    parts = swiglu_parts(model, trace, 1, 7)
    x = trace["blocks.1.ln2.output"][7].astype(np.float64)  # what the feed-forward reads
    gate = x @ ffn.W_gate + (0 if ffn.b_gate is None else ffn.b_gate)
    up = x @ ffn.W_up + (0 if ffn.b_up is None else ffn.b_up)
    silu = gate / (1 + np.exp(-gate))
    np.testing.assert_allclose(parts.gate, gate, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(parts.up, up, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(parts.gate_silu, silu, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(parts.product, silu * up, rtol=1e-4, atol=1e-5)
    # the neurons' writes, summed row by row of W_down, are the block's feed-forward output
    written = sum(parts.product[n] * ffn.W_down[n].astype(np.float64)
                  for n in range(len(parts.product)))
    if ffn.b_down is not None:
        written = written + ffn.b_down
    np.testing.assert_allclose(written, trace["blocks.1.ffn.output"][7], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(parts.written, written, rtol=1e-10)
    assert parts.difference < 1e-5


def test_top_products_rank_by_size():
    model = random_model(LLAMA)
    _, trace = model.run_with_trace(prompt())
    parts = swiglu_parts(model, trace, 0, 3)
    top = top_products(parts, 5)
    sizes = np.abs(parts.product[top])
    assert list(sizes) == sorted(sizes, reverse=True)
    assert sizes[-1] >= np.delete(np.abs(parts.product), top).max()


def test_a_gelu_mlp_has_no_gate():
    model = random_model(GPT2)
    _, trace = model.run_with_trace(prompt())
    with pytest.raises(ValueError, match="no gate"):
        swiglu_parts(model, trace, 0, 0)
