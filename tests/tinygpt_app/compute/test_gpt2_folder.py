"""A GPT-2 folder with exactly the files `hf download openai-community/gpt2 config.json
model.safetensors vocab.json merges.txt` fetches (random weights, small shapes), chosen in the
sidebar's model select, drives the pages: their sizes, figures and numbers are that model's."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from bench.common import GPT2_FILES, write_gpt2_folder
from tests.apptest_support import NORMAL, TINY, assert_clean, chart_z, charts, open_page
from tinygpt import load

SHAPE = {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 600, "n_positions": 128}


@pytest.fixture
def gpt2_folder(tmp_path, monkeypatch):
    """models/ holding the shipped-style tiny.npz (the default) and a folder gpt2/."""
    shutil.copy(TINY, tmp_path / "tiny.npz")
    folder = write_gpt2_folder(tmp_path / "gpt2", seed=3, **SHAPE)
    assert sorted(p.name for p in folder.iterdir()) == sorted(GPT2_FILES)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return folder


def choose_gpt2(at):
    select = next(s for s in at.sidebar.selectbox if s.label == "Model")
    assert "gpt2" in select.options
    return select.set_value("gpt2").run()


def page_text(at) -> str:
    return "\n".join(e.value for e in [*at.caption, *at.markdown])


@pytest.mark.parametrize("page", ["pages/6_Logits.py",
                                  "pages/5_Residual_stream.py",
                                  "pages/4_Attention.py"])
def test_sidebar_opens_the_gpt2_folder(gpt2_folder, page):
    at = open_page(page, NORMAL)
    assert_clean(at)
    assert "gpt2" not in [s.value for s in at.sidebar.selectbox]  # the tiny default first
    at = choose_gpt2(at)
    assert_clean(at)
    assert charts(at)
    model, tok = load(gpt2_folder)
    n = len(tok.encode(NORMAL))
    text = page_text(at)
    assert f"n = {n} tokens" in text
    if page != "pages/4_Attention.py":  # that page says sizes per head instead
        assert f"n = {n} tokens · d = 32 · v = 600 · 2 blocks" in text
    else:
        assert "head size hs = 16" in text


def test_logits_page_shows_the_folder_models_logits(gpt2_folder):
    at = choose_gpt2(open_page("pages/6_Logits.py", NORMAL))
    model, tok = load(gpt2_folder)
    logits = model.forward(np.array(tok.encode(NORMAL)))  # (n, 600), a separate forward
    shown = chart_z(at, "Logits: n =")  # n x 600 fits the heatmap: every column drawn
    np.testing.assert_allclose(shown, logits, rtol=1e-4, atol=1e-5)


def test_the_load_benchs_gpt2_small_tokenizer_has_gpt2s_ids_and_splits_like_its_trainer(
        tmp_path):
    """bench/large_folders.py's vocab.json + merges.txt: exactly v = 50,257 ids with
    <|endoftext|> last (as GPT-2's), read by tinygpt the way the tokenizers library that
    trained it reads them."""
    tokenizers = pytest.importorskip("tokenizers")
    from bench.large_folders import write_tokenizer
    from tinygpt.tokenizer.bpe import BPETokenizer

    write_tokenizer(tmp_path, 50257)
    tok = BPETokenizer.from_gpt2(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert tok.vocab_size == 50257 and tok.eos_token_id == 50256
    ref = tokenizers.ByteLevelBPETokenizer.from_file(
        str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"), add_prefix_space=False)
    for text in (NORMAL, "To be, or not to be, that is the question", "zzqx 世界 aab"):
        assert tok.encode(text) == ref.encode(text).ids
