"""Charts of the what-if experiments: the prediction, normal against switched.

The internal views compared side by side are the stage charts themselves
(charts.attention.attention_map with a shared zrange, charts.residual.norms_heatmap and
charts.residual.logit_lens), each with its own title.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import BLUE, ORANGE, axis, figure

# Each token's pair of bars is 56 px tall: each bar then holds its value's text beside it even
# projected (20 px text, the figure 1.4 times taller), where 34 px put "0.700" over "0.700".
TOKEN_ROW_PX = 56


def prediction_change(tokens: Sequence[str], p_before: np.ndarray, p_after: np.ndarray,
                      title: str) -> go.Figure:
    """Next-token probabilities of the same tokens, normal vs switched: two bars per token."""
    top = float(max(np.max(p_before, initial=0.0), np.max(p_after, initial=0.0)))
    traces = [dict(
        type="bar", y=list(tokens), x=np.asarray(probs, dtype=np.float32), orientation="h",
        name=name, marker=dict(color=colour), text=[f"{p:.3f}" for p in probs],
        textposition="outside", hovertemplate="%{y}: %{x:.4f}<extra>" + name + "</extra>",
    ) for name, probs, colour in (("normal", p_before, BLUE),
                                  ("with the switches", p_after, ORANGE))]
    return figure(traces, title, max(300, 80 + TOKEN_ROW_PX * len(tokens)), barmode="group",
                  xaxis=axis("probability", range=[0, min(1.0, top * 1.3) or 1.0]),
                  yaxis=dict(autorange="reversed", type="category"))
