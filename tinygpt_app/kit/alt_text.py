"""Text alternatives for charts: one sentence per chart saying what it shows for this prompt,
with its numbers ("The strongest attention from “the” goes to “Juliet”, 0.42.").

A Plotly figure has no accessible name, so every chart gets one of these sentences
(`show_chart(..., alt=...)` shows it next to the chart). The sentences only read the arrays the
page already drew: which entry is largest, smallest, or first. Pure functions, no Streamlit;
the page escapes the sentence for markdown (show_chart does, with plain()).

Builders by kind of chart: ``bars`` (one value per label), ``top_items`` (a ranking),
``grid`` (a heatmap), ``attention`` (an attention map), ``spread`` (a histogram), ``lines``
(series over labels), ``lens`` (a logit lens), ``two_runs`` (the same labels, two runs),
``kept_and_cut`` (ranked probabilities after top-k / top-p), ``cumulative`` (top-p's curve).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def quoted(label: object) -> str:
    """A token or label inside a sentence: “·the”."""
    return f"“{label}”"


def _number(value: float, fmt: str) -> str:
    return format(float(value), fmt)


def _finite(values) -> np.ndarray:
    """The values as float64, masked or missing entries (NaN, ±inf, None) as NaN."""
    v = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(v), v, np.nan)


def bars(labels: Sequence, values, what: str, fmt: str = ".3f") -> str:
    """One value per label: the highest and the lowest. "{what}: highest “a” 0.42, lowest …"."""
    v = _finite(values).ravel()
    if not len(v) or np.isnan(v).all():
        return f"{what}: no values."
    hi, lo = int(np.nanargmax(v)), int(np.nanargmin(v))
    return (f"{what}: highest {quoted(labels[hi])} {_number(v[hi], fmt)}, lowest "
            f"{quoted(labels[lo])} {_number(v[lo], fmt)} ({len(v):,} values).")


def top_items(labels: Sequence, values, what: str, k: int = 3, fmt: str = ".3f") -> str:
    """A ranking: the k largest in order. "{what}: “a” 0.42, “b” 0.12, “c” 0.05 (top 3 of 10)."""
    v = _finite(values).ravel()
    order = [int(i) for i in np.argsort(-np.nan_to_num(v, nan=-np.inf), kind="stable")[:k]]
    items = ", ".join(f"{quoted(labels[i])} {_number(v[i], fmt)}" for i in order)
    return f"{what}: {items} (the top {len(order)} of {len(v):,})."


def grid(z, row_labels: Sequence, col_labels: Sequence, what: str, fmt: str = ".3f") -> str:
    """A heatmap: its largest and smallest cell with their row and column."""
    v = _finite(z)
    if v.ndim != 2 or np.isnan(v).all():
        return f"{what}: no values."
    hi = np.unravel_index(int(np.nanargmax(v)), v.shape)
    lo = np.unravel_index(int(np.nanargmin(v)), v.shape)
    return (f"{what}: largest {_number(v[hi], fmt)} at {quoted(row_labels[hi[0]])}, "
            f"{quoted(col_labels[hi[1]])}; smallest {_number(v[lo], fmt)} at "
            f"{quoted(row_labels[lo[0]])}, {quoted(col_labels[lo[1]])} "
            f"({v.shape[0]:,} × {v.shape[1]:,} cells).")


def attention(weights, query_labels: Sequence, key_labels: Sequence, row: int = -1,
              what: str = "attention") -> str:
    """An attention map: where one query row (default: the last drawn) looks most, and how
    many cells the causal mask hides. Masked cells are NaN (or -inf for scores)."""
    w = _finite(weights)
    r = row % w.shape[0]
    masked = int(np.isnan(w).sum())
    hidden = (f"; {masked:,} of {w.size:,} cells are masked (a later token), drawn grey"
              if masked else "")
    if np.isnan(w[r]).all():
        return f"Row {quoted(query_labels[r])} has no visible key{hidden}."
    j = int(np.nanargmax(w[r]))
    return (f"The strongest {what} from {quoted(query_labels[r])} goes to "
            f"{quoted(key_labels[j])}, {_number(w[r, j], '.2f')}{hidden}.")


