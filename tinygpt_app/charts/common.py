"""What every chart shares: the figure constructor, the heatmap and bar builders, colours, and
the cell budget that keeps a page light in the browser.

Colours (all colour-blind safe): heatmaps of values that can be negative use RdBu centred at 0;
non-negative maps use Cividis (Viridis for what each sublayer writes, to tell that map from the
residual norms beside it); named series use the Okabe-Ito palette.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

SEQUENTIAL = "Cividis"
DIVERGING = "RdBu"
MASKED_GREY = "#c8c8c8"
# Okabe-Ito colours for charts with a few named series
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
BLUE, ORANGE, GREEN, VERMILION = "#0072B2", "#E69F00", "#009E73", "#D55E00"
FADED = "#c8c8c8"
BAR_BLUE = "#3b6ea5"

MAX_HEATMAP_CELLS = 200_000  # per page: a browser stays responsive below this (read at run time)
# Columns of one heatmap: a projector is 1,280 pixels wide, so more columns are thinner than a
# pixel and show nothing more, while each one costs every student's browser its bytes.
MAX_HEATMAP_COLUMNS = 1_024
MAX_TEXT_CELLS = 600  # above this many cells a heatmap shows colour only, no per-cell text
# Masked attention cells are crossed, not only grey, so colour is not the only sign (issue 17).
# One marker per masked cell: above this many the crosses would blur into a grey area anyway,
# and the caption and the hover still say "masked".
MAX_MASK_MARKS = 2_500
MASK_LEGEND = "× masked (a later token)"

# No named template: applying one costs ~15 ms per figure, and st.plotly_chart's own theme
# styles every chart anyway.
MODEBAR_ROOM = 26  # px kept free above a chart's title for the modebar, which is always shown
_MARGIN = dict(l=10, r=10, t=50 + MODEBAR_ROOM, b=10)
# Plotly never wraps a title: one longer than its chart is cut. Titles are wrapped at word ends
# into lines that fit the narrowest chart the app draws: a phone's (~330 px at Streamlit's
# bold 15 px, ~7 px a character) and a projected half-width column (~560 px at 24 px).
TITLE_LINE_CHARS = 40
TITLE_LINE_PX = 22  # one more title line: the top margin grows by this much
# A legend of a few series sits in a row above the plot, left-aligned, with a row of the top
# margin of its own: below the plot it met the x axis's title once the tick labels stood
# upright (a phone), and Plotly does not move it out of the way.
LEGEND_ABOVE = dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom")


def plotly_text(value):
    """Text for Plotly, which reads a few HTML tags in labels (<a href>, <b>, <br>): a token
    such as "<a href=...>" must show as itself, never become a link. Lists are done item by
    item; numbers pass through."""
    if isinstance(value, str):
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if isinstance(value, (list, tuple)) and any(isinstance(v, str) for v in value):
        return [plotly_text(v) for v in value]
    return value


_TEXT_KEYS = ("x", "y", "text", "hovertext", "labels")


def figure(traces: Sequence[dict], title: str, height: int, **layout) -> go.Figure:
    """A Plotly figure from plain dicts, built and validated in one call.

    Every chart of the app is made here: one constructor call costs a quarter of the
    add_trace + update_layout + update_axes sequence, which matters when a slider moves.
    The title sits one modebar row down (in a narrow column the buttons would cover it).
    """
    traces = [_colorbar_title_aside({k: plotly_text(v) if k in _TEXT_KEYS else v
                                     for k, v in tr.items()}) for tr in traces]
    lines = title_lines(title)
    spec = {"margin": _MARGIN, "height": height,
            "title": {"text": "<br>".join(plotly_text(line) for line in lines),
                      "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": MODEBAR_ROOM}},
            **{k: _upright_when_crowded(k, v) for k, v in layout.items()}}
    extra = (len(lines) - 1 + _legend_above(spec)) * TITLE_LINE_PX  # the title's further
    # lines, and the legend's row
    spec["margin"] = {**spec["margin"], "t": spec["margin"].get("t", _MARGIN["t"]) + extra}
    spec["height"] = height + extra  # the plot keeps its height
    inputs = {"data": list(traces), "layout": spec}
    if _shared is not None:  # the app: a figure already built for another session
        return _shared(inputs, lambda: go.Figure(inputs))
    return go.Figure(inputs)


_shared = None  # set by share_figures: (inputs, build) -> figure


def _legend_above(layout) -> bool:
    """Whether a figure's legend is LEGEND_ABOVE (a plain dict or a Plotly layout)."""
    legend = layout.get("legend") if isinstance(layout, dict) else layout.legend.to_plotly_json()
    return bool(legend) and all(legend.get(k) == v for k, v in LEGEND_ABOVE.items())


