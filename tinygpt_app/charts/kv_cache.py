"""Charts of what a KV cache reuses during a generation: keys and values computed vs read back
at each step, the bytes the cache holds, and the work with and without it.

Pure Plotly builders over tinygpt.kv_cache_reuse's arrays.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import BLUE, FADED, LEGEND_ABOVE, ORANGE, axis, figure

STEP_TICKS = 10  # labelled steps at most: a phone's chart holds ten two-digit numbers apart


def step_axis(steps: int) -> dict:
    """The x axis of generation steps 0..steps-1: whole steps only, every 1, 2, 5, 10, ... so
    that at most STEP_TICKS are labelled (one label per step ran together on a phone)."""
    every = next(d for m in (1, 10, 100, 1000, 10**9) for d in (m, 2 * m, 5 * m)
                 if steps <= d * STEP_TICKS)
    return axis("generation step", dtick=every, tick0=0)


def reuse_per_step(computed: np.ndarray, reused: np.ndarray, title: str) -> go.Figure:
    """Stacked bars per step: positions whose keys/values are computed (new) and reused."""
    steps = list(range(len(computed)))
    new = dict(type="bar", x=steps, y=np.asarray(computed, np.int64), name="computed (new)",
               marker=dict(color=ORANGE), hovertemplate="step %{x}: %{y} new<extra></extra>")
    old = dict(type="bar", x=steps, y=np.asarray(reused, np.int64), name="reused from the cache",
               marker=dict(color=FADED), hovertemplate="step %{x}: %{y} reused<extra></extra>")
    return figure([new, old], title, 320, barmode="stack", xaxis=step_axis(len(steps)),
                  yaxis=axis("positions (keys + values), each layer"),
                  legend=LEGEND_ABOVE)


def bytes_held(held: np.ndarray, allocated: int, title: str) -> go.Figure:
    """The filled part of the cache after each step, in kB, below the allocated size."""
    steps = list(range(len(held)))
    trace = dict(type="scatter", mode="lines+markers", x=steps,
                 y=np.asarray(held, np.float64) / 1024, name="held",
                 line=dict(color=BLUE), hovertemplate="step %{x}: %{y:,.1f} kB<extra></extra>")
    line = dict(type="line", x0=0, x1=1, xref="paper", y0=allocated / 1024, y1=allocated / 1024,
                line=dict(dash="dot", color=FADED, width=1.5))
    return figure([trace], title, 300, xaxis=step_axis(len(steps)),
                  yaxis=axis("kB held (keys + values, all layers)", rangemode="tozero"),
                  shapes=[line])


def work_per_step(cached: np.ndarray, recompute: np.ndarray, title: str) -> go.Figure:
    """Multiply-adds per step with the cache and when recomputing the whole sequence."""
    steps = list(range(len(cached)))
    with_cache = dict(type="scatter", mode="lines+markers", x=steps,
                      y=np.asarray(cached, np.float64), name="with the cache",
                      line=dict(color=ORANGE),
                      hovertemplate="step %{x}: %{y:,.0f} multiply-adds<extra></extra>")
    without = dict(type="scatter", mode="lines+markers", x=steps,
                   y=np.asarray(recompute, np.float64), name="recomputing everything",
                   line=dict(color=BLUE),
                   hovertemplate="step %{x}: %{y:,.0f} multiply-adds<extra></extra>")
    return figure([with_cache, without], title, 320, xaxis=step_axis(len(steps)),
                  yaxis=axis("multiply-adds", rangemode="tozero"),
                  legend=LEGEND_ABOVE)
