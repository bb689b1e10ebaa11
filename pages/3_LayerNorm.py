"""Normalisation: each token's vector brought to a common size before attention and the
feed-forward. GPT-2's LayerNorm centres it, scales it to unit variance, then scales and shifts
it; Llama's RMSNorm (tinygpt_app.sections.rms_norm) only divides it by its root mean square and
scales it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt import readouts as ti
from tinygpt_app.charts import layernorm as charts
from tinygpt_app.compute import caches
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import NORM, NORM_STAGE, RMS_NORM
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import shape
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import (
    columns,
    explain,
    metrics,
    number_table,
    series_table,
    show_chart,
)
from tinygpt_app.sections.rms_norm import MAX_TABLE_DIMS, draw_rms_norm, draw_rows, draw_stages

STAGES = {  # heatmap choice -> trace suffix
    "before (input x)": "input",
    "after normalising (x̂)": "normalized",
    "after scale and shift (y)": "output",
}


PARTS = ["One token", "The learned scale γ and shift β", "All tokens at once"]


def norm_choices(n_layer: int, kind: str = "LayerNorm") -> dict[str, str]:
    """Label -> trace prefix, in the order the data flows through the model; `kind` names the
    normalisation ("LayerNorm" or "RMSNorm")."""
    short = "LN" if kind == "LayerNorm" else "RMSNorm "
    choices = {}
    for i in range(n_layer):
        choices[f"Block {i} · {short}1 (before attention)"] = f"blocks.{i}.ln1"
        choices[f"Block {i} · {short}2 (before the feed-forward network)"] = f"blocks.{i}.ln2"
    choices[f"Final {kind} (before the output layer)"] = "ln_f"
    return choices


def norm_module(model, prefix: str):
    """The LayerNorm object whose trace names start with `prefix` (for its gamma and beta)."""
    return ti.find_layer_norm(model, prefix)


def draw_one_token(state: AppState, trace, prefix: str, norm) -> None:
    t, d = state.position, state.d
    stats = ti.layer_norm_statistics(state.model, trace, prefix)
    mean, var, std = float(stats.mean[t]), float(stats.var[t]), float(stats.std[t])
    st.header(f"One token: position {plain(state.labels[t])}")
    explain(
        "LayerNorm looks at one token's vector of d numbers on its own. It subtracts their mean "
        "μ and divides by their standard deviation, so the vector is centred at 0 with variance "
        "1 whatever its scale was. Then a learned scale γ and shift β (one of each per "
        "dimension) let the model choose the spread it actually wants.",
        (r"\hat x_j = \frac{x_j - \mu}{\sqrt{\sigma^2 + \varepsilon}}",
         r"y_j = \gamma_j\,\hat x_j + \beta_j",
         r"\mu = \tfrac1d \textstyle\sum_j x_j,\ \sigma^2 = \tfrac1d \sum_j (x_j-\mu)^2"),
    )
    metrics({"mean μ of x": f"{mean:+.4f}", "variance σ² of x": f"{var:.4f}",
             "std √(σ²+ε)": f"{float(stats.denominator[t]):.4f}", "ε": f"{norm.eps:g}"})
    views = (("input", "x", "Before: x", dict(mean=mean, std=std)),
             ("normalized", "x̂", "Normalised: x̂", dict(mean=0.0, std=1.0)),
             ("output", "y", "Scaled and shifted: y", {}))
    draw_stages(state, trace, prefix, views)
    st.caption("Red dashed line: the mean; orange dotted lines: one standard deviation either "
               "side (for x̂ these are 0 and ±1 by construction).")

    k = min(MAX_TABLE_DIMS, d)
    st.markdown(f"**The same numbers, dimension by dimension** (first {k} of {d}):")
    number_table(pd.DataFrame(
        [trace[f"{prefix}.input"][t, :k], trace[f"{prefix}.normalized"][t, :k],
         norm.gamma[:k], norm.beta[:k], trace[f"{prefix}.output"][t, :k]],
        index=pd.Index(["x", "x̂ = (x − μ) / √(σ² + ε)", "γ (scale)", "β (shift)", "y = γ·x̂ + β"],
                       name="vector"),
        columns=[f"dim {j}" for j in range(k)],
    ))


def draw_parameters(state: AppState, label: str, prefix: str, norm) -> None:
    st.header("The learned scale γ and shift β")
    explain("These two vectors were learned in training and are the same for every token. "
            "A γ far from 1 or a β far from 0 shows a dimension the model stretches, "
            "squeezes or moves on purpose.")
    short = label.split(" (")[0]
    vectors = (("gamma", "γ", norm.gamma, "#3b6ea5"), ("beta", "β", norm.beta, "#E69F00"))
    for column, (name, symbol, values, colour) in zip(columns(2), vectors, strict=True):
        fig = charts.parameter_bars(values, shape(f"{symbol} of {short}", d=state.d), colour)
        with column:
            show_chart(fig, f"{prefix.replace('.', '_')}_{name}",
                       series_table({symbol: values}, range(state.d), "dimension"),
                       key=f"layernorm.{name}",
                       alt=alt_text.bars([f"dimension {j}" for j in range(state.d)], values,
                                         f"{symbol} of {short}"))


def draw_all_tokens(state: AppState, trace, prefix: str) -> None:
    st.header("All tokens at once")
    explain("Each token gets its own μ and σ: the line chart shows how different they are "
            "before normalisation. After it, every row has mean 0 and variance 1.")
    stats = ti.layer_norm_statistics(state.model, trace, prefix)
    mean, std = stats.mean, stats.std  # std: the spread in the units of x
    series = {"mean μ": mean, "standard deviation σ": std}
    draw_rows(state, trace, prefix, series, STAGES, radio=("layernorm.stage", NORM_STAGE))


KINDS = {  # config.norm -> the name and what the model family is
    "layernorm": ("LayerNorm", "as GPT-2 does"),
    "rmsnorm": ("RMSNorm", "as Llama, Qwen2 and SmolLM2 do"),
}

STAT_KEYS = {"LayerNorm": ("layernorm.norm", NORM), "RMSNorm": ("layernorm.rms_norm", RMS_NORM)}

with page("Normalisation") as state:
    _, trace = caches.get_trace(state)
    kind, family = KINDS[state.model.config.norm]
    st.markdown(f"This model normalises with **{kind}**, {family}.")
    choices = norm_choices(state.n_layer, kind)
    # a key per kind: a label of one kind is no option of the other
    key, spec = STAT_KEYS[kind]
    label = control(st.selectbox, kind, key, spec, default=next(iter(choices)),
                    choices=list(choices),
                    help="Every block has two; one more sits before the output layer.")
    if kind == "RMSNorm":
        draw_rms_norm(state, trace, label, choices[label])
    else:
        norm = norm_module(state.model, choices[label])
        one, learned, every = st.tabs(PARTS)  # one part at a time (issue 49)
        with one:
            draw_one_token(state, trace, choices[label], norm)
        with learned:
            draw_parameters(state, label, choices[label], norm)
        with every:
            draw_all_tokens(state, trace, choices[label])
