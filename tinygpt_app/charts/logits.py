"""Charts of the logits: the n x v scores, one row in full, the shift by one that training
scores, a logit rebuilt from its d products (weight tying), and the singular values of W_out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    BLUE,
    DIVERGING,
    ORANGE,
    VERMILION,
    axis,
    category_ticks,
    figure,
    plotly_text,
    position_axis,
)

HIT_COLOURS = {True: BLUE, False: ORANGE}  # the top guess was right / wrong
HIT_PATTERNS = {True: "", False: "/"}  # wrong is striped too: colour is not the only sign


def logits_heatmap(logits: np.ndarray, column_labels: Sequence[str],
                   row_labels: Sequence[str], title: str) -> go.Figure:
    """The logits as a heatmap: rows = positions (n), columns = vocabulary tokens shown (m <= v).

    Red is a high score, blue a low one, centred at 0 on a symmetric range.
    """
    T = logits.shape[0]
    lim = float(np.max(np.abs(logits))) if logits.size else 1.0
    trace = dict(
        type="heatmap", z=logits.astype(np.float32),
        # labels as categories: m + n strings, not an n x m hover array (that cost 0.3 s)
        x=list(column_labels), y=list(row_labels),
        colorscale=DIVERGING, reversescale=True, zmid=0.0, zmin=-lim, zmax=lim,
        colorbar=dict(title=dict(text="logit")),
        hovertemplate="row %{y}<br>token %{x}<br>logit %{z:.3f}<extra></extra>",
    )
    return figure([trace], title, max(320, min(900, 80 + 18 * T)),
                  xaxis=axis("vocabulary token (column)", **category_ticks(len(column_labels))),
                  yaxis=dict(type="category", autorange="reversed"))


MAX_POINT_LABELS = 3  # named marks on the logit row; the others are named on hover


def logit_row(row: np.ndarray, highlight: Sequence[tuple[int, str]], title: str) -> go.Figure:
    """All v logits of one position, token id on x (a full-row overview; Scattergl for speed).

    highlight: (token id, label) pairs marked on top of the cloud, highest first. Only the first
    MAX_POINT_LABELS are named on the chart, in a row above the cloud, evenly spaced in the
    order of their ids, each joined to its mark by a thin line: marks whose ids or logits are
    close would put names written beside them over each other (issue 49, row 6). Every mark
    names its token on hover.
    """
    v = row.shape[0]
    traces = [dict(
        type="scattergl", x=np.arange(v), y=row.astype(np.float32), mode="markers",
        marker=dict(size=3, color="#4c72b0"), name="every token",
        hovertemplate="id %{x}<br>logit %{y:.3f}<extra></extra>",
    )]
    if highlight:
        ids = [i for i, _ in highlight]
        names = [label for _, label in highlight]
        traces.append(dict(
            type="scatter", x=ids, y=row[ids].astype(np.float32), mode="markers",
            marker=dict(size=9, color="#dd8452"), customdata=plotly_text(names),
            name="top tokens",
            hovertemplate="%{customdata} (id %{x})<br>logit %{y:.3f}<extra></extra>",
        ))
        traces += name_row(row, ids[:MAX_POINT_LABELS], names[:MAX_POINT_LABELS])
    return figure(traces, title, 320, xaxis=axis("token id"), yaxis=axis("logit"))


def name_row(row: np.ndarray, ids: Sequence[int], names: Sequence[str]) -> list[dict]:
    """The names of a few marks in one row above the cloud, evenly spaced in id order (so no
    two meet, however close the marks), and a line from each name down to its mark."""
    order = sorted(range(len(ids)), key=lambda k: ids[k])
    v, top = row.shape[0], float(row.max())
    height = float(top - row.min()) or 1.0
    label_y = top + 0.22 * height
    label_x = [(slot + 0.5) * v / len(order) for slot in range(len(order))]
    line_x, line_y = [], []
    for slot, k in enumerate(order):
        line_x += [label_x[slot], ids[k], None]
        line_y += [label_y - 0.05 * height, float(row[ids[k]]), None]
    return [
        dict(type="scatter", x=line_x, y=line_y, mode="lines", hoverinfo="skip",
             line=dict(width=1, color="#dd8452"), showlegend=False),
        dict(type="scatter", x=label_x, y=[label_y] * len(order), mode="text",
             text=[names[k] for k in order], textposition="middle center",
             cliponaxis=False, hoverinfo="skip", showlegend=False),
    ]


def shift_hits(p_next: np.ndarray, hits: np.ndarray, row_labels: Sequence[str],
               predicted: Sequence[str], title: str) -> go.Figure:
    """Bar per position t: probability given to the real token t+1; plain blue = the argmax was
    that token (a hit), striped orange = it was not (the hover says which)."""
    n = len(p_next)
    x, x_axis = position_axis(row_labels)
    trace = dict(
        type="bar", x=x, y=p_next.astype(np.float32),
        marker=dict(color=[HIT_COLOURS[bool(h)] for h in hits],
                    pattern=dict(shape=[HIT_PATTERNS[bool(h)] for h in hits])),
        customdata=np.array([[row_labels[t], predicted[t], "hit" if hits[t] else "miss"]
                             for t in range(n)], dtype=object)
        if n else None,
        hovertemplate="%{customdata[0]}<br>argmax: %{customdata[1]} (%{customdata[2]})"
                      "<br>p(real next) = %{y:.3f}<extra></extra>",
    )
    top = min(1.0, max(0.05, 1.15 * float(np.max(p_next, initial=0.0))))
    return figure([trace], title, 340,
                  xaxis=axis("row t: sees → should predict", **x_axis),
                  yaxis=axis("p(real next token)", range=[0, top]))


def tying_products(products: np.ndarray, title: str) -> go.Figure:
    """The d terms h_i * E[token, i] whose sum is the logit (blue positive, vermilion negative)."""
    d = products.shape[0]
    trace = dict(
        type="bar", x=list(range(d)), y=products.astype(np.float32),
        marker=dict(color=np.where(products >= 0, BLUE.lower(), VERMILION.lower()).tolist()),
        hovertemplate="i = %{x}<br>h_i·E_i = %{y:.4f}<extra></extra>",
    )
    return figure([trace], title, 300, xaxis=axis("dimension i"), yaxis=axis("h_i · E_i"))


def singular_values(s: np.ndarray, title: str) -> go.Figure:
    """Singular values of W_out (d of them), largest first, on a log scale."""
    d = s.shape[0]
    trace = dict(
        type="scatter", x=list(range(1, d + 1)), y=s.astype(np.float32), mode="lines+markers",
        marker=dict(size=4), hovertemplate="#%{x}: σ = %{y:.4g}<extra></extra>",
    )
    return figure([trace], title, 320, xaxis=axis("index (largest first)"),
                  # labels at 1, 2 and 5 of each decade: Plotly's 2, 3, ... 9 ran together
                  # when projected
                  yaxis=axis("σ", type="log", dtick="D2"))
