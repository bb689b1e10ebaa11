"""The small things pages draw besides charts: explanations, token chips, number tables, and
``show_chart``, the one way a chart reaches the page (with its PNG button and CSV download).

Tables behind the charts: ``grid_table`` (a heatmap: rows x columns, labelled),
``series_table`` (bars / lines: one column per series), ``lens_table`` (a logit lens).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from pandas.api.types import is_numeric_dtype
from streamlit.errors import StreamlitPageNotFoundError

from tinygpt_app.charts.common import projector_style
from tinygpt_app.compute.model_cards import NO_CARD, card_rows, models_having
from tinygpt_app.kit import projector
from tinygpt_app.kit.navigation import url_path
from tinygpt_app.kit.plain_text import plain

ALT_PREFIX = "Chart: "  # the start of every chart's sentence (tests find them by it)
CHIP_TEXT = "#0b1220"  # chips have light backgrounds in both themes: dark text on them, always
CHIP_COLOURS = ("#e8f1fa", "#fdf0d5", "#e6f4ea", "#f3e8f7", "#fde8e4", "#e9eef0")
PLOT_CONFIG = {
    "displayModeBar": True,  # always visible, so students find the camera (PNG) button
    "displaylogo": False,
    # The camera only: zoom, pan, reset and full screen were four more Tab stops per chart for
    # a keyboard user (24 stops on Softmax and sampling). Streamlit's own element toolbar
    # keeps full screen; the numbers stay one click away as the CSV download under the chart.
    "modeBarButtons": [["toImage"]],
}


def explain(markdown: str, latex: str | Sequence[str] | None = None) -> None:
    """A short explanation for a student (the app's own text), with a formula underneath.
    Several formulas (a sequence) are drawn one under the other, never side by side: two
    formulas in one row run past the edge of a phone's screen."""
    st.markdown(markdown)
    if latex:
        st.latex(stacked(latex))


def stacked(latex: str | Sequence[str]) -> str:
    """One formula as it is; several as the lines of one centred block."""
    if isinstance(latex, str):
        return latex
    return r"\begin{gathered}" + r" \\ ".join(latex) + r"\end{gathered}"


def metrics(values: dict[str, str]) -> None:
    """A row of st.metric, label -> the value as written, one column each."""
    for column, (label, value) in zip(st.columns(len(values)), values.items(), strict=True):
        column.metric(label, value)


MAX_PROJECTED_ROWS = 60  # a projected table is plain HTML: all its rows are sent and drawn


def number_table(table: pd.DataFrame, fmt: str = "%+.4f", **kwargs) -> None:
    """st.dataframe with every numeric column printed as `fmt` (cheaper than a pandas Styler);
    in projector mode a plain table as large as the text (projected_table)."""
    if projected_table(table, fmt, hide_index=kwargs.get("hide_index", False)):
        return
    config = {str(c): st.column_config.NumberColumn(format=fmt) for c in table.columns
              if is_numeric_dtype(table[c].dtype)}
    st.dataframe(table, column_config=config, width="stretch", **kwargs)


def projected_table(table: pd.DataFrame, fmt: str | None, *, hide_index: bool) -> bool:
    """Draw `table` as st.table when projector mode is on and it is short; True if drawn."""
    if not projector.is_on() or len(table) > MAX_PROJECTED_ROWS:
        return False
    numeric = [c for c in table.columns if is_numeric_dtype(table[c].dtype)
               and not pd.api.types.is_bool_dtype(table[c].dtype)]
    styler = table.style
    if fmt:
        styler = styler.format({c: (lambda x, f=fmt: f % x) for c in numeric})
    st.table(styler.hide(axis="index") if hide_index else styler)
    return True


def chips_html(items: Sequence[tuple[str, str]], highlight: int | None = None,
               colours: Sequence[str] | None = None) -> str:
    """Token chips as HTML: items are (text, small caption under it), e.g. ("·the", "id 262").

    Both are escaped, so the result is safe for st.markdown(..., unsafe_allow_html=True).
    colours: one background per chip (e.g. charts.explain.heat_colours); default: cycling.
    """
    chips = []
    for i, (text, caption) in enumerate(items):
        # the highlighted chip differs by more than colour: a thick border and bold text
        border = "3px solid #d1495b;font-weight:bold" if i == highlight else "1px solid #9aa5b1"
        colour = CHIP_COLOURS[i % len(CHIP_COLOURS)] if colours is None else colours[i]
        chips.append(
            f'<span style="display:inline-block;margin:2px;padding:2px 6px;border-radius:6px;'
            f'border:{border};background:{colour};color:{CHIP_TEXT};font-family:monospace;'
            f'text-align:center;line-height:1.25">'
            f'{html.escape(text) or "&nbsp;"}<br><small style="color:#444">'
            f"{html.escape(caption)}</small></span>"
        )
    return '<div style="line-height:2.4">' + "".join(chips) + "</div>"


def chips(items: Sequence[tuple[str, str]], highlight: int | None = None,
          colours: Sequence[str] | None = None) -> None:
    """Draw token chips (see chips_html)."""
    st.markdown(chips_html(items, highlight, colours), unsafe_allow_html=True)


# ----------------------------------------------------------------------------- charts and files


PROJECTED_PER_ROW = 2  # charts side by side on a 1280-pixel beamer, each still ~600 px wide


def columns(spec, **kwargs) -> list:
    """st.columns for charts side by side; in projector mode at most two a row (the larger
    fonts need the width), the rest in rows below: as many places as asked for, in order."""
    count = spec if isinstance(spec, int) else len(spec)
    if not projector.is_on() or count <= PROJECTED_PER_ROW:
        return st.columns(spec, **kwargs)
    places = []
    for first in range(0, count, PROJECTED_PER_ROW):
        row = min(PROJECTED_PER_ROW, count - first)
        places += st.columns(PROJECTED_PER_ROW, **kwargs)[:row] if row > 1 else [st.container()]
    return places


def plot_config(name: str) -> dict:
    """Plotly config: the camera button saves `name`.png at twice the screen resolution."""
    return {**PLOT_CONFIG, "toImageButtonOptions": {"format": "png", "filename": name,
                                                    "scale": 2}}


def csv_bytes(table: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV; the index is written when it labels the rows (tokens, stages...)."""
    labelled = table.index.name is not None or not isinstance(table.index, pd.RangeIndex)
    return table.to_csv(index=labelled, float_format="%.6g").encode("utf-8")


def show_chart(fig: go.Figure, name: str, table: pd.DataFrame | None, *, key: str,
               alt: str) -> None:
    """Draw a chart with its text alternative; `table` (a DataFrame) becomes a CSV download.

    Every chart of the app goes through here. `alt` is one sentence saying what the chart
    shows for this prompt, with its numbers (from tinygpt_app.kit.alt_text): a Plotly figure has
    no accessible name of its own, so the sentence is shown as a caption right before it,
    where a screen reader reads it first. `name` is the file name (name.png, name.csv),
    unique on the page; `key` is the fixed widget key, prefixed by the page's name.
    """
    if not alt.strip():
        raise ValueError(f"chart {name!r} has no text alternative")
    st.caption(f"{ALT_PREFIX}{plain(alt)}")
    if projector.is_on():  # larger fonts, thicker lines, high contrast; a copy, as the
        fig = projector_style(go.Figure(fig.to_dict()))  # caller may keep the figure it
        # passed, and a figure shared by the sessions (figure_cache) is read-only
    st.plotly_chart(fig, width="stretch", config=plot_config(name), key=key)
    if table is not None:
        st.download_button(
            f"CSV: {len(table):,} rows",  # short: a projected column cut the long label
            lambda: csv_bytes(table),  # the CSV is built only when clicked
            file_name=f"{name}.csv", mime="text/csv", key=f"{key}.csv",
            on_click="ignore", icon=":material/download:",
            help="The numbers behind this chart, as a CSV file.",
        )


def grid_table(z: np.ndarray, row_labels: Sequence, col_labels: Sequence,
               rows: str = "row", columns: str = "column") -> pd.DataFrame:
    """A heatmap's numbers as a wide table: one row per y label, one column per x label.

    The corner cell of the CSV names both axes ("query \\ key"). Masked cells stay NaN / -inf.
    """
    index = pd.Index([str(label) for label in row_labels], name=f"{rows} \\ {columns}")
    return pd.DataFrame(np.asarray(z, dtype=np.float32), index=index,
                        columns=[str(label) for label in col_labels])


def series_table(columns: dict[str, np.ndarray], index: Sequence,
                 index_name: str) -> pd.DataFrame:
    """Same-length 1-D series side by side (the numbers of a bar or line chart), rows labelled."""
    return pd.DataFrame({name: np.asarray(values).ravel() for name, values in columns.items()},
                        index=pd.Index(list(index), name=index_name))


def lens_table(probs: np.ndarray, top_tokens: Sequence[Sequence[str]],
               stage_labels: Sequence[str], position_labels: Sequence[str]) -> pd.DataFrame:
    """A logit-lens grid as a long table: one row per (stage, position) cell.

    probs (S, m) = p(top token) and top_tokens (S lists of m strings), as charts.residual.lens.
    """
    S, m = probs.shape
    return pd.DataFrame({
        "stage": np.repeat(list(stage_labels), m),
        "position": list(position_labels) * S,
        "top token": [token for row in top_tokens for token in row],
        "p(top token)": np.asarray(probs, dtype=np.float32).ravel(),
    })


def text_download(text: str, name: str, label: str, *, key: str) -> None:
    """A download button for a plain text file, name.txt."""
    st.download_button(label, text.encode("utf-8"), file_name=f"{name}.txt",
                       mime="text/plain", key=key, on_click="ignore",
                       icon=":material/download:")


def page_link(page_file: str, label: str, query_params: dict[str, str], *, icon: str) -> None:
    """st.page_link to another page of the app with `query_params` in its link.

    A page run on its own (AppTest.from_file, without app.py's navigation) has no pages to
    link to: it gets a plain link to the same URL instead.
    """
    try:
        st.page_link(page_file, label=label, icon=icon, query_params=query_params)
    except StreamlitPageNotFoundError:
        url = f"{url_path(page_file)}?{urlencode(query_params)}"
        st.markdown(f"[{plain(label)}]({url})")


def model_card(card, title: str | None = None) -> None:
    """What a model is, from its card (tinygpt_app.compute.model_cards): one line per fact,
    every word plain text; a model without a card says so in one line."""
    if card is None:
        st.caption(NO_CARD)
        return
    if title:
        st.markdown(f"**{plain(title)}**")
    for label, text in card_rows(card):
        st.markdown(f"**{plain(label)}:** {plain(text)}")


FETCH_ONE = "`python -m tinygpt.models get smollm2` fetches SmolLM2, which has them"


def part_elsewhere(part: str, instead: str, has_part, model_id: str) -> None:
    """A section that does not apply to this model, in one line: what the model does instead,
    and the models of the folder that have `part` (their cards' parts pass `has_part`)."""
    others = models_having(has_part, but=model_id)
    where = (f"{' and '.join(f'*{plain(m)}*' for m in others[:2])} "
             f"{'has' if len(others) == 1 else 'have'} them: choose one in the sidebar's Model "
             "list" if others else FETCH_ONE)
    st.markdown(f"**{plain(part)}**: not in this model ({plain(instead)}). {where}.")
