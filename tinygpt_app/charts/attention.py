"""Charts of attention: the n x n map of one head (weights or scores, masked cells grey and
crossed), one score taken apart (q, k and their product), and what the head hands on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    DIVERGING,
    LEGEND_ABOVE,
    MASK_LEGEND,
    MASKED_GREY,
    MAX_MASK_MARKS,
    SEQUENTIAL,
    SERIES_COLOURS,
    axis,
    category_ticks,
    figure,
    heatmap,
    mask_marks,
    rows_height,
)

__all__ = ["MASK_LEGEND", "MAX_MASK_MARKS", "SCALES", "attention_map", "head_output_heatmap",
           "query_key_bars"]

# How weights (0..1, each row adds up to 1) become colours. Most weights of a head are small
# (0.02-0.1 over a few dozen tokens): on a linear 0..1 scale the map is almost uniformly dark,
# so weights default to "log". The colour bar's title names the scale.
SCALES = {
    "log": "weight (log scale)",  # every factor of 10 the same step of colour
    "row": "weight ÷ its row's largest",  # each query's strongest look is the brightest
    "linear": "weight (0 to 1)",
}
LOG_FLOOR = -3  # log10: weights below 0.001 take the darkest colour (the hover says the value)


def scaled_weights(w: np.ndarray, scale: str) -> tuple[np.ndarray, dict]:
    """The colour values of weights w (NaN where masked) and the colour bar's range and ticks."""
    if scale == "log":
        z = np.log10(np.maximum(w, 10.0 ** LOG_FLOOR))  # (rows, n) in [LOG_FLOOR, 0]
        ticks = list(range(LOG_FLOOR, 1))
        return z, dict(zmin=LOG_FLOOR, zmax=0, colorbar=dict(
            tickvals=ticks, ticktext=[f"{10.0 ** t:g}" for t in ticks]))
    if scale == "row":
        top = np.nanmax(np.where(np.isfinite(w), w, np.nan), axis=1, keepdims=True)  # (rows, 1)
        return w / np.where(top > 0, top, 1.0), dict(zmin=0, zmax=1, colorbar={})
    if scale == "linear":
        return w, dict(zmin=0, zmax=1, colorbar={})
    raise ValueError(f"scale must be one of {', '.join(SCALES)}")


def attention_map(
    weights: np.ndarray, labels: Sequence[str], title: str, colorbar_title: str = "weight",
    diverging: bool = False, y_labels: Sequence[str] | None = None,
    zrange: tuple[float, float] | None = None, scale: str | None = None,
) -> go.Figure:
    """An n x n attention map; NaN / -inf cells (masked: a later token) are drawn grey.

    Sequential colours for weights (0..1), on a `scale` of SCALES (default "log"; "linear"
    when a zrange is given); diverging (RdBu at 0) for raw scores, as they are.
    y_labels: the query rows drawn, when only the last rows are shown (default: labels).
    zrange: a fixed colour range, so that two maps side by side share one scale.
    The hover always shows the weight itself; z holds the colour values.

    The first trace holds the values (masked cells as None), the second paints the masked cells
    grey, and a third crosses them (at most MAX_MASK_MARKS), with a legend entry.
    """
    w = np.asarray(weights, dtype=np.float32)
    masked = ~np.isfinite(w)
    x, y = list(labels), list(y_labels if y_labels is not None else labels)
    values = np.where(masked, np.nan, w)  # (rows, n)
    z, colours, bar = values, {}, {}
    if diverging:
        colours = dict(colorscale=DIVERGING, zmid=0)
    elif zrange is None or scale is not None:
        z, colours = scaled_weights(values, scale or "log")
        bar = colours.pop("colorbar")
        colorbar_title = SCALES[scale or "log"]
        colours["colorscale"] = SEQUENTIAL
    else:
        colours = dict(colorscale=SEQUENTIAL)
    if zrange is not None and (diverging or scale is None):
        colours.update(zmin=zrange[0], zmax=zrange[1])
    shown = "%{z:.4f}" if z is values else "%{customdata:.4f}"  # the weight, not its colour
    traces = [dict(
        type="heatmap", z=z, customdata=None if z is values else values, x=x, y=y,
        hoverongaps=False, colorbar=dict(title=dict(text=colorbar_title), **bar), **colours,
        hovertemplate="query %{y}<br>key %{x}<br>" + shown + "<extra></extra>",
    )]
    if masked.any():
        traces.append(dict(
            type="heatmap", z=np.where(masked, 1.0, np.nan).astype(np.float32), x=x, y=y,
            colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]], showscale=False, hoverongaps=False,
            hovertemplate="query %{y}<br>key %{x}<br>masked: a later token<extra></extra>",
            name="masked",
        ))
        traces.extend(mask_marks(masked, x, y))
    return figure(traces, title, rows_height(len(y)) + 40,
                  legend=dict(orientation="h", y=1.0, x=0, yanchor="bottom"),
                  xaxis=axis("key (the token looked at)", **category_ticks(len(x))),
                  yaxis=axis("query (the token looking)", type="category",
                             autorange="reversed"))


def query_key_bars(series: dict[str, np.ndarray], title: str,
                   x_title: str = "dimension in the head", height: int = 320) -> go.Figure:
    """Bars of same-length vectors side by side, one group per dimension (q, k, q * k)."""
    traces = []
    for (name, values), colour in zip(series.items(), SERIES_COLOURS, strict=False):
        v = np.asarray(values, dtype=np.float32)
        traces.append(dict(type="bar", x=list(range(len(v))), y=v, name=name,
                           marker=dict(color=colour),
                           hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"))
    return figure(traces, title, height, barmode="group", legend=LEGEND_ABOVE,
                  xaxis=axis(x_title))


def head_output_heatmap(z: np.ndarray, title: str, row_labels: Sequence[str],
                        dims: Sequence[str]) -> go.Figure:
    """One head's output (n, hs): a weighted average of value vectors per token."""
    return heatmap(z, title, x_labels=dims, y_labels=row_labels,
                   x_title="dimension in the head", y_title="position: token")
