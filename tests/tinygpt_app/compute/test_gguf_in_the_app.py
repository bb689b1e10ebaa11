"""A GGUF file placed directly in the models folder is a model like any other: listed in the
sidebar, selected by its link (?model=<file name>), Home and the Tokens page run on it with
its own tokenizer (a small Llama GGUF written by gguf's GGUFWriter, every tensor type)."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import TINY, assert_clean, open_page  # noqa: E402
from tests.tinygpt.checkpoint.gguf_files import write_gguf  # noqa: E402
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer  # noqa: E402
from tinygpt import load  # noqa: E402

NAME = "small.Q4_1.gguf"
PROMPT = "Digits 2026 and words"


@pytest.fixture
def gguf_models(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(TINY, models / "tiny.npz")
    write_gguf(models / NAME, "llama", build_tokenizer("smollm2", tmp_path), "smollm2")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(models))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return models / NAME


def test_the_link_selects_the_gguf_file_and_the_pages_run_on_it(gguf_models):
    at = open_page("app.py", PROMPT, model=NAME)
    assert_clean(at)
    select = next(s for s in at.sidebar.selectbox if s.label == "Model")
    assert NAME in select.options and select.value == NAME
    at = open_page("pages/2_Tokens_and_embeddings.py", PROMPT, model=NAME)
    assert_clean(at)
    _, tok = load(gguf_models)
    html = "\n".join(m.value for m in at.markdown)
    for token_id in tok.encode(PROMPT):
        assert f"id {token_id}" in html
    assert not any(p.name.startswith(".") for p in (gguf_models.parent).iterdir()
                   if p.name != ".tinygpt-cache")