def title_lines(title: str, width: int = TITLE_LINE_CHARS) -> list[str]:
    """A chart title as lines of at most `width` characters, broken between words (a word
    longer than a line stays whole)."""
    return textwrap.wrap(title, width, break_long_words=False, break_on_hyphens=False) or [""]


def share_figures(get) -> None:
    """Let `get(inputs, build)` answer every figure() call (tinygpt_app.compute.figure_cache: a
    server's
    sessions share the figures they build). The figures it returns are read-only."""
    global _shared
    _shared = get


def _upright_when_crowded(key: str, value):
    """An x axis whose tick labels would touch turns them upright (90 degrees), never to
    Plotly's in-between 30: slanted labels of several characters still run into each other."""
    if key.startswith("xaxis") and isinstance(value, dict) and "tickangle" not in value:
        return {"autotickangles": [0, 90], **value}
    return value


def _colorbar_title_aside(trace: dict) -> dict:
    """A colour bar's title beside the bar rather than above it, where it met the top tick."""
    bar = trace.get("colorbar")
    if isinstance(bar, dict) and isinstance(bar.get("title"), dict):
        trace = {**trace, "colorbar": {**bar, "title": {"side": "right", **bar["title"]}}}
    return trace


def axis(title: str, **more) -> dict:
    """An axis with a title (Plotly's nested form)."""
    return dict(title=dict(text=title), **more)


def rows_height(rows: int) -> int:
    """A heatmap's height for `rows` rows: 22 px a row, between 260 and 900 px."""
    return int(min(900, max(260, 120 + 22 * rows)))


def heatmap(
    z: np.ndarray,
    title: str,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    diverging: bool = True,
    height: int | None = None,
    hovertemplate: str = "row %{y}<br>column %{x}<br>value %{z:.4f}<extra></extra>",
) -> go.Figure:
    """A heatmap of a 2-D array (rows top to bottom), diverging RdBu centred at 0 by default."""
    z = np.asarray(z, dtype=np.float32)
    if x_labels is not None and [str(s) for s in x_labels] == [str(j) for j in range(z.shape[1])]:
        x_labels = None  # the column numbers: a number axis, whose few labels fit any width
    colours = dict(colorscale=DIVERGING, zmid=0) if diverging else dict(colorscale=SEQUENTIAL)
    trace = dict(
        type="heatmap", z=z,
        x=list(x_labels) if x_labels is not None else None,
        y=list(y_labels) if y_labels is not None else None,
        hovertemplate=hovertemplate,
        **colours,
    )
    return figure([trace], title, height or rows_height(z.shape[0]),
                  xaxis=axis(x_title, type="category" if x_labels is not None else None),
                  yaxis=axis(y_title, type="category", autorange="reversed"))


def bar(values: np.ndarray, title: str, x_labels: Sequence | None = None,
        x_title: str = "", y_title: str = "", color: str = BAR_BLUE,
        height: int = 280) -> go.Figure:
    """A bar per entry of a 1-D array (e.g. the LayerNorm scale gamma, one bar per dimension)."""
    v = np.asarray(values, dtype=np.float32).ravel()
    x = list(x_labels) if x_labels is not None else list(range(len(v)))
    trace = dict(type="bar", x=x, y=v, marker=dict(color=color),
                 hovertemplate="%{x}: %{y:.4f}<extra></extra>")
    return figure([trace], title, height, xaxis=axis(x_title), yaxis=axis(y_title))


