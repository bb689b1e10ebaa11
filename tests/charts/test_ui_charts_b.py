"""Chart builders of pages 4, 5 and 8: the numbers inside each figure are the trace's own.

Each figure is serialised to JSON (what the browser receives) and decoded back, then compared
with values computed here straight from the trace.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("plotly", reason="the chart builders need plotly")
pytest.importorskip("streamlit", reason="ui.py imports streamlit")

import ui  # noqa: E402
from tests.apptest_support import TINY, decode  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint import load  # noqa: E402


def sent(fig) -> dict:
    """The figure as the browser gets it."""
    return json.loads(fig.to_json())


@pytest.fixture(scope="module")
def run():
    model, tok = load(TINY)
    ids = np.array(tok.encode("ROMEO:\nBut soft, what light through yonder window"))
    logits, trace = model.run_with_trace(ids)
    labels = ui.token_labels(tok, ids)
    return model, tok, ids, logits, trace, labels


def test_residual_norms_figure(run):
    model, _, ids, _, trace, labels = run
    L = model.config.n_layer
    norms = ti.residual_norms(trace, L)
    stages = [s for s, _ in ti.residual_stages(L)]
    spec = sent(ui.residual_norms_figure(norms, stages, labels, model.config.n_embd))
    z = decode(spec["data"][0]["z"])
    assert z.shape == (1 + 2 * L, len(ids))
    # row "block 0 + attn" = ||resid_attn of block 0|| for every token
    np.testing.assert_allclose(z[1], np.linalg.norm(trace["blocks.0.resid_attn"], axis=-1),
                               rtol=1e-6)
    np.testing.assert_allclose(z[-1], np.linalg.norm(trace[f"blocks.{L - 1}.resid_ffn"], axis=-1),
                               rtol=1e-6)
    assert f"n = {len(ids)}" in spec["layout"]["title"]["text"]


def test_residual_norm_lines_figure(run):
    model, _, _, _, trace, labels = run
    L = model.config.n_layer
    norms = ti.residual_norms(trace, L)
    stages = [s for s, _ in ti.residual_stages(L)]
    spec = sent(ui.residual_norm_lines_figure(norms, stages, labels, [2, 5]))
    assert len(spec["data"]) == 2
    np.testing.assert_allclose(decode(spec["data"][1]["y"])[0],
                               np.linalg.norm(trace["embed.sum"][5]), rtol=1e-6)


def test_sublayer_writes_figure(run):
    model, _, _, _, trace, labels = run
    L = model.config.n_layer
    writes = ti.sublayer_write_norms(trace, L)
    spec = sent(ui.sublayer_writes_figure(writes, [s for s, _ in ti.sublayer_stages(L)],
                                          labels, model.config.n_embd))
    z = decode(spec["data"][0]["z"])
    np.testing.assert_allclose(z[1], np.linalg.norm(trace["blocks.0.ffn.output"], axis=-1),
                               rtol=1e-6)


def test_logit_lens_figure(run):
    model, tok, _, logits, trace, labels = run
    positions = [3, 4, 5, 6]
    lens = ti.logit_lens(model, trace, k=1, positions=positions)
    text = [[ui.token_text(tok, i) for i in row] for row in lens.ids[:, :, 0]]
    spec = sent(ui.logit_lens_figure(lens.probs[:, :, 0], text, lens.labels, labels, positions,
                                     model.config.vocab_size))
    z = decode(spec["data"][0]["z"])
    # the last row is the model's own prediction: its top token and probability
    p = np.exp(logits[positions] - logits[positions].max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(z[-1], p.max(-1), rtol=1e-4)
    assert spec["data"][0]["text"][-1] == [ui.token_text(tok, i) for i in
                                           logits[positions].argmax(-1)]
    assert spec["layout"]["xaxis"]["ticktext"] == [labels[t] for t in positions]


def test_logits_heatmap_figure(run):
    model, _, ids, logits, _, labels = run
    cols = np.array([0, 7, 100])
    spec = sent(ui.logits_heatmap_figure(logits[:, cols], ["a", "b", "c"], labels,
                                         model.config.vocab_size))
    z = decode(spec["data"][0]["z"])
    np.testing.assert_array_equal(z, logits[:, cols])
    assert "3 of the v = 512" in spec["layout"]["title"]["text"]
    full = sent(ui.logits_heatmap_figure(logits, [str(i) for i in range(512)], labels, 512))
    assert "whole vocabulary" in full["layout"]["title"]["text"]


def test_logit_row_figure(run):
    _, _, _, logits, _, _ = run
    spec = sent(ui.logit_row_figure(logits[4], [(9, "x")], 4))
    np.testing.assert_array_equal(decode(spec["data"][0]["y"]), logits[4])
    assert decode(spec["data"][1]["y"])[0] == logits[4, 9]


def test_shift_hits_figure(run):
    _, _, ids, logits, _, labels = run
    hits = ti.next_token_hits(logits, ids)
    p_next = np.exp(ti.target_logprobs(logits, ids))
    spec = sent(ui.shift_hits_figure(p_next, hits, labels[:-1], ["?"] * len(hits)))
    y = decode(spec["data"][0]["y"])
    for t in range(len(ids) - 1):  # bar t = softmax(logits[t])[ids[t+1]]
        row = logits[t].astype(np.float64)
        ref = np.exp(row[ids[t + 1]] - row.max()) / np.exp(row - row.max()).sum()
        assert y[t] == pytest.approx(ref, rel=1e-4)
    colours = spec["data"][0]["marker"]["color"]
    assert [c == ui.HIT_COLOURS[True] for c in colours] == hits.tolist()


def test_tying_products_figure(run):
    model, _, _, logits, trace, _ = run
    check = ti.tying_check(model, trace, 3, 42)
    spec = sent(ui.tying_products_figure(check.products, check.dot, "x"))
    y = decode(spec["data"][0]["y"]).astype(np.float64)
    assert y.sum() == pytest.approx(float(logits[3, 42]), abs=1e-4)


def test_singular_values_figure(run):
    model, *_ = run
    s = ti.output_singular_values(model)
    spec = sent(ui.singular_values_figure(s, model.config.vocab_size))
    np.testing.assert_allclose(decode(spec["data"][0]["y"]),
                               np.linalg.svd(model.output.W_out, compute_uv=False), rtol=1e-3)


def test_prediction_change_figure():
    spec = sent(ui.prediction_change_figure(["'a'", "'b'"], np.array([0.7, 0.2]),
                                            np.array([0.1, 0.6]), 3))
    np.testing.assert_allclose(decode(spec["data"][0]["x"]), [0.7, 0.2], rtol=1e-6)
    np.testing.assert_allclose(decode(spec["data"][1]["x"]), [0.1, 0.6], rtol=1e-6)
    assert spec["data"][0]["y"] == spec["data"][1]["y"] == ["'a'", "'b'"]
