"""The app's pages, in one place: the sections of the navigation and the page files in each.

app.py builds ``st.navigation`` from SECTIONS (the home page first, listed as "Home"); the
home page's links and the tests read the same list. A page file's URL path comes from its name
without the number: ``pages/3_Attention.py`` is served at ``/Attention``.
"""

from __future__ import annotations

HOME = "app.py"
SECTIONS: dict[str, list[str]] = {
    "Lesson": [
        "pages/13_Lesson.py",
    ],
    "The forward pass": [
        "pages/1_Tokens_and_embeddings.py",
        "pages/2_LayerNorm.py",
        "pages/3_Attention.py",
        "pages/4_Residual_stream.py",
        "pages/5_Logits.py",
    ],
    "Decoding": [
        "pages/6_Softmax_and_sampling.py",
        "pages/7_Decoding.py",
    ],
    "Experiments and training": [
        "pages/8_What_if.py",
        "pages/9_Training.py",
    ],
    "Explain a prediction": [
        "pages/10_Why_this_token.py",
        "pages/11_Compare_prompts.py",
    ],
    "Class": [
        "pages/12_Class.py",
    ],
}
PAGE_FILES: list[str] = [path for paths in SECTIONS.values() for path in paths]


def url_path(page_file: str) -> str:
    """The URL path a page file is served at: "pages/6_Softmax_and_sampling.py" ->
    "Softmax_and_sampling" (the same rule as Streamlit's, which drops the leading number)."""
    stem = page_file.rsplit("/", 1)[-1].removesuffix(".py")
    number, _, name = stem.partition("_")
    return name if number.isdigit() else stem
