"""ui.py without a running app: the figures hold exactly the trace values they claim to show,
model discovery never leaves the models folder, prompts are cut as documented."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

import ui
from tests.apptest_support import TINY
from tinygpt.checkpoint import load
from tinygpt.readouts import attention_with_mask, query_key_check, top_k


@pytest.fixture(scope="module")
def run():
    model, tok = load(TINY)
    ids = np.asarray(tok.encode("ROMEO:\nBut soft, what light!"), dtype=np.int64)
    logits, trace = model.run_with_trace(ids)
    return model, tok, ids, logits, trace


def z_of(fig, i: int = 0) -> np.ndarray:
    return np.asarray(fig.data[i].z, dtype=np.float64)


def test_heatmap_holds_the_trace_values(run):
    model, tok, ids, _, trace = run
    labels = ui.token_labels(tok, ids)
    fig = ui.heatmap(trace["embed.sum"], "x", y_labels=labels)
    np.testing.assert_array_equal(z_of(fig), trace["embed.sum"])
    assert list(fig.data[0].y) == labels
    assert fig.data[0].zmid == 0  # diverging scale centred at zero


def test_attention_heatmap_keeps_masked_cells_apart_from_small_weights(run):
    _, tok, ids, _, trace = run
    n = len(ids)
    fig = ui.attention_heatmap(attention_with_mask(trace, 1, 2), ui.token_labels(tok, ids), "a")
    values, grey = z_of(fig, 0), z_of(fig, 1)
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)  # key after query: masked
    weights = trace["blocks.1.attn.weights"][2]
    np.testing.assert_array_equal(values[~upper], weights[~upper])
    assert np.isnan(values[upper]).all()
    assert (grey[upper] == 1).all() and np.isnan(grey[~upper]).all()


def test_attention_heatmap_of_scores_masks_the_minus_infinities(run):
    _, tok, ids, _, trace = run
    scores = trace["blocks.0.attn.scores_masked"][0]
    fig = ui.attention_heatmap(scores, ui.token_labels(tok, ids), "s", diverging=True)
    finite = np.isfinite(scores)
    np.testing.assert_array_equal(z_of(fig)[finite], scores[finite])
    assert np.isnan(z_of(fig)[~finite]).all() and fig.data[0].zmid == 0


def test_attention_heatmap_with_only_the_last_rows(run):
    _, tok, ids, _, trace = run
    labels = ui.token_labels(tok, ids)
    w = attention_with_mask(trace, 0, 1)[3:]
    fig = ui.attention_heatmap(w, labels, "a", y_labels=labels[3:])
    assert z_of(fig).shape == (len(ids) - 3, len(ids))
    assert list(fig.data[0].y) == labels[3:] and list(fig.data[0].x) == labels


def test_histogram_and_bars_hold_the_vectors(run):
    model, _, _, _, trace = run
    x = trace["blocks.0.ln2.input"][4]
    fig = ui.histogram(x, "h", mean=float(trace["blocks.0.ln2.mean"][4]))
    np.testing.assert_array_equal(np.asarray(fig.data[0].x), x)
    gamma = model.blocks[0].ln2.gamma
    np.testing.assert_array_equal(np.asarray(ui.bar(gamma, "g").data[0].y), gamma)


def test_prob_bar_holds_the_top_probabilities(run):
    _, tok, _, logits, _ = run
    ids, probs = top_k(logits[-1], 5)
    names = [ui.token_text(tok, i) for i in ids]
    fig = ui.prob_bar(names, probs, "p")
    np.testing.assert_array_equal(np.asarray(fig.data[0].x), probs)
    assert list(fig.data[0].y) == names


def test_lines_and_grouped_bars_hold_each_series(run):
    _, tok, ids, _, trace = run
    mean, var = trace["ln_f.mean"], trace["ln_f.var"]
    fig = ui.lines({"mean": mean, "var": var}, ui.token_labels(tok, ids), "l")
    np.testing.assert_array_equal(np.asarray(fig.data[1].y), var)
    check = query_key_check(trace, 0, 3, len(ids) - 1, 2)
    fig = ui.grouped_bars({"q": check.q, "k": check.k, "q*k": check.products}, "qk")
    np.testing.assert_array_equal(np.asarray(fig.data[2].y), check.products)


def test_query_key_check_matches_an_independent_projection(run):
    """q and k rebuilt from LN1's output and W_qkv: the score is the trace's, up to rounding."""
    model, _, ids, _, trace = run
    layer, head, query, key = 1, 2, len(ids) - 1, 1
    attn = model.blocks[layer].attn
    h = trace[f"blocks.{layer}.ln1.output"].astype(np.float64)  # (T, C)
    hs, C = attn.head_size, model.config.n_embd
    cols_q = slice(head * hs, (head + 1) * hs)
    cols_k = slice(C + head * hs, C + (head + 1) * hs)
    q = h[query] @ attn.W_qkv[:, cols_q] + attn.b_qkv[cols_q]
    k = h[key] @ attn.W_qkv[:, cols_k] + attn.b_qkv[cols_k]
    check = query_key_check(trace, layer, head, query, key)
    assert check.scaled == pytest.approx(float(q @ k) / math.sqrt(hs), rel=1e-4, abs=1e-6)
    assert check.scaled == pytest.approx(check.score, rel=1e-5, abs=1e-7)


def test_labels_are_unique_and_chips_are_escaped(run):
    _, tok, _, _, _ = run
    ids = tok.encode("a a a")
    labels = ui.token_labels(tok, ids)
    assert len(set(labels)) == len(labels)
    html = ui.chips_html([("<script>", "id 1"), ("·the", "id 2")], highlight=1)
    assert "<script>" not in html and "&lt;script&gt;" in html and "id 2" in html


def test_encode_prompt_keeps_the_last_tokens(run):
    _, tok, _, _, _ = run
    text = "to be or not to be " * 40
    ids, notes = ui.encode_prompt(tok, text, 16)
    assert list(ids) == tok.encode(text)[-16:] and len(notes) == 1
    ids, notes = ui.encode_prompt(tok, "hi", 16)
    assert list(ids) == tok.encode("hi") and notes == []


def test_cell_budget():
    assert ui.first_row_within_budget(10, 10, budget=1000) == 0
    assert ui.first_row_within_budget(1000, 768, budget=200_000) == 1000 - 260
    assert ui.first_row_within_budget(5, 10**7, budget=100) == 4  # always at least one row


def test_model_discovery_stays_inside_the_models_folder(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, inside / "a.npz")
    (inside / "gpt2ish").mkdir()
    (inside / "gpt2ish" / "config.json").write_text("{}")
    (inside / "not_a_model").mkdir()
    (inside / "notes.txt").write_text("x")
    for sidecar in ("a.optim.npz", "a.ids.npz", "a.tmp.npz"):  # written by the trainer
        (inside / sidecar).write_bytes(b"")
    shutil.copy(TINY, tmp_path / "outside.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    monkeypatch.delenv("TINYGPT_DEFAULT_MODEL", raising=False)
    assert ui.available_models() == ["a.npz", "gpt2ish"]
    assert ui.default_model_id() == "a.npz"
    assert ui.resolve_model_path("a.npz") == (inside / "a.npz").resolve()
    for bad in ("../outside.npz", str(tmp_path / "outside.npz"), "notes.txt", "not_a_model",
                "", ".", "gpt2ish/../a.npz", "a.optim.npz"):
        with pytest.raises(ValueError):
            ui.resolve_model_path(bad)


def test_symlink_out_of_the_models_folder_is_refused(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, tmp_path / "secret.npz")
    (inside / "link.npz").symlink_to(tmp_path / "secret.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    with pytest.raises(ValueError):
        ui.resolve_model_path("link.npz")
