"""The pages of the modern parts (Normalisation, Attention, Residual stream's neurons) on a
random Llama-shaped folder (GQA, tied) and a Qwen2-shaped one (q/k/v biases): no exception,
each part's own view; and the shipped GPT-style model's pages as they were."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
pytest.importorskip("safetensors.numpy", reason="the folders are written with safetensors")

from tests.apptest_support import assert_clean, charts, open_page, title_of  # noqa: E402
from tests.pages.modern_folders import PROMPT, choose  # noqa: E402

PAGES = ["pages/3_LayerNorm.py", "pages/4_Attention.py",
         "pages/5_Residual_stream.py"]
MODERN_HEADERS = {
    "pages/3_LayerNorm.py": ["What LayerNorm would have done to the same vector",
                             "The learned scale γ (no shift β)"],
    "pages/4_Attention.py": [
        "Rotary positions (RoPE): where the order of the tokens comes in",
                             "Grouped-query attention: heads that share keys and values"],
    "pages/5_Residual_stream.py": [],
}


def headers(at) -> list[str]:
    return [h.value for h in [*at.header, *at.subheader]]


@pytest.mark.parametrize("name", ["llama", "qwen2"])
@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_on_a_modern_folder(modern_models, page, name):
    at = choose(open_page(page, PROMPT, pos="5"), name)
    assert_clean(at)
    for header in MODERN_HEADERS[page]:
        assert header in headers(at)
    assert charts(at)
    said = "\n".join(m.value for m in at.markdown)
    assert "GELU" not in " ".join(title_of(c) for c in charts(at))
    if page == "pages/3_LayerNorm.py":
        assert "normalises with **RMSNorm**" in said
    if page == "pages/5_Residual_stream.py":
        assert "SwiGLU: a gate times an up projection" in headers(at)


def test_the_gpt_pages_keep_their_teaching(modern_models):
    norm = open_page("pages/3_LayerNorm.py", PROMPT)
    assert_clean(norm)
    assert headers(norm) == ["One token: position " + headers(norm)[0].split("position ")[1],
                             "The learned scale γ and shift β", "All tokens at once"]
    assert "Final LayerNorm (before the output layer)" in norm.selectbox(
        key="layernorm.norm").options
    attention = open_page("pages/4_Attention.py", PROMPT)
    assert_clean(attention)
    said = "\n".join(m.value for m in attention.markdown)
    # the parts this model lacks: one line each, no section (issue 49)
    said = said.replace("\\", "")  # plain()'s escapes
    assert "**Rotary positions (RoPE)**: not in this model (it adds a learned position" in said
    assert "**Grouped-query attention**: not in this model (each of its 4 heads" in said
    assert not [h for h in headers(attention) if "RoPE" in h or "Grouped-query" in h]
    assert not [c for c in charts(attention) if "RoPE" in title_of(c) or "KV cache" in
                title_of(c)]
    residual = open_page("pages/5_Residual_stream.py", PROMPT)
    assert_clean(residual)
    assert "SwiGLU: a gate times an up projection" not in headers(residual)


def test_the_attention_pages_modern_parts_are_tabs_of_their_own(modern_models):
    """Rotary positions and shared keys and values are tabs on a model that has them (on a
    GPT-2-style one they are a line each under the tabs: tests/pages/test_attention.py)."""
    at = choose(open_page("pages/4_Attention.py", PROMPT, pos="5"), "llama")
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["The map", "One score by hand",
                                          "What the head hands on", "Every head",
                                          "Rotary positions", "Shared keys and values"]


@pytest.mark.parametrize(("name", "parts"), [
    (None, ["One token", "The learned scale γ and shift β", "All tokens at once"]),  # GPT-style
    ("llama", ["One token", "What LayerNorm would have done", "The learned scale γ",
               "All tokens at once"])])
def test_the_normalisation_page_is_in_tabs(modern_models, name, parts):
    """One part at a time (issue 49: the RMSNorm page ran to ~6,600 px on a projector)."""
    at = open_page("pages/3_LayerNorm.py", PROMPT)
    if name is not None:
        at = choose(at, name)
    assert_clean(at)
    assert [t.label for t in at.tabs] == parts
