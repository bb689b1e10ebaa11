"""Charts of a guessing round: the class's guesses beside the model's probabilities.

Token labels come from people's guesses: Plotly reads a few HTML tags (<b>, <br>, <a>) in
text, and a guess must show as typed, never as markup. common.figure escapes every label once
(plotly_text); escaping here too showed a guess "<b>" as "&lt;b&gt;".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import _MARGIN, BLUE, ORANGE, axis, figure

CLASS_COLOUR, MODEL_COLOUR = ORANGE, BLUE
TEXT_CHAR_PX = 12  # px a character of bar text takes at the projector's 20 px font (and less)


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
    share_text, prob_text = [f"{x:.0%}" for x in share], [f"{x:.1%}" for x in probs]
    # Values sit outside their bars, never squeezed into a thin one (whose text ran past the
    # axis and was cut, "3.6%" read ".6%"); the right margin holds the longest value beside the
    # longest bar, and the token labels on the left get the room they need (automargin: " picked"
    # read "icked" in a fixed 10 px margin).
    longest = max(map(len, share_text + prob_text), default=0)
    text = dict(textposition="outside", cliponaxis=False, constraintext="none")
    traces = [
        dict(type="bar", name="the class", x=share, y=labels, orientation="h",
             marker=dict(color=CLASS_COLOUR), text=share_text, **text,
             hovertemplate="%{y}: %{x:.0%} of the class<extra></extra>"),
        dict(type="bar", name=model_name, x=probs, y=labels, orientation="h",
             marker=dict(color=MODEL_COLOUR), text=prob_text, **text,
             hovertemplate="%{y}: %{x:.4f}<extra></extra>"),
    ]
    return figure(traces, title, max(260, 80 + 44 * len(labels)), barmode="group",
                  yaxis=dict(autorange="reversed", type="category", automargin=True),
                  xaxis=axis("share of the class / probability", range=[0, top * 1.15],
                             automargin=True),
                  margin=dict(_MARGIN, r=_MARGIN["r"] + TEXT_CHAR_PX * longest),
                  legend=dict(orientation="h", y=1.02, x=1, xanchor="right",
                              yanchor="bottom"))
