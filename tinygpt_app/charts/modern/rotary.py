"""Charts of rotary positions (RoPE): one pair of a head's numbers drawn as 2-D vectors turning
with the position, the score of one query and one key as they move apart, and one query's
scores with and without the turn.

Pure Plotly builders: data in (tinygpt.readouts.modern.rotary computed it), title in, figure out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    BLUE,
    FADED,
    ORANGE,
    SEQUENTIAL,
    VERMILION,
    axis,
    figure,
    vline,
)

MAX_KEYS_DRAWN = 64  # key arrows in the pair chart: more would be a hedgehog, not a picture


def _spokes(points: np.ndarray) -> tuple[list, list]:
    """Lines from the origin to each point, as one trace's x and y (None between lines)."""
    xs, ys = [], []
    for x, y in np.asarray(points, dtype=np.float64):
        xs += [0.0, x, None]
        ys += [0.0, y, None]
    return xs, ys


def pair_vectors(q: np.ndarray, q_rot: np.ndarray, k_rot: np.ndarray, query: int,
                 labels: Sequence[str], title: str) -> go.Figure:
    """Pair j of one head as 2-D vectors: the query before its turn (dashed) and after it
    (orange arrow), the same query content at every position (the faded circle it turns
    along), and every visible key after its turn (dots coloured by position).

    q (T, 2) before the turn, q_rot (T, 2) and k_rot (T, 2) after; query: the inspected
    position. Only the last MAX_KEYS_DRAWN keys up to the query are drawn."""
    first = max(0, query + 1 - MAX_KEYS_DRAWN)
    keys = np.arange(first, query + 1)
    kx, ky = _spokes(k_rot[keys])
    positions = [f"{labels[p]} (position {p})" for p in keys]
    radius = float(np.hypot(*q[query]))
    circle = np.linspace(0, 2 * np.pi, 73)
    start = np.arctan2(q[query][1], q[query][0])
    traces = [
        dict(type="scatter", x=radius * np.cos(start + circle), y=radius * np.sin(start + circle),
             mode="lines", line=dict(color=FADED, width=1), name="where q turns to",
             hoverinfo="skip"),
        dict(type="scatter", x=kx, y=ky, mode="lines", line=dict(color=FADED, width=1),
             hoverinfo="skip", showlegend=False),
        dict(type="scatter", x=k_rot[keys, 0], y=k_rot[keys, 1], mode="markers",
             name="k after its turn", customdata=positions,
             marker=dict(size=8, color=keys, colorscale=SEQUENTIAL,
                         colorbar=dict(title=dict(text="key position"), thickness=12)),
             hovertemplate="k of %{customdata}<br>(%{x:.3f}, %{y:.3f})<extra></extra>"),
        dict(type="scatter", x=[0.0, q[query, 0]], y=[0.0, q[query, 1]], mode="lines+markers",
             line=dict(color=VERMILION, dash="dash", width=2), name="q before the turn",
             marker=dict(size=[0, 9]),
             hovertemplate="q unturned (%{x:.3f}, %{y:.3f})<extra></extra>"),
        dict(type="scatter", x=[0.0, q_rot[query, 0]], y=[0.0, q_rot[query, 1]],
             mode="lines+markers", line=dict(color=ORANGE, width=4), name="q after the turn",
             marker=dict(size=[0, 12], symbol="arrow", angleref="previous"),
             hovertemplate="q turned (%{x:.3f}, %{y:.3f})<extra></extra>"),
    ]
    return figure(traces, title, 460, xaxis=axis("first number of the pair", zeroline=True),
                  yaxis=axis("second number of the pair", zeroline=True, scaleanchor="x",
                             scaleratio=1),
                  legend=dict(orientation="h", y=-0.2))


def score_by_offset(offsets: np.ndarray, scores: np.ndarray, offset: int, score: float,
                    title: str) -> go.Figure:
    """One query and one key, their content fixed, moved apart: the score at each offset,
    with the point where they really are (the model's own score) marked."""
    line = dict(type="scatter", x=np.asarray(offsets), y=np.asarray(scores, dtype=np.float64),
                mode="lines", line=dict(color=BLUE), name="the same q and k, moved apart",
                hovertemplate="offset %{x}: score %{y:.4f}<extra></extra>")
    here = dict(type="scatter", x=[offset], y=[score], mode="markers", name="where they are",
                marker=dict(color=ORANGE, size=12, symbol="diamond"),
                hovertemplate="offset %{x}: the model's score %{y:.4f}<extra></extra>")
    return figure([line, here], title, 340, shapes=[vline(offset, "dot", ORANGE)],
                  xaxis=axis("offset: query position − key position"), yaxis=axis("score"),
                  legend=dict(orientation="h", y=-0.3))


def with_and_without(key_labels: Sequence[str], turned: np.ndarray, unturned: np.ndarray,
                     title: str, value: str = "score") -> go.Figure:
    """One query's row, key by key: as the model scored it (turned) and with q and k unturned."""
    x = list(range(len(key_labels)))
    bars = [dict(type="bar", x=x, y=np.asarray(values, dtype=np.float64), name=name,
                 customdata=list(key_labels), marker=dict(color=colour),
                 hovertemplate="%{customdata}: %{y:.4f}<extra>" + name + "</extra>")
            for name, values, colour in ((f"{value} with RoPE (the model's)", turned, BLUE),
                                         (f"{value} without RoPE", unturned, VERMILION))]
    n = len(key_labels)
    step = max(1, n // 30)
    ticks = dict(tickmode="array", tickvals=x[::step], ticktext=list(key_labels)[::step])
    return figure(bars, title, 340, barmode="group", xaxis=axis("key token", **ticks),
                  yaxis=axis(value), legend=dict(orientation="h", y=-0.3))
