"""Charts of the Interventions page: the activation-patching grid (layer x position) and
several next-token distributions over the same tokens (clean, corrupted, patched; normal
and ablated or steered)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    DIVERGING,
    LEGEND_ABOVE,
    SERIES_COLOURS,
    axis,
    figure,
    rows_height,
)

RECOVERED = "recovered: 0 = as corrupted, 1 = as clean"


MAP_MAX_HEIGHT = 460  # px: 30 blocks still fit one projected screen (1.4 times taller)


def patching_map(recovered: np.ndarray, tokens: Sequence[str], title: str) -> go.Figure:
    """recovered (n_layer, P): how far each patch moves the answer's log-probability from the
    corrupted run (0, white) to the clean run (1, blue); red went the other way. The blocks
    are a number axis (its labels thin out on a small screen), block 0 at the top."""
    z = np.asarray(recovered, dtype=np.float32)
    finite = z[np.isfinite(z)]
    reach = float(max(1.0, np.abs(finite).max(initial=0.0)))
    trace = dict(type="heatmap", z=z, x=list(tokens), y=list(range(len(z))),
                 colorscale=DIVERGING, zmid=0.0, zmin=-reach, zmax=reach,
                 colorbar=dict(title=dict(text=RECOVERED, side="right")),
                 hovertemplate="block %{y}, %{x}<br>recovered %{z:.3f}<extra></extra>")
    return figure([trace], title, min(rows_height(len(z)), MAP_MAX_HEIGHT),
                  xaxis=axis("position patched (token)", type="category"),
                  yaxis=axis("block", autorange="reversed"))


def distributions(tokens: Sequence[str], runs: dict[str, np.ndarray], title: str) -> go.Figure:
    """p(next token) of the same tokens in several runs, as grouped bars (one colour a run)."""
    traces = [dict(type="bar", name=name, x=list(tokens), y=np.asarray(p, dtype=np.float32),
                   marker=dict(color=SERIES_COLOURS[i % len(SERIES_COLOURS)]),
                   hovertemplate="%{x}<br>p = %{y:.4f}<extra>" + name + "</extra>")
              for i, (name, p) in enumerate(runs.items())]
    return figure(traces, title, 380, barmode="group", xaxis=dict(type="category"),
                  yaxis=axis("probability"), legend=LEGEND_ABOVE)
