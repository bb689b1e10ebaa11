"""Projector mode: the app as a teacher projects it on a low-resolution beamer (issues 17, 25).

A toggle in the sidebar, kept in the link as ``?projector=1``. When it is on: larger type (one
fixed, app-owned style sheet: ``streamlit_internals.PROJECTOR_CSS``, beside the Streamlit
data-testid names it targets), the sidebar collapsed on opening, at most two charts a row
(``widgets.columns``; the Softmax page puts its controls beside the two charts they change, in
one 1280 x 720 screen), tables as large as the text (``widgets.projected_table``) and charts with
larger fonts, thicker lines and a high-contrast palette (``charts.common.projector_style``,
applied in ``widgets.show_chart``: one place).
"""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit.state import control, control_value, has_control, parse_flag
from tinygpt_app.streamlit_internals import PROJECTOR_CSS

KEY = "sidebar.projector"  # the widget; its value travels as ?projector=
PARAM = "projector"


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
    on = control(st.toggle, "Projector mode", KEY, False, parse_flag,
                 help="Larger type and charts, controls beside their charts, the sidebar "
                      "closed: for showing the app on a projector. It stays on in the link.")
    if on:
        st.html(PROJECTOR_CSS)  # Streamlit's data-testid names: see there
    return on
