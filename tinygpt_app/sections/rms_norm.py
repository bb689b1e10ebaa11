"""The Normalisation page for an RMSNorm model (Llama, Qwen2): one token's vector before and
after, its root mean square, the learned scale γ (there is no shift), all tokens at once, and
beside it what LayerNorm would have done to the same vector (the mean it would have removed).

Numbers from tinygpt.readouts.modern.rms_norm: the RMS the model divided by is the trace's own; the
LayerNorm numbers are computed on the same input, as a comparison, not as the model.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt.readouts.modern.rms_norm import (
    RMSNormStatistics,
    layer_norm_instead,
    rms_norm_statistics,
)
from tinygpt_app.charts import layernorm as charts
from tinygpt_app.charts.common import MAX_HEATMAP_CELLS, first_row_within_budget
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import RMS_STAGE
from tinygpt_app.kit.labels import shape
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import (
    columns,
    explain,
    grid_table,
    metrics,
    number_table,
    series_table,
    show_chart,
)

MAX_TABLE_DIMS = 8  # dimensions in the worked example
STAGES = {  # heatmap choice -> trace suffix
    "before (input x)": "input",
    "after dividing by the RMS (x̂)": "normalized",
    "after the scale (y)": "output",
}


PARTS = ["One token", "What LayerNorm would have done", "The learned scale γ",
         "All tokens at once"]


def draw_rms_norm(state: AppState, trace, label: str, prefix: str) -> None:
    """The page's body for the RMSNorm `prefix` ("blocks.0.ln1", ..., "ln_f")."""
    stats = rms_norm_statistics(state.model, trace, prefix)
    one, instead, learned, every = st.tabs(PARTS)  # one part at a time (issue 49)
    with one:
        draw_one_token(state, trace, prefix, stats)
    with instead:
        draw_layer_norm_instead(state, trace, prefix, stats)
    with learned:
        draw_gamma(state, label, prefix, stats)
    with every:
        draw_all_tokens(state, trace, prefix, stats)


def draw_one_token(state: AppState, trace, prefix: str, stats: RMSNormStatistics) -> None:
    t, d = state.position, state.d
    rms, mean = float(stats.rms[t]), float(stats.mean[t])
    st.header(f"One token: position {plain(state.labels[t])}")
    explain(
        "RMSNorm looks at one token's vector of d numbers on its own and divides it by its "
        "**root mean square** (RMS): the square root of the average of the squared numbers. "
        "The vector keeps its direction and its mean; only its size becomes 1 on average. "
        "Then a learned scale γ (one per dimension) stretches each dimension. Unlike "
        "LayerNorm there is no mean subtracted and no shift β: fewer numbers to compute, and "
        "models such as Llama train as well without them.",
        r"\begin{aligned}\mathrm{rms}(x) &= \sqrt{\tfrac1d \textstyle\sum_j x_j^2 + "
        r"\varepsilon}\\ \hat x_j = \frac{x_j}{\mathrm{rms}(x)},&\quad y_j = \gamma_j\,"
        r"\hat x_j\end{aligned}")
    metrics({"RMS of x": f"{rms:.4f}", "mean square of x": f"{float(stats.mean_square[t]):.4f}",
             "mean μ of x (kept)": f"{mean:+.4f}", "ε": f"{stats.eps:g}"})
    views = (("input", "x", "Before: x", dict(mean=mean, rms=rms)),
             ("normalized", "x̂", "Divided by the RMS: x̂", dict(rms=1.0)),
             ("output", "y", "Scaled: y = γ·x̂", {}))
    draw_stages(state, trace, prefix, views)
    st.caption("Red dashed line: the mean (RMSNorm leaves it where it is); orange dotted lines: "
               "± the RMS (for x̂ these are ±1 by construction).")
    k = min(MAX_TABLE_DIMS, d)
    x = trace[f"{prefix}.input"][t]
    st.markdown(f"**The same numbers, dimension by dimension** (first {k} of {d}):")
    number_table(pd.DataFrame(
        [x[:k], trace[f"{prefix}.normalized"][t, :k], stats.gamma[:k],
         trace[f"{prefix}.output"][t, :k], layer_norm_instead(x, stats.eps)[:k]],
        index=pd.Index(["x", "x̂ = x / rms", "γ (scale)", "y = γ·x̂",
                        "LayerNorm instead: (x − μ) / √(σ² + ε)"], name="vector"),
        columns=[f"dim {j}" for j in range(k)]))


def draw_stages(state: AppState, trace, prefix: str, views: tuple) -> None:
    """One token's vector at three stages of a normalisation, histograms side by side: views
    are (stage, symbol, title, marks) with marks the lines to draw (mean, std or rms). The
    LayerNorm page and the RMSNorm view both draw theirs here."""
    t, d = state.position, state.d
    for column, (stage, symbol, title, marks) in zip(columns(3), views, strict=True):
        values = trace[f"{prefix}.{stage}"][t]  # (d,)
        with column:
            show_chart(charts.histogram(values, shape(title, d=d), **marks),
                       f"{prefix}.{stage}_position{t}".replace(".", "_"),
                       series_table({symbol: values}, range(d), "dimension"),
                       key=f"layernorm.histogram_{stage}",
                       alt=alt_text.spread(values, f"{title} at {state.labels[t]}"))


