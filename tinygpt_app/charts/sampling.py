"""Charts of softmax and sampling: the top next-token probabilities, the ranked bars split into
kept and removed, the cumulative curve top-p reads, the renormalised kept tokens, and the draw."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    BAR_BLUE,
    BLUE,
    FADED,
    ORANGE,
    VERMILION,
    axis,
    figure,
    hline,
    vline,
)

KEPT_COLOUR, REMOVED_COLOUR, PICKED_COLOUR = BLUE, ORANGE, VERMILION
# Cut bars are striped and the picked segment crossed, so colour is not the only sign.
CUT_PATTERN, PICKED_PATTERN = "/", "x"
KEPT_NAME, CUT_NAME = "kept", "cut (striped)"  # short: the legend sits in a corner
LIGHT_BLUE = "#56B4E9"
TOP_LEGEND = dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom")
# Ranked bars fall from left to right: their top right corner is always empty, and a legend
# there never meets the title, however narrow the chart (a phone, a projector's column).
CORNER_LEGEND = dict(x=1, y=1, xanchor="right", yanchor="top", bgcolor="rgba(255,255,255,0.8)")


def top_probabilities(tokens: Sequence[str], probs: Sequence[float], title: str) -> go.Figure:
    """Horizontal bars of next-token probabilities, the most likely on top."""
    p = np.asarray(probs, dtype=np.float32)
    trace = dict(type="bar", x=p, y=list(tokens), orientation="h", marker=dict(color=BAR_BLUE),
                 text=[f"{x:.1%}" for x in p], textposition="auto",
                 hovertemplate="%{y}: %{x:.4f}<extra></extra>")
    return figure([trace], title, max(240, 60 + 28 * len(p)),
                  yaxis=dict(autorange="reversed", type="category"),
                  xaxis=axis("probability", range=[0, max(1e-9, float(p.max()) * 1.15)]))


def ranked_bars(labels: Sequence[str], probs: np.ndarray, kept: np.ndarray, title: str,
                picked: int | None = None, y_title: str = "probability",
                height: int = 340) -> go.Figure:
    """Bars of ranked probabilities: plain blue = can still be picked, striped orange = cut by
    top-k/top-p (the legend names both).

    labels, probs, kept: (m,) in rank order; picked: index (in those m) of the chosen token.
    """
    p = np.asarray(probs, dtype=np.float32)
    kept = np.asarray(kept, dtype=bool)
    traces = []
    for name, mask, colour, pattern in ((KEPT_NAME, kept, KEPT_COLOUR, ""),
                                        (CUT_NAME, ~kept, REMOVED_COLOUR, CUT_PATTERN)):
        idx = np.flatnonzero(mask)
        traces.append(dict(
            type="bar", x=[labels[i] for i in idx], y=p[idx], name=name,
            marker=dict(color=colour, pattern=dict(shape=pattern)),
            hovertemplate="%{x}: p = %{y:.4f}<extra>" + name + "</extra>",
        ))
    notes = []
    if picked is not None and 0 <= picked < len(p):
        notes.append(dict(x=labels[picked], y=float(p[picked]), text="picked", showarrow=True,
                          arrowhead=2, ax=0, ay=-30, font=dict(color=PICKED_COLOUR)))
    return figure(
        traces, title, height, barmode="overlay", annotations=notes, legend=CORNER_LEGEND,
        showlegend=True,
        xaxis=axis("token, most likely first", type="category", categoryorder="array",
                   categoryarray=list(labels), tickangle=-90),
        # room above the tallest bar for the "picked" arrow, and no further
        yaxis=axis(y_title, range=[0, max(1e-9, float(p.max()) * 1.3)], nticks=4),
    )


def cumulative_curve(cumulative: np.ndarray, top_p: float | None, n_kept: int,
                     title: str, height: int = 320) -> go.Figure:
    """Cumulative probability by rank (what top-p reads): the p line and the cutoff marked.

    cumulative (m,): running sum over the ranked tokens (m may be fewer than v); the first
    n_kept ranks survive the filters.
    """
    c = np.asarray(cumulative, dtype=np.float32)
    ranks = np.arange(1, len(c) + 1)
    k = int(min(max(n_kept, 1), len(c)))
    traces = [dict(type="scatter", x=ranks[:k], y=c[:k], name="kept", mode="lines+markers",
                   fill="tozeroy", line=dict(color=KEPT_COLOUR), marker=dict(size=4),
                   hovertemplate="rank %{x}: cumulative %{y:.4f}<extra>kept</extra>")]
    if k < len(c):
        traces.append(dict(type="scatter", x=ranks[k - 1:], y=c[k - 1:], name="removed",
                           mode="lines", line=dict(color=REMOVED_COLOUR),
                           hovertemplate="rank %{x}: cumulative %{y:.4f}<extra>removed</extra>"))
    shapes = [vline(k + 0.5, "dot", PICKED_COLOUR)]
    notes = [dict(x=k + 0.5, y=0.02, yref="y", text=f"cutoff after rank {k}", showarrow=False,
                  xanchor="left", font=dict(color=PICKED_COLOUR))]
    if top_p is not None:
        # mid grey: at least 3:1 (WCAG for lines) on the light and on the dark theme
        shapes.append(hline(top_p, "dash", "#888888"))
        # at the left, where the rising curve is still below p: the curve never crosses it
        notes.append(dict(x=0, xref="paper", y=top_p, text=f"top-p = {top_p:g}",
                          showarrow=False, xanchor="left", yanchor="bottom"))
    return figure(traces, title, height, shapes=shapes, annotations=notes,
                  legend=TOP_LEGEND,
                  xaxis=axis("rank (1 = most likely)"),
                  yaxis=axis("cumulative probability", range=[0, 1.05]))


def renormalised(labels: Sequence[str], before: np.ndarray, after: np.ndarray,
                 title: str) -> go.Figure:
    """The kept tokens' probability before the cut and after renormalising (sum back to 1)."""
    traces = [dict(type="bar", x=list(labels), y=np.asarray(values, dtype=np.float32),
                   name=name, marker=dict(color=colour),
                   hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>")
              for name, values, colour in (("before the cut", before, FADED),
                                           ("after renormalising", after, KEPT_COLOUR))]
    return figure(traces, title, 320, barmode="group", legend=TOP_LEGEND,
                  xaxis=dict(type="category", tickangle=-90),
                  yaxis=axis("probability", rangemode="tozero"))


def draw_bar(starts: np.ndarray, widths: np.ndarray, labels: Sequence[str], u: float,
             picked_segment: int, title: str) -> go.Figure:
    """The cumulative bar [0, 1): one segment per token (small ones merged, grey, labelled
    "…"), the draw u as a line, and the segment it falls in highlighted."""
    n = len(widths)
    colours = [FADED if lab.startswith("…") else (LIGHT_BLUE if i % 2 else KEPT_COLOUR)
               for i, lab in enumerate(labels)]
    patterns = [""] * n
    if 0 <= picked_segment < n:
        colours[picked_segment] = PICKED_COLOUR
        patterns[picked_segment] = PICKED_PATTERN
    trace = dict(
        type="bar", y=["draw"] * n, x=np.asarray(widths, dtype=np.float32),
        base=np.asarray(starts, dtype=np.float32), orientation="h",
        marker=dict(color=colours, line=dict(color="white", width=0.5),
                    pattern=dict(shape=patterns)),
        customdata=np.asarray(labels, dtype=object),
        hovertemplate="%{customdata}<br>from %{base:.4f}, width %{x:.4f}<extra></extra>",
    )
    return figure(
        [trace], title, 200, showlegend=False, barmode="overlay",
        shapes=[dict(type="line", x0=u, x1=u, y0=-0.6, y1=0.6,
                     line=dict(color="black", width=3))],
        annotations=[dict(x=u, y=0.6, text=f"u = {u:.4f}", showarrow=False,
                          yanchor="bottom")],
        xaxis=axis("cumulative probability (tokens in id order)", range=[0, 1]),
        yaxis=dict(showticklabels=False),
    )
