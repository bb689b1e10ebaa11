"""Charts of the residual stream page: each figure, serialised as the browser gets it and
decoded back, holds the trace's own norms and the model's own lens."""

from __future__ import annotations

import json

import numpy as np

from tests.apptest_support import decode
from tinygpt import readouts as ti
from tinygpt_app.charts import residual
from tinygpt_app.kit.labels import token_label


def sent(fig) -> dict:
    """The figure as the browser gets it."""
    return json.loads(fig.to_json())


def test_norms_heatmap(run):
    L = run.model.config.n_layer
    norms = ti.residual_norms(run.trace, L)
    stages = [s for s, _ in ti.residual_stages(L)]
    spec = sent(residual.norms_heatmap(norms, stages, run.labels, "norms"))
    z = decode(spec["data"][0]["z"])
    assert z.shape == (1 + 2 * L, len(run.ids))
    # row "block 0 + attn" = ||resid_attn of block 0|| for every token
    np.testing.assert_allclose(z[1], np.linalg.norm(run.trace["blocks.0.resid_attn"], axis=-1),
                               rtol=1e-6)
    np.testing.assert_allclose(
        z[-1], np.linalg.norm(run.trace[f"blocks.{L - 1}.resid_ffn"], axis=-1), rtol=1e-6)
    assert spec["layout"]["title"]["text"] == "norms"
    assert spec["layout"]["yaxis"]["ticktext"] == stages


def test_norm_lines(run):
    L = run.model.config.n_layer
    norms = ti.residual_norms(run.trace, L)
    stages = [s for s, _ in ti.residual_stages(L)]
    spec = sent(residual.norm_lines(norms, stages, run.labels, [2, 5], "lines"))
    assert len(spec["data"]) == 2
    assert spec["data"][1]["name"] == run.labels[5]  # "5:·x", not "5: 5:·x"
    np.testing.assert_allclose(decode(spec["data"][1]["y"])[0],
                               np.linalg.norm(run.trace["embed.sum"][5]), rtol=1e-6)


def test_sublayer_writes(run):
    L = run.model.config.n_layer
    writes = ti.sublayer_write_norms(run.trace, L)
    spec = sent(residual.sublayer_writes(writes, [s for s, _ in ti.sublayer_stages(L)],
                                         run.labels, "writes"))
    z = decode(spec["data"][0]["z"])
    np.testing.assert_allclose(z[1], np.linalg.norm(run.trace["blocks.0.ffn.output"], axis=-1),
                               rtol=1e-6)


def test_logit_lens(run):
    positions = [3, 4, 5, 6]
    lens = ti.logit_lens(run.model, run.trace, k=1, positions=positions)
    text = [[token_label(run.tok, i) for i in row] for row in lens.ids[:, :, 0]]
    shown = [run.labels[t] for t in positions]
    spec = sent(residual.logit_lens(lens.probs[:, :, 0], text, lens.labels, shown, "lens"))
    z = decode(spec["data"][0]["z"])
    # a row per position, a column per stage; the last column is the model's own prediction:
    # its top token and probability
    logits = run.logits[positions]
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    assert z.shape == (len(positions), len(lens.labels))
    np.testing.assert_allclose(z[:, -1], p.max(-1), rtol=1e-4)
    full = [token_label(run.tok, i) for i in logits.argmax(-1)]
    assert [row[-1] for row in spec["data"][0]["customdata"]] == full  # the hover: every token
    assert spec["data"][0]["y"] == shown and spec["data"][0]["x"] == lens.labels


def test_logit_lens_writes_a_token_only_where_it_fits():
    """Cells keep their text only for tokens of at most lens_chars(S) characters; the hover
    (customdata) keeps every token."""
    S = 5
    tokens = [["·a", "·abcdefghijk"] for _ in range(S)]  # S stages x 2 positions
    spec = sent(residual.logit_lens(np.full((S, 2), 0.5), tokens, [f"s{i}" for i in range(S)],
                                    ["p0", "p1"], "lens"))
    fits = residual.lens_chars(S)
    assert 2 <= fits < len("·abcdefghijk")
    assert spec["data"][0]["text"] == [["·a"] * S, [""] * S]
    assert spec["data"][0]["customdata"] == [["·a"] * S, ["·abcdefghijk"] * S]
    assert residual.lens_chars(9) < fits  # more stages, narrower cells
