"""Charts of grouped-query attention: which query heads share which key/value head, and the KV
cache's bytes per token against one key/value head per query head.

Pure Plotly builders: data in (tinygpt.readouts.modern.grouped_heads computed it), title in,
figure out.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import BLUE, FADED, SERIES_COLOURS, axis, figure


def sharing(kv_head_of: np.ndarray, title: str) -> go.Figure:
    """Query heads in a row at the top, key/value heads below, each under its group; a line
    from every query head to the key/value head it reads. Colours tell the groups apart."""
    kv_head_of = np.asarray(kv_head_of)
    H, KV = len(kv_head_of), int(kv_head_of.max()) + 1
    kv_x = [float(np.flatnonzero(kv_head_of == g).mean()) for g in range(KV)]  # under its group
    colours = [SERIES_COLOURS[g % len(SERIES_COLOURS)] for g in range(KV)]
    lines_x, lines_y = [], []
    for h, g in enumerate(kv_head_of):
        lines_x += [h, kv_x[g], None]
        lines_y += [1.0, 0.0, None]
    traces = [
        dict(type="scatter", x=lines_x, y=lines_y, mode="lines", line=dict(color=FADED),
             hoverinfo="skip", showlegend=False),
        dict(type="scatter", x=list(range(H)), y=[1.0] * H, mode="markers+text",
             text=[f"q{h}" for h in range(H)], textposition="top center", name="query heads",
             marker=dict(size=18, symbol="square", color=[colours[g] for g in kv_head_of]),
             customdata=[int(g) for g in kv_head_of],
             hovertemplate="query head %{x} reads key/value head %{customdata}<extra></extra>"),
        dict(type="scatter", x=kv_x, y=[0.0] * KV, mode="markers+text",
             text=[f"kv{g}" for g in range(KV)], textposition="bottom center",
             name="key/value heads", marker=dict(size=24, symbol="diamond", color=colours),
             customdata=list(range(KV)),
             hovertemplate="key/value head %{customdata}<extra></extra>"),
    ]
    hidden = dict(showticklabels=False, showgrid=False, zeroline=False)
    return figure(traces, title, 300, showlegend=False,
                  xaxis=dict(range=[-0.8, H - 0.2], **hidden),
                  yaxis=dict(range=[-0.6, 1.6], **hidden))


def bytes_per_token(labels: list[str], values: list[int], title: str) -> go.Figure:
    """Horizontal bars: the KV cache's bytes per token, this model against the other layout."""
    trace = dict(type="bar", orientation="h", x=np.asarray(values, dtype=np.float64),
                 y=list(labels), marker=dict(color=[BLUE, FADED][: len(values)]),
                 text=[f"{v:,} bytes" for v in values], textposition="auto",
                 hovertemplate="%{y}: %{x:,} bytes per token<extra></extra>")
    return figure([trace], title, 220, xaxis=axis("bytes per token (keys + values, all layers)"),
                  yaxis=dict(autorange="reversed"))
