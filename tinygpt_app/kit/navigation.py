"""The app's pages, in one place: the sections of the navigation and the page files in each.

app.py builds ``st.navigation`` from SECTIONS (the home page first, listed as "Home"); the
home page's links and the tests read the same list. A page file's URL path comes from its name
without its number: ``pages/4_Attention.py`` is served at ``/Attention`` (given to st.Page
as its url_path, so the rule is ours, not inferred).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import streamlit as st

from tinygpt_app.host import host

# The sidebar's close button («), which the app's page menu clicks after a page is chosen on a
# phone or a projector (kit.navigation.close_sidebar_on_choice): Streamlit's own menu does that
# only for a mobile user agent. Its data-testid is Streamlit's; a browser test checks it
# (tests/e2e/test_lesson_room_e2e.py). Renamed, the sidebar simply stays open.
SIDEBAR_CLOSE_BUTTON = "[data-testid='stSidebarCollapseButton'] button"

HOME = "app.py"
HOME_TITLE, HOME_ICON = "Home", ":material/home:"
SECTIONS: dict[str, list[str]] = {
    "Lesson": [
        "pages/1_Lesson.py",
    ],
    "The forward pass": [
        "pages/2_Tokens_and_embeddings.py",
        "pages/3_LayerNorm.py",
        "pages/4_Attention.py",
        "pages/5_Residual_stream.py",
        "pages/6_Logits.py",
    ],
    "Decoding": [
        "pages/7_Softmax_and_sampling.py",
        "pages/8_Decoding.py",
        "pages/9_Chat.py",
    ],
    "Experiments and training": [
        "pages/10_What_if.py",
        "pages/11_Interventions.py",
        "pages/12_Training.py",
        "pages/13_Architectures.py",
    ],
    "Explain a prediction": [
        "pages/14_Why_this_token.py",
        "pages/15_Compare_prompts.py",
    ],
    "Class": [
        "pages/16_Class.py",
    ],
}
PAGE_FILES: list[str] = [path for paths in SECTIONS.values() for path in paths]
# The pages (URL paths, "" for Home) that show the answer of a class question of each kind: the
# model's next-token guess (its top tokens, its probabilities, the logit lens's last layer), or
# a head's attention weights. While a question is open they hold their body back (kit.frame).
ANSWER_PAGES: dict[str, frozenset[str]] = {
    "next_token": frozenset({"", "Residual_stream", "Logits", "Softmax_and_sampling",
                             "Decoding", "What_if", "Why_this_token", "Compare_prompts",
                             "Lesson", "Architectures", "Interventions", "Chat"}),
    "attention": frozenset({"Attention", "Lesson"}),
}


def shows_answer(path: str, kinds: set[str]) -> bool:
    """Does the page at URL path `path` show the answer of an open question of `kinds`?"""
    return any(path in ANSWER_PAGES.get(kind, frozenset()) for kind in kinds)


# the menu says what the page's title says, where the file name (kept for the URL) does not
MENU_TITLES = {"LayerNorm": "Normalisation"}


def url_path(page_file: str) -> str:
    """The URL path a page file is served at: "pages/7_Softmax_and_sampling.py" ->
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

Page = Any  # what st.Page returns (Streamlit's StreamlitPage)
_TEMPLATES: dict[str, Page] = {}
_HOME: list[Page] = []  # the Home page of the latest run of app.py (a function page)
_LOCK = threading.Lock()
KEY_CURRENT = "navigation.current"  # the URL path st.navigation chose for this tab's last run
_RUNNING: ContextVar[str | None] = ContextVar("tinygpt_page", default=None)  # this run's page


def app_pages(home: Callable[[], None]) -> dict[str, list[Page]]:
    """This run's pages for st.navigation, by section ("" holds Home, the default page)."""
    with _LOCK:
        if not _TEMPLATES:
            _TEMPLATES.update({file: st.Page(file, url_path=url_path(file),
                                             title=MENU_TITLES.get(url_path(file)))
                               for file in PAGE_FILES})
        # no icon: Streamlit would make a page's material icon the tab's icon, fetched from a
        # font CDN (issue 25); the app's menu draws HOME_ICON itself, from the bundled font
        home_page = st.Page(home, title=HOME_TITLE, default=True)
        _HOME[:] = [home_page]
    return {"": [home_page]} | {section: [copy.copy(_TEMPLATES[file]) for file in files]
                                for section, files in SECTIONS.items()}


