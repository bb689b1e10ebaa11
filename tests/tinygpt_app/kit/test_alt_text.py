"""Every chart has a text alternative (issue 17): one sentence with this prompt's numbers.

The sentence builders (tinygpt_app.kit.alt_text) are checked against the arrays they describe,
computed here on their own; every show_chart call in the app passes a sentence (read from the
source); and every page, run under streamlit.testing, shows one sentence per chart.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

from tests.apptest_support import NORMAL, PAGES, ROOT, TINY, WITHOUT_CHARTS, open_page
from tinygpt.checkpoint.files import load
from tinygpt.readouts import attention_with_mask
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.widgets import ALT_PREFIX

PROMPT = "ROMEO:\nBut soft, what light through yonder window"


@pytest.fixture(scope="module")
def run():
    model, tok = load(TINY)
    ids = np.array(tok.encode(PROMPT))
    logits, trace = model.run_with_trace(ids)
    labels = [token_label(tok, t, position=i) for i, t in enumerate(ids)]
    return model, tok, ids, logits, trace, labels


# ----------------------------------------------------------------------------- the sentences


def test_attention_sentence_names_the_strongest_key_of_the_row(run):
    *_, trace, labels = run
    w = attention_with_mask(trace, 1, 2)
    n = len(labels)
    for row in (0, n // 2, n - 1):
        visible = trace["blocks.1.attn.weights"][2][row, :row + 1]  # the causal mask: keys <= row
        best = int(np.argmax(visible))
        sentence = alt_text.attention(w, labels, labels, row)
        assert sentence.startswith(f"The strongest attention from “{labels[row]}” goes to "
                                   f"“{labels[best]}”, {visible[best]:.2f}")
        masked = n * (n - 1) // 2
        assert f"{masked:,} of {n * n:,} cells are masked" in sentence


def test_top_items_are_the_most_likely_next_tokens_in_order(run):
    _, tok, _, logits, _, _ = run
    row = logits[-1].astype(np.float64)
    p = np.exp(row - row.max())
    p /= p.sum()
    names = [token_label(tok, i) for i in range(len(p))]
    sentence = alt_text.top_items(names, p, "Next", k=3)
    top = np.argsort(-p)[:3]
    expected = ", ".join(f"“{names[i]}” {p[i]:.3f}" for i in top)
    assert sentence == f"Next: {expected} (the top 3 of {len(p):,})."


def test_grid_names_the_largest_and_smallest_cell(run):
    *_, trace, labels = run
    z = trace["embed.sum"]  # (n, d)
    cols = [f"dimension {j}" for j in range(z.shape[1])]
    hi = np.unravel_index(np.argmax(z), z.shape)
    lo = np.unravel_index(np.argmin(z), z.shape)
    sentence = alt_text.grid(z, labels, cols, "x")
    assert f"largest {z[hi]:.3f} at “{labels[hi[0]]}”, “dimension {hi[1]}”" in sentence
    assert f"smallest {z[lo]:.3f} at “{labels[lo[0]]}”, “dimension {lo[1]}”" in sentence
    assert f"({z.shape[0]:,} × {z.shape[1]:,} cells)" in sentence


def test_kept_and_cut_counts_the_bars_and_cumulative_reads_the_cutoff():
    sentence = alt_text.kept_and_cut(["a", "b", "c", "d"], [0.4, 0.3, 0.2, 0.1],
                                     [True, True, True, False], "T = 1")
    assert sentence == ("T = 1: “a” 0.400, “b” 0.300, “c” 0.200 (the top 3 of 4); of the 4 bars "
                        "drawn, 3 are kept and 1 cut (striped).")
    running = np.cumsum([0.5, 0.3, 0.1, 0.1])
    assert alt_text.cumulative(running, 2, 0.8).startswith(
        "The 2 most likely tokens are kept (top-p = 0.8): together they hold 0.8000")


def test_bars_lines_spread_and_two_runs_read_their_arrays():
    v = np.array([0.5, -1.25, 2.0, np.nan])
    assert alt_text.bars(["a", "b", "c", "d"], v, "s") == (
        "s: highest “c” 2.000, lowest “b” -1.250 (4 values).")
    assert alt_text.spread([1.0, 2.0, 6.0], "h") == "h: 3 numbers, mean 3.000, from 1.000 to 6.000."
    assert alt_text.lines({"μ": [0.0, 3.0], "σ": [2.0, 1.0]}, ["x", "y"], "stats") == (
        "stats: μ highest at “y”, 3.000; σ highest at “x”, 2.000.")
    assert alt_text.two_runs(["x", "y"], [0.1, 0.2], [0.5, 0.25], ("one", "two"), "p") == (
        "p: the largest difference is “x”, 0.100 (one) against 0.500 (two).")


# ----------------------------------------------------------------------------- every chart


def show_chart_calls() -> list[tuple[str, ast.Call]]:
    """Every show_chart(...) call in the app's source: pages, app.py and the app package."""
    files = [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py")),
             *sorted((ROOT / "tinygpt_app").rglob("*.py"))]
    calls = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "show_chart"):
                calls.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return calls


def test_every_show_chart_call_passes_a_sentence():
    calls = show_chart_calls()
    assert len(calls) >= 40  # the app's charts (a parse that finds none would pass otherwise)
    for where, call in calls:
        alt = [k.value for k in call.keywords if k.arg == "alt"]
        assert alt, f"{where}: show_chart without alt="
        empty = isinstance(alt[0], ast.Constant) and not str(alt[0].value).strip()
        assert not empty, f"{where}: an empty alt"


@pytest.mark.parametrize("page", PAGES)
def test_every_drawn_chart_has_its_sentence_before_it(page, monkeypatch):
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(TINY.parent))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", TINY.name)
    at = open_page(page, NORMAL)
    assert not at.exception, [e.value for e in at.exception]
    charts = at.get("plotly_chart")
    sentences = [c.value for c in at.caption if c.value.startswith(ALT_PREFIX)]
    if page not in WITHOUT_CHARTS:
        assert charts, "the page drew no chart"
    assert len(sentences) == len(charts)
    for sentence in sentences:
        assert re.search(r"\d", sentence), f"a sentence without a number: {sentence!r}"


def test_groups_name_each_series_largest_bar_and_its_total():
    counts = {"gpt": np.array([10.0, 0.0, 30.0]), "llama": np.array([5.0, 20.0, 5.0])}
    said = alt_text.groups(counts, ["a", "b", "c"], "Parameters by part")
    assert said == ("Parameters by part: “gpt” largest “c” 30 of 40; "
                    "“llama” largest “b” 20 of 30.")
