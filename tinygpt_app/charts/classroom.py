"""Charts of a guessing round: the class's guesses beside the model's probabilities.

Token labels come from people's guesses: Plotly reads a few HTML tags (<b>, <br>, <a>) in
text, and a guess must show as typed, never as markup. common.figure escapes every label once
(plotly_text); escaping here too showed a guess "<b>" as "&lt;b&gt;".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import BLUE, ORANGE, axis, figure

CLASS_COLOUR, MODEL_COLOUR = ORANGE, BLUE


def guesses_vs_model(tokens: Sequence[str], class_share: Sequence[float],
                     model_probs: Sequence[float], title: str, *,
                     model_name: str = "the model") -> go.Figure:
    """Two bars per token: the share of the class that guessed it, and the model's probability.

    tokens: (m,) labels, the class's guesses first then the model's favourites; both series
    are fractions in [0, 1] so they share one axis.
    """
    labels = list(tokens)  # escaped by figure(), as every chart's text
    share = np.asarray(class_share, dtype=np.float32)
    probs = np.asarray(model_probs, dtype=np.float32)
    top = float(max(share.max(initial=0.0), probs.max(initial=0.0), 1e-9))
    traces = [
        dict(type="bar", name="the class", x=share, y=labels, orientation="h",
             marker=dict(color=CLASS_COLOUR), text=[f"{x:.0%}" for x in share],
             textposition="auto", hovertemplate="%{y}: %{x:.0%} of the class<extra></extra>"),
        dict(type="bar", name=model_name, x=probs, y=labels, orientation="h",
             marker=dict(color=MODEL_COLOUR), text=[f"{x:.1%}" for x in probs],
             textposition="auto", hovertemplate="%{y}: %{x:.4f}<extra></extra>"),
    ]
    return figure(traces, title, max(260, 80 + 44 * len(labels)), barmode="group",
                  yaxis=dict(autorange="reversed", type="category"),
                  xaxis=axis("share of the class / probability", range=[0, top * 1.15]),
                  legend=dict(orientation="h", y=1.02, x=1, xanchor="right",
                              yanchor="bottom"))