def navigate(home: Callable[[], None]) -> None:
    """app.py's navigation: every page by section, Streamlit's own menu hidden; remembers the
    page chosen (st.navigation returns it) and runs it."""
    chosen = st.navigation(app_pages(home), position="hidden")
    st.session_state[KEY_CURRENT] = chosen.url_path  # for the page's fragments' own reruns
    token = _RUNNING.set(chosen.url_path)
    try:
        chosen.run()
    finally:  # also after st.stop() and st.rerun()
        _RUNNING.reset(token)


def begin_page_run() -> None:
    """At the top of every full page run (the frame): a page file run on its own, without
    app.py (AppTest.from_file and switch_page, a fresh server's first deep link), forgets the
    page app.py chose for an earlier run of this tab."""
    if _RUNNING.get() is None:
        st.session_state.pop(KEY_CURRENT, None)


def through_navigation() -> bool:
    """Does this run go through app.py's st.navigation (False: a page file run on its own, which
    knows no other page)? A fragment's own rerun answers for its page's last full run."""
    return _RUNNING.get() is not None or KEY_CURRENT in st.session_state


def current_url_path() -> str:
    """The URL path of the page this run draws ("" for Home): the page st.navigation chose; for
    a page file run on its own, its file name."""
    running = _RUNNING.get()
    if running is not None:
        return running
    if KEY_CURRENT in st.session_state:  # a fragment's own rerun
        return str(st.session_state[KEY_CURRENT])
    name = Path(host().streamlit.script_path_of_this_run()).name
    for file in PAGE_FILES:
        if Path(file).name == name:
            return url_path(file)
    return ""


def page_file(path: str) -> str:
    """The page file served at the URL path `path` (Home for anything unknown)."""
    for file in PAGE_FILES:
        if url_path(file) == path:
            return file
    return HOME


def page(file: str) -> Page | str:
    """The page `file` for st.switch_page / st.page_link: a copy of its st.Page when this tab
    runs through app.py's navigation (no disk access), else the file name."""
    template = (_HOME or [None])[0] if file == HOME else _TEMPLATES.get(file)
    if template is None or not through_navigation():
        return file
    return copy.copy(template)


def script_hash(path: str) -> str | None:
    """Streamlit's id of the page served at the URL path `path` (None before app.py has run,
    for an unknown path, or when Streamlit no longer says); safe from any thread."""
    if path == "" and _HOME:
        return host().streamlit.page_hash(_HOME[0])
    for template in list(_TEMPLATES.values()):
        if template.url_path == path:
            return host().streamlit.page_hash(template)
    return None


def menu_pages() -> tuple[Page, dict[str, list[Page]]] | None:
    """Home and the sections' pages to link to, or None when this run has no navigation."""
    home = page(HOME)
    if isinstance(home, str):
        return None
    return home, {section: [page(file) for file in files] for section, files in SECTIONS.items()}


# ----------------------------------------------------------------------------- one tap per page
# On a phone the open sidebar covers the page, and in projector mode it covers the chart the
# room looks at: a page chosen in the app's menu closes it, as Streamlit's own menu does for a
# mobile browser. A small component of the app's own (inline script, nothing fetched) listens
# for clicks on the menu's links, once per page load.

CLOSER_KEY = "navigation.closer"
CLOSER_JS = """
const CLOSE = "SIDEBAR_CLOSE_BUTTON";
const COVERS = "(max-width: 767.98px)";  // where Streamlit's sidebar lies over the page

function projecting() {
  const flag = new URLSearchParams(window.location.search).get("projector") || "";
  return ["1", "true", "on"].includes(flag.toLowerCase());
}

export default function (component) {
  window.tinygptMenu = component.data.menu;
  if (window.tinygptMenuCloses) {
    return;
  }
  window.tinygptMenuCloses = true;
  document.addEventListener("click", (event) => {
    const menu = window.tinygptMenu;
    const link = event.target instanceof Element ? event.target.closest(menu + " a") : null;
    if (link && (window.matchMedia(COVERS).matches || projecting())) {
      window.setTimeout(() => document.querySelector(CLOSE)?.click(), 0);
    }
  }, true);
}
""".replace("SIDEBAR_CLOSE_BUTTON", SIDEBAR_CLOSE_BUTTON.replace('"', '\\"'))
_CLOSER = st.components.v2.component(
    "tinygpt_close_sidebar", js=CLOSER_JS, isolate_styles=False,
    css=f".st-key-{CLOSER_KEY.replace('.', '-')} {{ display: none; }}")  # no room, no gap


def close_sidebar_on_choice(menu_selector: str) -> None:
    """Make a click on a link inside `menu_selector` (the app's page menu) close the sidebar
    on a phone-sized screen and in projector mode (?projector=1)."""
    _CLOSER(key=CLOSER_KEY, data={"menu": menu_selector}, height=0)
