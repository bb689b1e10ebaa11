"""Charts of the feed-forward neurons: the top neurons at a position (activation and direct
effect), one neuron along the prompt, the tokens its output pushes up and down, and SwiGLU's
gate and up projection beside their product.

Pure Plotly builders: data in, title in, figure out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    BAR_BLUE,
    BLUE,
    FADED,
    GREEN,
    LEGEND_ABOVE,
    ORANGE,
    VERMILION,
    axis,
    figure,
    plotly_text,
    position_axis,
)


def top_neurons(names: Sequence[str], activations: np.ndarray, effects: np.ndarray,
                title: str, activation: str = "activation (after GELU)") -> go.Figure:
    """Two bars per neuron: its direct effect on the logit (left axis), its activation (right).

    Both axes are symmetric about 0, so the two zeros sit on one line and a bar's sign is
    read the same on either axis.
    """
    x = list(names)
    e_max = 1.1 * float(np.abs(effects).max(initial=0.0)) or 1.0
    a_max = 1.1 * float(np.abs(activations).max(initial=0.0)) or 1.0
    effect = dict(type="bar", x=x, y=np.asarray(effects, dtype=np.float64), name="effect on logit",
                  marker=dict(color=[BLUE if e >= 0 else VERMILION for e in effects]),
                  offsetgroup="effect", hovertemplate="%{x}: effect %{y:+.4f}<extra></extra>")
    fired = dict(type="bar", x=x, y=np.asarray(activations, dtype=np.float64),
                 name=activation, yaxis="y2", marker=dict(color=ORANGE),
                 offsetgroup="activation",
                 hovertemplate="%{x}: activation %{y:.4f}<extra></extra>")
    return figure([effect, fired], title, 340, barmode="group",
                  xaxis=axis("neuron", type="category"),
                  yaxis=axis("direct effect on the logit", range=[-e_max, e_max]),
                  yaxis2=axis("activation", overlaying="y", side="right", showgrid=False,
                              range=[-a_max, a_max]),
                  legend=LEGEND_ABOVE)


def activation_over_positions(activations: np.ndarray, labels: Sequence[str], position: int,
                              title: str, activation: str = "activation (after GELU)"
                              ) -> go.Figure:
    """One bar per prompt token: the neuron's activation there; the inspected token highlighted
    and named by an arrow ("inspected: <token>"), with room kept for it above (or below) it."""
    values = np.asarray(activations, dtype=np.float64)
    colours = [ORANGE if t == position else BAR_BLUE for t in range(len(values))]
    x, ticks = position_axis(labels)  # as many names as the chart's width holds
    trace = dict(type="bar", x=x, y=values, marker=dict(color=colours),
                 customdata=list(labels), hovertemplate="%{customdata}: %{y:.4f}<extra></extra>")
    yaxis = axis(activation)
    annotations = []
    if 0 <= position < len(values):
        y = float(values[position])
        annotations = [inspected_mark(position, y, labels[position], len(values))]
        lo, hi = min(0.0, float(values.min())), max(0.0, float(values.max()))
        room = 0.35 * ((hi - lo) or 1.0)  # the mark's text stays inside the plot
        yaxis["range"] = [lo - room, hi] if y < 0 else [lo, hi + room]
    return figure([trace], title, 300, xaxis=axis("token", **ticks), yaxis=yaxis,
                  annotations=annotations)


def inspected_mark(x: int, y: float, label: str, n: int) -> dict:
    """An arrow onto the highlighted bar naming it (x: its column number, which a category axis
    reads too); its text leans away from the nearer edge."""
    return dict(x=x, y=y, xref="x", yref="y", text=f"inspected: {plotly_text(label)}",
                showarrow=True, arrowhead=2, arrowcolor=ORANGE, ax=0, ay=-28 if y >= 0 else 28,
                xanchor="right" if x > n / 2 else "left")


def pushed_tokens(up_labels: Sequence[str], up: np.ndarray, down_labels: Sequence[str],
                  down: np.ndarray, title: str) -> go.Figure:
    """Horizontal bars, most pushed up at the top (blue) to most pushed down at the bottom (red).

    up and down are pushed_tokens's order (largest push first); down is drawn reversed.
    """
    labels = [*up_labels, *list(down_labels)[::-1]]
    values = np.concatenate([np.asarray(up, np.float64), np.asarray(down, np.float64)[::-1]])
    colours = [BLUE if v >= 0 else VERMILION if v < 0 else FADED for v in values]
    trace = dict(type="bar", orientation="h", x=values, y=list(range(len(values))),
                 customdata=labels, marker=dict(color=colours),
                 hovertemplate="%{customdata}: %{x:+.4f}<extra></extra>")
    yaxis = dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels,
                 autorange="reversed")
    return figure([trace], title, 120 + 24 * len(labels),
                  xaxis=axis("effect on the token's logit"), yaxis=yaxis)


def gate_and_up(names: Sequence[str], gate_silu: np.ndarray, up: np.ndarray,
                product: np.ndarray, title: str) -> go.Figure:
    """SwiGLU's neurons taken apart: per neuron, the gate after SiLU, the up projection and
    their product (the neuron's activation), three bars side by side."""
    x = list(names)
    parts = (("gate after SiLU", gate_silu, GREEN), ("up projection", up, BAR_BLUE),
             ("product SiLU(gate)·up", product, ORANGE))
    bars = [dict(type="bar", x=x, y=np.asarray(values, dtype=np.float64), name=name,
                 marker=dict(color=colour), offsetgroup=name,
                 hovertemplate="%{x}: %{y:+.4f}<extra>" + name + "</extra>")
            for name, values, colour in parts]
    return figure(bars, title, 340, barmode="group", xaxis=axis("neuron", type="category"),
                  yaxis=axis("value"), legend=LEGEND_ABOVE)