def first_row_within_budget(rows: int, cols: int, budget: int | None = None) -> int:
    """First row to draw so that at most `budget` cells (default MAX_HEATMAP_CELLS) are drawn;
    the last rows are kept."""
    budget = MAX_HEATMAP_CELLS if budget is None else budget
    return max(0, rows - max(1, budget // max(1, cols)))


def vline(x: float, dash: str, colour: str) -> dict:
    """A vertical line across the plot, as a layout shape (much cheaper than add_vline)."""
    return dict(type="line", x0=float(x), x1=float(x), y0=0, y1=1, yref="paper",
                line=dict(dash=dash, color=colour, width=2))


def hline(y: float, dash: str, colour: str, width: float = 1.5) -> dict:
    """A horizontal line across the plot, as a layout shape."""
    return dict(type="line", x0=0, x1=1, xref="paper", y0=float(y), y1=float(y),
                line=dict(dash=dash, color=colour, width=width))


def position_axis(labels: Sequence[str]) -> tuple[list[str], dict]:
    """x values and axis options for one column per token position: a category per position
    (numbered when two tokens are the same text, which categories would merge). Plotly then
    shows as many labels as the chart's real width holds (every second or third on a phone)
    and turns them upright when they would touch."""
    names = [str(s) for s in labels]
    if len(set(names)) < len(names):
        names = [f"{i}:{s}" for i, s in enumerate(names)]
    return names, category_ticks(len(names))


# Plotly spaces the labels of a category axis 1.2 font sizes apart (14 px), but an upright
# label is ~1.3 font sizes wide: neighbours touched. Above this many columns (16 px each on a
# phone's ~250 px plot) only every second label Plotly places is written.
CROWDED_CATEGORIES = 16


def category_ticks(n: int) -> dict:
    """Options of a category x axis of n columns: as many labels as the chart's width holds,
    every second of them when the columns may be narrower than an upright label."""
    crowded = {"ticklabelstep": 2} if n > CROWDED_CATEGORIES else {}
    return dict(type="category", tickmode="auto", **crowded)


POSITION_LABEL_ROOM = 90  # px more height for a chart whose position labels may stand upright


def stage_ticks(labels: Sequence[str]) -> dict:
    """A y axis with one named row per stage, top to bottom."""
    return dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=list(labels),
                autorange="reversed")


# ----------------------------------------------------------------------------- projector

# High contrast on a washed-out beamer: black text, dark grid lines, and series colours from
# the Okabe-Ito palette's darkest (still colour-blind safe); sizes readable from the back row.
PROJECTOR_FONT = 20  # px: tick labels, legends, hover (Plotly's default is 12)
PROJECTOR_TITLE_FONT = 24
PROJECTOR_TITLE_LINE_PX = 32  # a title line at 24 px
PROJECTOR_HEIGHT = 1.4  # charts grow with their labels
PROJECTOR_LINE = 4  # px: lines of line charts (Plotly's default is 2)
PROJECTOR_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00")


def projector_style(fig: go.Figure) -> go.Figure:
    """The same figure as a projector shows it: larger fonts, thicker lines, high contrast.

    Updates `fig` in place (callers pass a copy of anything they keep) and returns it.
    """
    title = fig.layout.title.text or ""
    lines = title.count("<br>") + 1 + _legend_above(fig.layout)  # each line of the title
    # (and the legend's row) grows from 22 to 32 px
    top = (fig.layout.margin.t if fig.layout.margin.t is not None else _MARGIN["t"])
    fig.update_layout(
        font=dict(size=PROJECTOR_FONT, color="#000000"),
        title_font=dict(size=PROJECTOR_TITLE_FONT, color="#000000"),
        hoverlabel=dict(font=dict(size=PROJECTOR_FONT)),
        legend=dict(font=dict(size=PROJECTOR_FONT)),
        colorway=list(PROJECTOR_COLOURS),
        margin=dict(t=top + lines * (PROJECTOR_TITLE_LINE_PX - TITLE_LINE_PX)),
        uniformtext=dict(minsize=PROJECTOR_FONT - 4, mode="show"),  # text in bars too
    )
    if fig.layout.height:  # larger labels need more room: every row label stays
        fig.update_layout(height=int(fig.layout.height * PROJECTOR_HEIGHT))
    axes = dict(tickfont=dict(size=PROJECTOR_FONT - 2, color="#000000"),
                title_font=dict(size=PROJECTOR_FONT, color="#000000"),
                gridcolor="#9aa5b1", linecolor="#000000", linewidth=2, showline=True)
    fig.update_xaxes(**axes)
    fig.update_yaxes(**axes)
    fig.update_traces(line=dict(width=PROJECTOR_LINE), selector=dict(type="scatter"))
    # points named on the chart (beam tree nodes, the top logits): their names grow too
    fig.update_traces(textfont=dict(size=PROJECTOR_FONT - 4), selector=dict(mode="markers+text"))
    fig.update_traces(marker=dict(line=dict(color="#000000", width=1)), selector=dict(type="bar"))
    fig.update_traces(colorbar=dict(tickfont=dict(size=PROJECTOR_FONT - 2)),
                      selector=dict(type="heatmap"))
    return fig


def mask_marks(masked: np.ndarray, x: Sequence[str], y: Sequence[str], budget: int | None = None,
               legend: bool = True, **axes) -> list[dict]:
    """A cross on every masked cell of one map, and the legend entry that names it ([] when
    there are none or more than `budget`, default MAX_MASK_MARKS). axes: xaxis="x2", ..."""
    rows, cols = np.nonzero(masked)
    if not 0 < len(rows) <= (MAX_MASK_MARKS if budget is None else budget):
        return []
    return [dict(type="scatter", mode="markers", x=[x[j] for j in cols], y=[y[i] for i in rows],
                 marker=dict(symbol="x-thin", size=7, line=dict(width=1, color="#555555")),
                 name=MASK_LEGEND, showlegend=legend, hoverinfo="skip", **axes)]
