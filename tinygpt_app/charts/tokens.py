"""Charts of the first stage: token embeddings, position embeddings and their sum."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import heatmap


def embedding_heatmap(z: np.ndarray, title: str, row_labels: Sequence[str],
                      dims: Sequence[str]) -> go.Figure:
    """An embedding matrix slice (n, d): one row per position, one column per dimension,
    diverging colours centred at 0."""
    return heatmap(z, title, x_labels=dims, y_labels=row_labels, x_title="embedding dimension",
                   y_title="position: token")
