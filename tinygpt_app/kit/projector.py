"""Projector mode: the app as a teacher projects it on a low-resolution beamer (issues 17, 25).

A toggle in the sidebar, kept in the link as ``?projector=1``. When it is on: larger type (one
fixed, app-owned style sheet: ``PROJECTOR_CSS``, beside the Streamlit
data-testid names it targets), the sidebar collapsed on opening, at most two charts a row
(``widgets.columns``; the Softmax page puts its controls beside the two charts they change, in
one 1280 x 720 screen), tables as large as the text (``widgets.projected_table``) and charts with
larger fonts, thicker lines and a high-contrast palette (``charts.common.projector_style``,
applied in ``widgets.show_chart``: one place).
"""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit.controls import PROJECTOR
from tinygpt_app.kit.state import control, control_value, has_control, parse_flag

# Streamlit's data-testid names the projector style sheet relies on; the browser test fails
# when one of them matches nothing on a live page (a rename upstream).
PROJECTOR_SELECTORS = ("[data-testid='stMainBlockContainer']",
                       "[data-testid='stCaptionContainer']")

# The app's own text, never user text. Streamlit sizes its text in rem: a larger root font
# scales body text, headings, widgets and captions together. Less empty space above the title
# (4rem: just below the 3.75rem header bar; Streamlit leaves 6rem) and no width cap, so a
# 1280 x 720 beamer shows more of the page in its first screen.
# The page title is smaller than Streamlit's 2.75rem: on a beamer the room reads the charts,
# and every rem above them pushes a control or a chart off the first screen.
PROJECTOR_CSS = f"""<style>
html {{ font-size: 22px; }}
{PROJECTOR_SELECTORS[0]} {{ padding-top: 3.5rem; max-width: 100%; }}
{PROJECTOR_SELECTORS[0]} h1 {{ font-size: 1.75rem; padding-bottom: 0.25rem; }}
{PROJECTOR_SELECTORS[1]} {{ font-size: 0.95rem; }}
</style>"""

KEY = "sidebar.projector"  # the widget; its value travels as ?projector=
PARAM = PROJECTOR.name


def requested() -> bool:
    """Is projector mode on, before the sidebar is drawn (for st.set_page_config)?

    The session's value when it has one, else the link's; never a warning here (the toggle
    warns about a bad value when it is drawn).
    """
    if has_control(PARAM):
        return bool(control_value(PARAM))
    try:
        return parse_flag(st.query_params.get(PARAM, "0"))
    except ValueError:
        return False


def is_on() -> bool:
    """Is projector mode on in this run (after the toggle was drawn)?"""
    return bool(control_value(PARAM, False))


def toggle() -> bool:
    """The sidebar's projector toggle (in the link as ?projector=1); the larger type with it."""
    on = control(st.toggle, "Projector mode", KEY, PROJECTOR,
                 help="Larger type and charts, controls beside their charts, the sidebar "
                      "closed: for showing the app on a projector. It stays on in the link.")
    if on:
        st.html(PROJECTOR_CSS)  # Streamlit's data-testid names: see above
    return on
