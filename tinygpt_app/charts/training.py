"""Charts of training: the loss curve."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import BLUE, ORANGE, axis, figure, hline


def loss_curve(steps: np.ndarray, train_loss: np.ndarray, val_steps: np.ndarray,
               val_loss: np.ndarray, title: str, floor: float | None = None) -> go.Figure:
    """Training loss per step (thin) and validation loss at its checkpoints (markers); `floor`
    is drawn as a dotted line (the loss of a uniform guess, ln v)."""
    traces = [
        dict(type="scatter", x=np.asarray(steps), y=np.asarray(train_loss, dtype=np.float32),
             mode="lines", name="training batch", line=dict(color=BLUE),
             hovertemplate="step %{x}: %{y:.3f}<extra>train</extra>"),
        dict(type="scatter", x=np.asarray(val_steps), y=np.asarray(val_loss, dtype=np.float32),
             mode="lines+markers", name="validation", line=dict(color=ORANGE, width=3),
             hovertemplate="step %{x}: %{y:.3f}<extra>validation</extra>"),
    ]
    shapes, notes = [], []
    if floor is not None:
        shapes.append(hline(floor, "dot", "#888", width=2))
        notes.append(dict(x=0, xref="paper", y=floor, text="uniform guess: ln v",
                          showarrow=False, xanchor="left", yanchor="bottom"))
    return figure(traces, title, 360, shapes=shapes, annotations=notes,
                  legend=dict(orientation="h", y=-0.25),
                  xaxis=axis("step", rangemode="tozero"),
                  yaxis=axis("cross-entropy (nats per token)"))
