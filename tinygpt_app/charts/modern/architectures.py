"""Charts of the Architectures page: where each model keeps its parameters, part by part."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import SERIES_COLOURS, axis, figure

TOP_LEGEND = dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom")
PATTERNS = ("", "/", ".", "x")  # one per model: colour is not the only sign


def parameters_by_part(models: Sequence[str], parts: Sequence[str], counts: np.ndarray,
                       title: str) -> go.Figure:
    """Grouped horizontal bars: one group per part, one bar per model (counts (M, P))."""
    counts = np.asarray(counts, dtype=np.float64)
    traces = [dict(type="bar", orientation="h", name=name, y=list(parts), x=counts[m],
                   marker=dict(color=SERIES_COLOURS[m % len(SERIES_COLOURS)],
                               pattern=dict(shape=PATTERNS[m % len(PATTERNS)])),
                   hovertemplate=f"{name}<br>%{{y}}: %{{x:,.0f}} parameters<extra></extra>")
              for m, name in enumerate(models)]
    return figure(traces, title, 120 + 34 * len(parts) * max(1, len(models)) // 2 + 60,
                  barmode="group", legend=TOP_LEGEND,
                  yaxis=dict(autorange="reversed", type="category"),
                  xaxis=axis("parameters", rangemode="tozero"))
