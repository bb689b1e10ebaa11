"""Charts that explain a prediction: the attribution waterfall, each head's share, which words
mattered (occlusion), how surprised the model was, and two prompts side by side.

Pure Plotly builders: data in, title in, figure out. `heat_colours` turns values into the
background colours of token chips (the prompt coloured by a value).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from tinygpt_app.charts.common import (
    BAR_BLUE,
    BLUE,
    DIVERGING,
    FADED,
    LEGEND_ABOVE,
    MASKED_GREY,
    MAX_MASK_MARKS,
    ORANGE,
    SEQUENTIAL,
    VERMILION,
    axis,
    figure,
    heatmap,
    mask_marks,
)

UP, DOWN, TOTAL = BLUE, VERMILION, "#555555"


def attribution_waterfall(names: Sequence[str], values: np.ndarray, total: float,
                          title: str, total_name: str = "logit") -> go.Figure:
    """Bars that add up, top to bottom, from 0 to `total` (the last bar, drawn whole).

    values (B,) are the parts; their sum is the total (tinygpt.readouts.explain.waterfall).
    Horizontal: each part's name on its own row (WATERFALL_ROW px apart), so names never
    overlap on a phone, where slanted names under vertical bars ran into each other.
    """
    values = np.asarray(values, dtype=np.float64)
    y = [*names, total_name]
    trace = dict(
        type="waterfall", orientation="h", y=y,
        x=[*values.tolist(), float(total)],
        measure=["relative"] * len(values) + ["total"],
        increasing=dict(marker=dict(color=UP)), decreasing=dict(marker=dict(color=DOWN)),
        totals=dict(marker=dict(color=TOTAL)),
        connector=dict(line=dict(color=FADED, width=1)),
        hovertemplate="%{y}<br>share %{x:+.4f}<extra></extra>",
    )
    return figure([trace], title, waterfall_height(len(y)),
                  yaxis=axis("part of the model", type="category", autorange="reversed",
                             automargin=True),
                  xaxis=axis(total_name, automargin=True), showlegend=False)


WATERFALL_ROW = 28  # px per bar: a row of tick text (12 px, 20 px projected) with air around


def waterfall_height(rows: int) -> int:
    """The waterfall's height: the margins and title, plus WATERFALL_ROW px for each bar."""
    return max(300, 140 + WATERFALL_ROW * rows)


def head_shares(grid: np.ndarray, title: str) -> go.Figure:
    """Each head's share of the logit, blocks as rows and heads as columns (RdBu at 0)."""
    L, H = grid.shape
    return heatmap(grid, title, [f"head {h}" for h in range(H)],
                   [f"block {i}" for i in range(L)], "head", "block", diverging=True,
                   height=max(220, 90 + 40 * L),
                   hovertemplate="%{y} %{x}<br>share %{z:+.4f}<extra></extra>")


def occlusion_bars(labels: Sequence[str], change: np.ndarray, title: str) -> go.Figure:
    """How the watched token's probability moves when each token is removed (one bar each).

    Negative (the probability falls without it): the token helped the prediction.
    """
    change = np.asarray(change, dtype=np.float32)
    colours = [DOWN if c < 0 else UP for c in change]
    trace = dict(type="bar", x=list(labels), y=change, marker=dict(color=colours),
                 hovertemplate="without %{x}<br>change %{y:+.4f}<extra></extra>")
    return figure([trace], title, 360,
                  xaxis=axis("token removed", type="category"),
                  yaxis=axis("change in probability"), showlegend=False)


def surprise_bars(labels: Sequence[str], nats: np.ndarray, mean: float,
                  title: str) -> go.Figure:
    """−log p of each token that came (bars) and their mean (a dashed line: the loss)."""
    nats = np.asarray(nats, dtype=np.float32)
    trace = dict(type="bar", x=list(labels), y=nats, marker=dict(color=BAR_BLUE),
                 hovertemplate="%{x}<br>−log p = %{y:.3f} nats<extra></extra>")
    return figure([trace], title, 340,
                  xaxis=axis("token that came", type="category"),
                  yaxis=axis("surprise −log p (nats)"), showlegend=False,
                  shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=mean, y1=mean,
                               line=dict(color=ORANGE, dash="dash", width=2))])


CHIP_REACH = 0.2  # how far from white (the middle of RdBu) the chips' colours go


def heat_colours(values: np.ndarray, *, diverging: bool, vmax: float | None = None) -> list[str]:
    """A background colour per value, for token chips: white at 0.

    diverging: RdBu around 0 (red for negative); otherwise white to orange-red (0 .. vmax).
    The colours stay light so the chips' text passes WCAG AA contrast (4.5:1, axe-core): at
    most 20 % of the diverging scale either side of white (RdBu 0.3 .. 0.7, relative luminance
    >= 0.47), which keeps even the chips' #444 captions at 4.8:1 or more.
    """
    v = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(v)
    top = vmax if vmax else (float(np.abs(v[finite]).max()) if finite.any() else 1.0)
    top = top if top > 0 else 1.0
    x = np.where(finite, np.clip(v / top, -1, 1), 0.0)
    if diverging:
        return sample_colorscale(DIVERGING, list(0.5 + CHIP_REACH * x))
    return sample_colorscale([[0, "#ffffff"], [1, "#f4a261"]], list(np.clip(x, 0, 1)))