def spread(values, what: str, fmt: str = ".3f") -> str:
    """A histogram: mean and range of the numbers counted."""
    v = _finite(values).ravel()
    return (f"{what}: {len(v):,} numbers, mean {_number(np.nanmean(v), fmt)}, from "
            f"{_number(np.nanmin(v), fmt)} to {_number(np.nanmax(v), fmt)}.")


def lines(series: dict[str, np.ndarray], labels: Sequence, what: str,
          fmt: str = ".3f") -> str:
    """Series over the same labels: where each is highest, with its value."""
    parts = []
    for name, values in series.items():
        v = _finite(values).ravel()
        if len(v) and not np.isnan(v).all():
            i = int(np.nanargmax(v))
            parts.append(f"{name} highest at {quoted(labels[i])}, {_number(v[i], fmt)}")
    return f"{what}: " + "; ".join(parts) + "." if parts else f"{what}: no values."


def lens(probs, top_tokens: Sequence[Sequence[str]], stage_labels: Sequence,
         position_labels: Sequence, column: int = -1) -> str:
    """A logit lens: the guess at one position (default: the last shown) after the first and
    the last stage."""
    p = _finite(probs)
    c = column % p.shape[1]
    first, last = 0, p.shape[0] - 1
    return (f"At {quoted(position_labels[c])}, the top guess after "
            f"{stage_labels[first]} is {quoted(top_tokens[first][c])} "
            f"(p {_number(p[first, c], '.3f')}) and after {stage_labels[last]} "
            f"{quoted(top_tokens[last][c])} (p {_number(p[last, c], '.3f')}).")


def two_runs(labels: Sequence, a, b, names: tuple[str, str], what: str,
             fmt: str = ".3f") -> str:
    """The same labels in two runs: the largest change between them."""
    va, vb = _finite(a).ravel(), _finite(b).ravel()
    diff = np.abs(np.nan_to_num(vb - va, nan=0.0))
    if not len(diff):
        return f"{what}: no values."
    i = int(np.argmax(diff))
    return (f"{what}: the largest difference is {quoted(labels[i])}, {_number(va[i], fmt)} "
            f"({names[0]}) against {_number(vb[i], fmt)} ({names[1]}).")


def kept_and_cut(labels: Sequence, probs, kept, what: str, k: int = 3) -> str:
    """Ranked probabilities after the cutoffs: the top k, and how many bars are kept or cut."""
    keep = np.asarray(kept, dtype=bool).ravel()
    n_cut = int((~keep).sum())
    return (top_items(labels, probs, what, k)[:-1] + f"; of the {len(keep):,} bars drawn, "
            f"{len(keep) - n_cut:,} are kept and {n_cut:,} cut (striped).")


def cumulative(running_sum, n_kept: int, top_p: float | None) -> str:
    """Top-p's curve: how much the kept ranks hold, and the cutoff."""
    c = _finite(running_sum).ravel()
    k = int(min(max(n_kept, 1), len(c)))
    rule = f" (top-p = {top_p:g})" if top_p is not None else ""
    return (f"The {k:,} most likely tokens are kept{rule}: together they hold "
            f"{_number(c[k - 1], '.4f')} of the probability; the curve is drawn for the first "
            f"{len(c):,} ranks.")


def groups(series: dict[str, np.ndarray], labels: Sequence, what: str, fmt: str = ",.0f") -> str:
    """Grouped bars (one series per name over the same labels): each series' largest bar and
    its total."""
    parts = []
    for name, values in series.items():
        v = _finite(values).ravel()
        if not len(v) or np.isnan(v).all():
            parts.append(f"{quoted(name)} no values")
            continue
        hi = int(np.nanargmax(v))
        parts.append(f"{quoted(name)} largest {quoted(labels[hi])} {_number(v[hi], fmt)} of "
                     f"{_number(np.nansum(v), fmt)}")
    return f"{what}: " + "; ".join(parts) + "."
