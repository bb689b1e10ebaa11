"""The app's pages, in one place: the sections of the navigation and the page files in each.

app.py builds ``st.navigation`` from SECTIONS (the home page first, listed as "Home"); the
home page's links and the tests read the same list. A page file's URL path comes from its name
without the number: ``pages/3_Attention.py`` is served at ``/Attention``.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable

import streamlit as st
from streamlit.navigation.page import StreamlitPage
from streamlit.runtime.scriptrunner import get_script_run_ctx

HOME = "app.py"
HOME_TITLE, HOME_ICON = "Home", ":material/home:"
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


# ----------------------------------------------------------------------------- st.Page objects
# An st.Page of a file resolves that file on the disk: a system call per folder of its path,
# each one letting go of the GIL and waiting to get it back while other students' pages run
# (measured: most of a page run's wall time in a busy class went to such waits). So the file
# pages are made once per process and each run gets copies (a run marks the page it runs on
# the object itself, so two runs must not share one).

_TEMPLATES: dict[str, StreamlitPage] = {}
_HOME: list[StreamlitPage] = []  # the Home page of the latest run of app.py (a function page)
_LOCK = threading.Lock()


def app_pages(home: Callable[[], None]) -> dict[str, list[StreamlitPage]]:
    """This run's pages for st.navigation, by section ("" holds Home, the default page)."""
    with _LOCK:
        if not _TEMPLATES:
            _TEMPLATES.update({file: st.Page(file) for file in PAGE_FILES})
        home_page = st.Page(home, title=HOME_TITLE, icon=HOME_ICON, default=True)
        _HOME[:] = [home_page]
    return {"": [home_page]} | {section: [copy.copy(_TEMPLATES[file]) for file in files]
                                for section, files in SECTIONS.items()}


def page(file: str) -> StreamlitPage | str:
    """The page `file` for st.switch_page / st.page_link: a copy of its st.Page when this run's
    navigation has it (no disk access), else the file name (a page file run on its own, as
    AppTest.from_file does, has no navigation)."""
    template = (_HOME or [None])[0] if file == HOME else _TEMPLATES.get(file)
    ctx = get_script_run_ctx()
    if template is None or ctx is None \
            or template._script_hash not in ctx.pages_manager.get_pages():
        return file
    return copy.copy(template)


def script_hash(url_path: str) -> str | None:
    """Streamlit's id of the page served at `url_path` (None before app.py has run, or for an
    unknown path); safe from any thread."""
    if url_path == "" and _HOME:
        return _HOME[0]._script_hash
    for template in list(_TEMPLATES.values()):
        if template.url_path == url_path:
            return template._script_hash
    return None


def menu_pages() -> tuple[StreamlitPage, dict[str, list[StreamlitPage]]] | None:
    """Home and the sections' pages to link to, or None when this run has no navigation."""
    home = page(HOME)
    if not isinstance(home, StreamlitPage):
        return None
    return home, {section: [page(file) for file in files] for section, files in SECTIONS.items()}
