"""Charts of the logits page: each figure holds the model's own logits, the probabilities of
the real next tokens, the products of a tied logit and the singular values of W_out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.apptest_support import decode
from tinygpt import readouts as ti
from tinygpt_app.charts import logits as charts


def sent(fig) -> dict:
    """The figure as the browser gets it."""
    return json.loads(fig.to_json())


def test_logits_heatmap(run):
    cols = np.array([0, 7, 100])
    spec = sent(charts.logits_heatmap(run.logits[:, cols], ["a", "b", "c"], run.labels, "t"))
    np.testing.assert_array_equal(decode(spec["data"][0]["z"]), run.logits[:, cols])
    lim = float(np.abs(run.logits[:, cols]).max())
    assert spec["data"][0]["zmin"] == pytest.approx(-lim) and spec["data"][0]["zmid"] == 0
    assert spec["data"][0]["x"] == ["a", "b", "c"] and spec["data"][0]["y"] == run.labels


def test_logit_row(run):
    spec = sent(charts.logit_row(run.logits[4], [(9, "x")], "row 4"))
    np.testing.assert_array_equal(decode(spec["data"][0]["y"]), run.logits[4])
    assert decode(spec["data"][1]["y"])[0] == run.logits[4, 9]


def test_logit_row_names_only_a_few_marks_on_the_chart(run):
    """Names beside their marks overlapped when marks were close (issues 25 and 49): at most
    MAX_POINT_LABELS names, in one row above the cloud, evenly spaced in id order, each joined
    to its mark by a line; every mark keeps its name on hover."""
    row = run.logits[4]
    top = np.argsort(row)[::-1][:8]
    marks = [(int(i), f"tok{i}") for i in top]
    spec = sent(charts.logit_row(row, marks, "row 4"))
    shown, lines, names = spec["data"][1], spec["data"][2], spec["data"][3]
    assert shown["customdata"] == [label for _, label in marks]
    named = sorted(int(i) for i in top[:charts.MAX_POINT_LABELS])
    assert names["text"] == [f"tok{i}" for i in named]  # the highest logits, in id order
    x, y = decode(names["x"], float), decode(names["y"], float)
    gaps = np.diff(x)
    assert np.allclose(gaps, len(row) / len(named)) and np.all(y == y[0]) and y[0] > row.max()
    ends = [p for p in zip(lines["x"], lines["y"], strict=True) if p[0] is not None]
    assert [(int(px), py) for px, py in ends[1::2]] == [
        (i, pytest.approx(float(row[i]), rel=1e-6)) for i in named]


def test_shift_hits(run):
    ids, logits = run.ids, run.logits
    hits = ti.next_token_hits(logits, ids)
    p_next = np.exp(ti.target_logprobs(logits, ids))
    spec = sent(charts.shift_hits(p_next, hits, run.labels[:-1], ["?"] * len(hits), "t"))
    y = decode(spec["data"][0]["y"])
    for t in range(len(ids) - 1):  # bar t = softmax(logits[t])[ids[t+1]]
        row = logits[t].astype(np.float64)
        ref = np.exp(row[ids[t + 1]] - row.max()) / np.exp(row - row.max()).sum()
        assert y[t] == pytest.approx(ref, rel=1e-4)
    colours = spec["data"][0]["marker"]["color"]
    assert [c == charts.HIT_COLOURS[True] for c in colours] == hits.tolist()
    # a miss is striped as well as orange, and the hover says hit or miss: not colour alone
    patterns = spec["data"][0]["marker"]["pattern"]["shape"]
    assert [p == charts.HIT_PATTERNS[False] for p in patterns] == (~hits).tolist()
    assert [c[2] for c in spec["data"][0]["customdata"]] == ["hit" if h else "miss" for h in hits]


def test_tying_products(run):
    check = ti.tying_check(run.model, run.trace, 3, 42)
    spec = sent(charts.tying_products(check.products, "t"))
    y = decode(spec["data"][0]["y"]).astype(np.float64)
    assert y.sum() == pytest.approx(float(run.logits[3, 42]), abs=1e-4)


def test_singular_values(run):
    s = ti.output_singular_values(run.model)
    spec = sent(charts.singular_values(s, "t"))
    np.testing.assert_allclose(decode(spec["data"][0]["y"]),
                               np.linalg.svd(run.model.output.W_out, compute_uv=False), rtol=1e-3)
    assert spec["layout"]["yaxis"]["type"] == "log"
