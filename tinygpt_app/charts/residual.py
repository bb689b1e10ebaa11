"""Charts of the residual stream: the length of each token's vector after every stage, what
each sublayer writes, and the logit lens (what the model would say if it stopped early)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    MAX_TEXT_CELLS,
    POSITION_LABEL_ROOM,
    SEQUENTIAL,
    axis,
    category_ticks,
    figure,
    plotly_text,
    position_axis,
    stage_ticks,
)


def norms_heatmap(norms: np.ndarray, stage_labels: Sequence[str],
                  token_labels: Sequence[str], title: str) -> go.Figure:
    """Heatmap (S stages x n tokens) of ||x_t|| at each stage of the residual stream."""
    return _rows_by_token(
        norms, stage_labels, token_labels, title, colorscale=SEQUENTIAL, symbol="‖x‖",
        hover="stage %{y}<br>token %{customdata}<br>‖x‖ = %{z:.3f}<extra></extra>",
        min_height=260)


def norm_lines(norms: np.ndarray, stage_labels: Sequence[str], token_labels: Sequence[str],
               positions: Sequence[int], title: str) -> go.Figure:
    """One line per chosen token: how long its residual vector is after each stage. Each line
    is named by its token label as given ("3:·the": the position is in it already)."""
    traces = [dict(type="scatter", x=list(stage_labels), y=norms[:, t].astype(np.float32),
                   mode="lines+markers", name=token_labels[t])
              for t in positions]
    return figure(traces, title, 340, xaxis=axis("stage"), yaxis=axis("‖x‖"))


def sublayer_writes(writes: np.ndarray, sublayer_labels: Sequence[str],
                    token_labels: Sequence[str], title: str) -> go.Figure:
    """Heatmap (2L sublayers x n tokens) of ||what the sublayer adds|| for each token."""
    return _rows_by_token(
        writes, sublayer_labels, token_labels, title, colorscale="Viridis", symbol="‖Δx‖",
        hover="sublayer %{y}<br>token %{x}<br>‖Δx‖ = %{z:.3f}<extra></extra>",
        min_height=240)


def _rows_by_token(values: np.ndarray, row_labels: Sequence[str],
                   token_labels: Sequence[str], title: str, *, colorscale, symbol: str,
                   hover: str, min_height: int) -> go.Figure:
    """Heatmap (S rows x n tokens) of lengths: a stage or sublayer a row, a token a column."""
    S, _ = values.shape
    x, x_axis = position_axis(token_labels)
    trace = dict(
        type="heatmap", z=values.astype(np.float32), x=x, y=list(range(S)),
        colorscale=colorscale, colorbar=dict(title=dict(text=symbol)),
        customdata=np.array([list(token_labels)] * S, dtype=object), hovertemplate=hover,
    )
    return figure([trace], title, max(min_height, 40 + 28 * S) + POSITION_LABEL_ROOM,
                  xaxis=axis("token position", **x_axis), yaxis=stage_ticks(row_labels))


# Per-cell tokens of the logit lens: Plotly writes every cell's text at one size, the largest
# at which the longest text fits its cell (a character ~0.65 of the size). On a phone the
# grid's plot is ~150 px wide (measured: the position names and the colour bar take the rest),
# so a token is written in its cell only when it fits there at 9 px or more; every cell's
# hover names its token in full.
LENS_NARROW_PLOT_PX = 150
LENS_MIN_FONT_PX = 9


def lens_chars(stages: int) -> int:
    """The longest token (in characters) a lens cell shows, with `stages` columns."""
    return int(LENS_NARROW_PLOT_PX / max(1, stages) / (0.65 * LENS_MIN_FONT_PX))


def logit_lens(probs: np.ndarray, top_tokens: Sequence[Sequence[str]],
               stage_labels: Sequence[str], position_labels: Sequence[str],
               title: str) -> go.Figure:
    """Logit lens grid: a row per position (m), a column per stage (S), read left to right;
    colour = p(top token), text = the token where it fits (see lens_chars), hover = all.

    probs (S, m), top_tokens (S lists of m strings) and position_labels (m) are for the
    positions shown. Stages are the columns because there are few of them: the cells stay
    wide enough for a token on a phone. Above MAX_TEXT_CELLS cells the tokens are in the hover
    only.
    """
    S, m = probs.shape
    y, _ = position_axis(position_labels)
    fits = lens_chars(S)
    tokens = [[str(top_tokens[s][t]) for s in range(S)] for t in range(m)]  # (m, S)
    trace = dict(
        type="heatmap", z=probs.T.astype(np.float32), x=list(stage_labels), y=y,
        zmin=0.0, zmax=1.0, colorscale=SEQUENTIAL, colorbar=dict(title=dict(text="p(top)")),
        text=[[tok if len(tok) <= fits else "" for tok in row] for row in tokens],
        texttemplate="%{text}" if S * m <= MAX_TEXT_CELLS else None,
        customdata=np.array([plotly_text(row) for row in tokens], dtype=object),
        hovertemplate="%{x}<br>top token: %{customdata}<br>p = %{z:.3f}<extra></extra>",
    )
    return figure([trace], title, max(280, 60 + 26 * m) + POSITION_LABEL_ROOM,
                  xaxis=axis("read after", **category_ticks(S)),
                  yaxis=axis("position: the token it sees", type="category",
                             autorange="reversed"))
