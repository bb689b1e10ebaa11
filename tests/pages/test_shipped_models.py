"""The shipped models folder in the app: a new session opens models/shakespeare.npz (the GPT-2
style model) by default, the Llama-style models/shakespeare_llama.npz is in the model list, and
every page opens on it without an error."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import NORMAL, PAGES, ROOT, assert_clean, open_page  # noqa: E402

LLAMA = "shakespeare_llama.npz"


@pytest.fixture(autouse=True)
def shipped_models(monkeypatch):
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(ROOT / "models"))
    monkeypatch.delenv("TINYGPT_DEFAULT_MODEL", raising=False)


def test_the_gpt_style_model_is_the_default_and_the_llama_style_one_is_listed():
    at = open_page("app.py", NORMAL)
    assert_clean(at)
    model_box = at.sidebar.selectbox[0]
    assert model_box.value == "shakespeare.npz"
    assert LLAMA in model_box.options


def test_every_page_opens_on_the_llama_style_model():
    for page in PAGES:
        at = open_page(page, NORMAL, model=LLAMA)
        assert_clean(at)
        assert at.sidebar.selectbox[0].value == LLAMA, page
