"""Charts of decoding: the beam tree (a step's bars are charts.sampling.ranked_bars)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from tinygpt_app.charts.common import (
    BLUE,
    FADED,
    GREEN,
    LEGEND_ABOVE,
    VERMILION,
    axis,
    figure,
)

BEAM_STYLE = {  # status -> (colour, symbol, opacity)
    "running": (BLUE, "circle", 1.0),
    "finished": (GREEN, "star", 1.0),
    "finished_discarded": (GREEN, "star-open", 0.35),
    "dropped": ("#999999", "circle-open", 0.35),
}
EDGE_STYLE = {"pruned": (1, FADED), "kept": (1.5, "#7aa6c9"), "winner": (4, VERMILION)}


def beam_tree(steps: Sequence[int], ranks: Sequence[int], parents: Sequence[int],
              statuses: Sequence[str], texts: Sequence[str], scores: Sequence[float],
              winning: Sequence[bool], title: str, root_text: str = "prompt") -> go.Figure:
    """The beam tree: x = step, y = rank among the candidates kept at that step.

    One node per candidate (from tinygpt.readouts.beam_tree); parents[i] = -1 links to the
    prompt (the root, drawn one step left of the first). Running beams are blue, finished
    hypotheses green stars, pruned ones faded; the returned hypothesis's path is drawn thick.
    """
    steps, ranks, parents = np.asarray(steps), np.asarray(ranks), np.asarray(parents)
    scores, winning = np.asarray(scores), np.asarray(winning)
    root_x = int(steps.min()) - 1 if len(steps) else -1  # the prompt (or the steps before)
    last = int(steps.max()) if len(steps) else 0
    fits = node_label_chars(last - root_x + 1.2)  # the x range: root_x - 0.7 .. last + 0.5
    traces = _edges(steps, ranks, parents, statuses, winning, root_x)
    traces += _nodes(steps, ranks, statuses, [t if len(t) <= fits else "" for t in texts],
                     texts, scores)
    traces.append(dict(type="scatter", x=[root_x], y=[0], mode="markers+text",
                       text=[root_text if len(root_text) <= fits else ""],
                       textposition=step_side(root_x), textfont=dict(size=NODE_FONT_PX),
                       cliponaxis=False, marker=dict(color="black", size=10), showlegend=False,
                       hovertemplate=f"{root_text}<extra></extra>"))
    return figure(traces, title, max(320, 70 * (int(ranks.max(initial=0)) + 2)),
                  legend=LEGEND_ABOVE,
                  xaxis=axis("step (new token number)", range=[root_x - 0.7, last + 0.5]),
                  yaxis=axis("rank at that step", autorange="reversed", dtick=1))


def _edges(steps, ranks, parents, statuses, winning, root_x: int) -> list[dict]:
    """One line trace per kind of edge, faint first so the strong ones sit on top."""
    traces = []
    for kind, (width, colour) in EDGE_STYLE.items():
        xs, ys = [], []
        for i, parent in enumerate(parents):
            is_kind = ("winner" if winning[i] else
                       "kept" if statuses[i] in ("running", "finished") else "pruned")
            if is_kind != kind:
                continue
            x0, y0 = (steps[parent], ranks[parent]) if parent >= 0 else (root_x, 0)
            xs += [float(x0), float(steps[i]), None]
            ys += [float(y0), float(ranks[i]), None]
        traces.append(dict(type="scatter", x=xs, y=ys, mode="lines",
                           line=dict(width=width, color=colour), hoverinfo="skip",
                           showlegend=kind == "winner",
                           name={"winner": "returned hypothesis"}.get(kind, f"{kind} edge")))
    return traces


# A node's token is written beside it only when it fits: labels alternate above and below
# (step_side), so a label may be two steps wide; on a phone the tree's plot is ~290 px wide for
# all its steps, and a character of the 10 px labels ~6 px. The hover names every token.
NARROW_PLOT_PX = 290
NODE_FONT_PX = 10


def node_label_chars(steps_wide: float) -> int:
    """The longest token (characters) a node's label shows, the x axis `steps_wide` steps."""
    return int(2 * NARROW_PLOT_PX / max(1.0, steps_wide) / (0.6 * NODE_FONT_PX))


def _nodes(steps, ranks, statuses, labels, texts, scores) -> list[dict]:
    """One marker trace per status, each node labelled (labels: the token, or "" where it does
    not fit) above the node on even steps, below it on odd ones, so neighbours on one row never
    share a line; the hover names the token (texts) and its score."""
    traces = []
    for status, (colour, symbol, opacity) in BEAM_STYLE.items():
        idx = [i for i, s in enumerate(statuses) if s == status]
        if not idx:
            continue
        traces.append(dict(
            type="scatter", x=steps[idx], y=ranks[idx], mode="markers+text",
            name=status.replace("_", " "), text=[labels[i] for i in idx],
            textposition=[step_side(steps[i]) for i in idx], textfont=dict(size=NODE_FONT_PX),
            opacity=opacity, cliponaxis=False,
            marker=dict(color=colour, symbol=symbol, size=11 if status != "dropped" else 8),
            customdata=np.asarray([[texts[i], scores[i]] for i in idx], dtype=object),
            hovertemplate="%{customdata[0]}<br>score (sum of log p) %{customdata[1]:.3f}"
                          "<extra>" + status + "</extra>",
        ))
    return traces


def step_side(step: int) -> str:
    """Where a beam node's token name sits: above on even steps, below on odd ones."""
    return "top center" if int(step) % 2 == 0 else "bottom center"