def draw_layer_norm_instead(state: AppState, trace, prefix: str,
                            stats: RMSNormStatistics) -> None:
    t, d = state.position, state.d
    mean = float(stats.mean[t])
    st.header("What LayerNorm would have done to the same vector")
    explain(
        f"LayerNorm (GPT-2) would first subtract the mean μ = {mean:+.4f} from every number, "
        "then divide by the standard deviation. RMSNorm skips the subtraction: when μ is close "
        "to 0 the two give almost the same x̂; the further μ is from 0, the more they differ.",
        r"\begin{aligned}\text{LayerNorm: }\ \hat x_j &= \frac{x_j - \mu}"
        r"{\sqrt{\sigma^2 + \varepsilon}}\\ \text{RMSNorm: }\ \hat x_j &= "
        r"\frac{x_j}{\mathrm{rms}(x)}\end{aligned}")  # stacked: a phone is narrow
    x = trace[f"{prefix}.input"][t]
    instead = layer_norm_instead(x, stats.eps)  # (d,)
    gap = instead - trace[f"{prefix}.normalized"][t]
    left, right = columns(2)
    with left:
        title = "If LayerNorm: (x − μ) / σ"
        show_chart(charts.histogram(instead, shape(title, d=d), mean=0.0, std=1.0),
                   f"{prefix}_layernorm_instead_position{t}".replace(".", "_"),
                   series_table({"LayerNorm x̂": instead}, range(d), "dimension"),
                   key="layernorm.instead",
                   alt=alt_text.spread(instead, f"{title} at {state.labels[t]}"))
    with right:
        st.metric("the mean LayerNorm would remove", f"{mean:+.4f}")
        st.metric("LayerNorm's divisor √(σ² + ε)", f"{float(stats.layer_norm_denominator[t]):.4f}",
                  help="RMSNorm divides by the RMS instead (above).")
        st.metric("largest difference from RMSNorm's x̂", f"{float(abs(gap).max()):.4f}")


def draw_gamma(state: AppState, label: str, prefix: str, stats: RMSNormStatistics) -> None:
    st.header("The learned scale γ (no shift β)")
    explain("This vector was learned in training and is the same for every token. A γ far "
            "from 1 shows a dimension the model stretches or squeezes on purpose. RMSNorm has "
            "no β: the output is never shifted.")
    short = label.split(" (")[0]
    fig = charts.parameter_bars(stats.gamma, shape(f"γ of {short}", d=state.d), "#3b6ea5")
    show_chart(fig, f"{prefix.replace('.', '_')}_gamma",
               series_table({"γ": stats.gamma}, range(state.d), "dimension"),
               key="layernorm.gamma",
               alt=alt_text.bars([f"dimension {j}" for j in range(state.d)], stats.gamma,
                                 f"γ of {short}"))


def draw_all_tokens(state: AppState, trace, prefix: str, stats: RMSNormStatistics) -> None:
    st.header("All tokens at once")
    explain("Each token gets its own RMS: the line chart shows how different they are before "
            "normalisation, and the mean each one keeps (the one LayerNorm would remove). "
            "After it, every row has an RMS of 1.")
    series = {"RMS": stats.rms, "mean μ (kept)": stats.mean}
    draw_rows(state, trace, prefix, series, STAGES, radio=("layernorm.rms_stage", RMS_STAGE))


def draw_rows(state: AppState, trace, prefix: str, series: dict, stages: dict[str, str], *,
              radio: tuple) -> None:
    """Every token's statistics as lines, then one stage of the norm as a heatmap (a radio
    chooses which): the "all tokens at once" view of both norms' pages."""
    show_chart(charts.statistics_lines(series, state.labels,
                                       shape("Per-token statistics of x", n=state.n)),
               f"{prefix.replace('.', '_')}_statistics",
               series_table(series, state.labels, "position: token"), key="layernorm.statistics",
               alt=alt_text.lines(series, state.labels, "Per-token statistics of x"))
    key, spec = radio  # the widget's key, and its declaration
    stage = control(st.radio, "Heatmap of", key, spec, default=next(iter(stages)),
                    choices=list(stages), horizontal=True)
    name = f"{prefix}.{stages[stage]}"
    start = first_row_within_budget(state.n, state.d, MAX_HEATMAP_CELLS // 2)
    if start:
        st.caption(f"Only the last {state.n - start} rows are drawn to keep the page light.")
    z, rows, dims = trace[name][start:], state.labels[start:], [str(j) for j in range(state.d)]
    show_chart(charts.stage_heatmap(z, shape(stage, n=state.n - start, d=state.d), rows, dims),
               name.replace(".", "_"), grid_table(z, rows, dims, "position: token", "dimension"),
               key="layernorm.heatmap",
               alt=alt_text.grid(z, rows, [f"dimension {j}" for j in dims], stage))
