"""Charts of LayerNorm and RMSNorm: one token's vector before / after, the learned scale (and
LayerNorm's shift), the per-token statistics, and a stage of all tokens as a heatmap."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    BAR_BLUE,
    ORANGE,
    SERIES_COLOURS,
    axis,
    bar,
    figure,
    heatmap,
    vline,
)

MEAN_RED = "#d1495b"


def histogram(values: np.ndarray, title: str, x_title: str = "value",
              mean: float | None = None, std: float | None = None, nbins: int = 40,
              rms: float | None = None) -> go.Figure:
    """Histogram of a vector's entries, with dashed lines at the mean and mean ± std if given,
    and dotted lines at ±rms (about 0: what RMSNorm divides by) if given."""
    v = np.asarray(values, dtype=np.float32).ravel()
    trace = dict(type="histogram", x=v, nbinsx=nbins, marker=dict(color=BAR_BLUE),
                 hovertemplate="%{x}<br>count %{y}<extra></extra>")
    shapes, notes = [], []
    if mean is not None:
        shapes.append(vline(mean, "dash", MEAN_RED))
        notes.append(dict(x=float(mean), y=1, yref="paper", text="mean", showarrow=False,
                          yanchor="bottom", font=dict(color=MEAN_RED)))
        if std is not None:
            shapes += [vline(mean - std, "dot", ORANGE), vline(mean + std, "dot", ORANGE)]
    if rms is not None:
        shapes += [vline(-rms, "dot", ORANGE), vline(rms, "dot", ORANGE)]
        notes.append(dict(x=float(rms), y=1, yref="paper", text="rms", showarrow=False,
                          yanchor="bottom", font=dict(color=ORANGE)))
    return figure([trace], title, 300, showlegend=False, bargap=0.05, shapes=shapes,
                  annotations=notes, xaxis=axis(x_title), yaxis=axis("count"))


def parameter_bars(values: np.ndarray, title: str, color: str = BAR_BLUE) -> go.Figure:
    """One bar per dimension of a learned vector (gamma or beta)."""
    return bar(values, title, x_title="dimension", color=color)


def statistics_lines(series: dict[str, np.ndarray], x_labels: Sequence[str], title: str,
                     y_title: str = "", height: int = 320) -> go.Figure:
    """One line with markers per named 1-D series over the positions (e.g. mean and std)."""
    traces = [dict(type="scatter", x=list(x_labels), y=np.asarray(values, dtype=np.float32),
                   name=name, mode="lines+markers", line=dict(color=colour),
                   hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>")
              for (name, values), colour in zip(series.items(), SERIES_COLOURS, strict=False)]
    return figure(traces, title, height, legend=dict(orientation="h", y=1.0, yanchor="bottom"),
                  xaxis=dict(type="category"), yaxis=axis(y_title))


def stage_heatmap(z: np.ndarray, title: str, row_labels: Sequence[str],
                  dims: Sequence[str]) -> go.Figure:
    """One LayerNorm stage (input, normalised or output) of all tokens: (n, d)."""
    return heatmap(z, title, x_labels=dims, y_labels=row_labels, x_title="dimension",
                   y_title="position: token")