def two_distributions(labels: Sequence[str], p_a: np.ndarray, p_b: np.ndarray,
                      names: tuple[str, str], title: str) -> go.Figure:
    """Two next-token distributions over the same tokens, as grouped bars."""
    traces = [dict(type="bar", name=name, x=list(labels), y=np.asarray(p, dtype=np.float32),
                   marker=dict(color=colour),
                   hovertemplate="%{x}<br>p = %{y:.4f}<extra>" + name + "</extra>")
              for name, p, colour in zip(names, (p_a, p_b), (BLUE, ORANGE), strict=True)]
    return figure(traces, title, 380, barmode="group",
                  xaxis=dict(type="category"),
                  yaxis=axis("probability"), legend=LEGEND_ABOVE)


def paired_lines(x_labels: Sequence[str], a: np.ndarray, b: np.ndarray,
                 names: tuple[str, str], title: str, y_title: str) -> go.Figure:
    """Two series over the same stages (e.g. the residual norm of each prompt), as lines."""
    traces = [dict(type="scatter", mode="lines+markers", name=name, x=list(x_labels),
                   y=np.asarray(v, dtype=np.float32), line=dict(color=colour))
              for name, v, colour in zip(names, (a, b), (BLUE, ORANGE), strict=True)]
    return figure(traces, title, 360, xaxis=dict(type="category"),
                  yaxis=axis(y_title), legend=LEGEND_ABOVE)


def heads_small_multiples(maps: np.ndarray, key_labels: Sequence[str],
                          row_labels: Sequence[str], title: str) -> go.Figure:
    """Every head at a glance: maps (L, H, R, K) of attention weights, masked cells NaN.

    R > 1: one small n x n map per head, blocks as rows and heads as columns (BertViz's model
    view), all on one colour scale 0..1, masked cells grey (the plot background shows through
    NaN) and crossed while the crosses fit MAX_MASK_MARKS, no text in the cells. The grid of
    axes is laid out here as plain dicts: Plotly's make_subplots + add_trace takes ~8 s for
    GPT-2's 144 heads, this ~1 s.
    R == 1: one query row per head, stacked into a single map (rows "block i head h").
    """
    L, H, R, K = maps.shape
    maps = np.asarray(maps, dtype=np.float32)
    colours = dict(coloraxis="coloraxis")
    shared = dict(coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=1,
                                 colorbar=dict(title=dict(text="weight"))),
                  plot_bgcolor=MASKED_GREY)  # one colour scale for every map
    if R == 1:
        names = [f"block {i} head {h}" for i in range(L) for h in range(H)]
        trace = dict(type="heatmap", z=maps.reshape(L * H, K), x=list(key_labels), y=names,
                     hoverongaps=False, **colours,
                     hovertemplate="%{y}<br>key %{x}<br>%{z:.4f}<extra></extra>")
        return figure([trace], title, max(300, 90 + 16 * L * H),
                      xaxis=axis("key (the token looked at)", type="category"),
                      yaxis=axis("", type="category", autorange="reversed"), **shared)
    return _grid_of_maps(maps, list(key_labels), list(row_labels), title, shared)


def _grid_of_maps(maps: np.ndarray, x: list, y: list, title: str, shared: dict) -> go.Figure:
    """L x H heatmaps in one figure, one pair of axes each (x1..xLH), titles as annotations."""
    L, H = maps.shape[:2]
    gap_x, gap_y = 0.02, 0.03
    width, height = (1 - gap_x * (H - 1)) / H, (1 - gap_y * (L - 1)) / L
    traces, layout, notes = [], {}, []
    budget = MAX_MASK_MARKS // (L * H)  # the crosses of all maps together stay in the budget
    for i in range(L):
        for h in range(H):
            n = i * H + h + 1
            suffix = "" if n == 1 else str(n)
            traces.append(dict(type="heatmap", z=maps[i, h], x=x, y=y, hoverongaps=False,
                               xaxis=f"x{suffix}", yaxis=f"y{suffix}", coloraxis="coloraxis",
                               hovertemplate=f"block {i} head {h}<br>query %{{y}}<br>key "
                               "%{x}<br>%{z:.4f}<extra></extra>"))
            traces += mask_marks(~np.isfinite(maps[i, h]), x, y, budget, legend=n == 1,
                                 xaxis=f"x{suffix}", yaxis=f"y{suffix}")
            x0, y1 = h * (width + gap_x), 1 - i * (height + gap_y)
            x_domain = [max(0.0, x0), min(1.0, x0 + width)]
            y_domain = [max(0.0, y1 - height), min(1.0, y1)]
            layout[f"xaxis{suffix}"] = dict(domain=x_domain, anchor=f"y{suffix}",
                                            showticklabels=False, showgrid=False, type="category")
            layout[f"yaxis{suffix}"] = dict(domain=y_domain, anchor=f"x{suffix}",
                                            showticklabels=False, showgrid=False, type="category",
                                            autorange="reversed")
            if h == 0:  # the block's name as its row's axis title: Plotly makes room for it
                layout[f"yaxis{suffix}"].update(title=dict(text=f"block {i}", standoff=4),
                                                automargin=True)
    notes += [dict(text=f"head {h}", xref="paper", yref="paper", x=h * (width + gap_x) + width / 2,
                   y=1.0, yanchor="bottom", showarrow=False) for h in range(H)]
    return figure(traces, title, max(320, 90 + 110 * L), annotations=notes,
                  margin=dict(l=10, r=10, t=100, b=10),
                  legend=dict(orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom"),
                  **layout, **shared)
