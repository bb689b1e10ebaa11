"""The Neurons section of the Residual stream page: the feed-forward neurons that matter most
for the top token at the inspected position, one neuron along the prompt, and the tokens its
output pushes up and down; for a SwiGLU model (Llama, Qwen2) the gate after SiLU, the up
projection, their product and what the down projection writes, for the inspected token.

Numbers come from tinygpt.readouts.attribution (neuron_effects, neuron_token_effects) and
tinygpt.readouts.neurons, cached per (model, version, ids, position, layer[, neuron]) on small
keys; SwiGLU's parts from tinygpt.readouts.modern.swiglu (one token's row of the trace, not cached).
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from tinygpt.network.model import GPT
from tinygpt.readouts import top_k
from tinygpt.readouts.attribution import NeuronEffects, neuron_effects, neuron_token_effects
from tinygpt.readouts.modern.swiglu import swiglu_parts, top_products
from tinygpt.readouts.neurons import neuron_activations, pushed_tokens, top_neurons
from tinygpt_app.charts import neurons as charts
from tinygpt_app.charts.common import bar
from tinygpt_app.compute.models import model_version
from tinygpt_app.compute.shared_cache import shared
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import NEURON, NEURON_LAYER
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import explain, series_table, show_chart

GELU_ACTIVATION, SWIGLU_ACTIVATION = "activation (after GELU)", "activation SiLU(gate)·up"

TOP_NEURONS = 10  # bars in the top-neurons chart
PUSHED = 8  # tokens pushed up, and down


@shared(16 * 2**20)  # a layer's neuron effects: (4C,) arrays
def _effects_cached(model_id: str, version: float, ids: tuple[int, ...], position: int,
                    layer: int, token: int, _model: GPT, _trace) -> NeuronEffects:
    array = np.asarray(ids, dtype=np.int64)
    return neuron_effects(_model, array, position, layer, token, trace=_trace)


@shared(32 * 2**20)  # (V,) float64: 400 KB for GPT-2
def _token_effects_cached(model_id: str, version: float, ids: tuple[int, ...], position: int,
                          layer: int, neuron: int, _model: GPT, _trace) -> np.ndarray:
    values = neuron_token_effects(_model, np.asarray(ids, dtype=np.int64), position, layer,
                                  neuron, trace=_trace)
    values.flags.writeable = False
    return values  # (V,) float64: 400 KB for GPT-2, so few entries


def effects_for(state: AppState, layer: int, token: int, trace) -> NeuronEffects:
    return _effects_cached(state.model_id, model_version(state.model_id),
                           tuple(int(i) for i in state.ids), int(state.position), int(layer),
                           int(token), state.model, trace)


def token_effects_for(state: AppState, layer: int, neuron: int, trace) -> np.ndarray:
    return _token_effects_cached(state.model_id, model_version(state.model_id),
                                 tuple(int(i) for i in state.ids), int(state.position),
                                 int(layer), int(neuron), state.model, trace)


def activation_name(state: AppState) -> str:
    return SWIGLU_ACTIVATION if state.config.mlp == "swiglu" else GELU_ACTIVATION


def draw_top(state: AppState, effects: NeuronEffects, token_name: str) -> np.ndarray:
    top = top_neurons(effects, TOP_NEURONS)
    names = [f"n{j}" for j in top]
    fig = charts.top_neurons(
        names, effects.activations[top], effects.effects[top],
        f"Block {effects.layer}: the {len(top)} of {len(effects.effects)} neurons with the "
        f"largest direct effect on the logit of {token_name} at {state.labels[state.position]}",
        activation_name(state))
    table = series_table({"activation": effects.activations[top], "effect": effects.effects[top]},
                         names, "neuron")
    show_chart(fig, "neurons_top", table, key="residual.neurons_top",
               alt=alt_text.bars(names, effects.effects[top], "Direct effect on the logit"))
    st.caption(f"All {len(effects.effects)} neurons of this block add {effects.total:+.4f} to "
               f"the logit (neurons {effects.total - effects.bias_effect:+.4f}, bias "
               f"{effects.bias_effect:+.4f}).")
    return top


def draw_neuron(state: AppState, layer: int, neuron: int, trace) -> None:
    acts = neuron_activations(trace, layer, neuron)
    fig = charts.activation_over_positions(
        acts, state.labels, state.position,
        f"Neuron n{neuron} of block {layer}: its activation at each of the {state.n} tokens",
        activation_name(state))
    show_chart(fig, "neuron_activation", series_table({"activation": acts}, state.labels,
                                                      "token"), key="residual.neuron_acts",
               alt=alt_text.bars(state.labels, acts, f"Activation of n{neuron}"))
    values = token_effects_for(state, layer, neuron, trace)
    up, down = pushed_tokens(values, PUSHED)
    up_names = [token_label(state.tokenizer, t) for t in up]
    down_names = [token_label(state.tokenizer, t) for t in down]
    fig = charts.pushed_tokens(
        up_names, values[up], down_names, values[down],
        f"What n{neuron} writes at {state.labels[state.position]}: the {len(up)} tokens it "
        f"pushes up most and the {len(down)} it pushes down most (of v = {state.v})")
    table = series_table({"effect": np.concatenate([values[up], values[down]])},
                         [*up_names, *down_names], "token")
    show_chart(fig, "neuron_tokens", table, key="residual.neuron_tokens",
               alt=alt_text.bars(list(table.index), table["effect"],
                                 f"What n{neuron} writes, by token"))


def draw_neurons(state: AppState, logits: np.ndarray, trace) -> None:
    """The whole section, for the inspected position and a chosen block."""
    st.header("4 · Neurons: which feed-forward neurons pushed the top token?")
    ids, _ = top_k(logits[state.position], 1)
    token = int(ids[0])
    token_name = repr(token_label(state.tokenizer, token))
    layers = list(range(state.n_layer))
    layer = control(st.selectbox, "Block", "residual.neuron_layer", NEURON_LAYER,
                    default=layers[-1], choices=layers)
    swiglu = state.config.mlp == "swiglu"
    fires = ("its activation is SiLU(gate)·up, a gate times an up projection" if swiglu
             else "its activation after GELU")
    explain(
        f"A feed-forward layer has {state.config.inner_dim} neurons. Each one fires ({fires}) "
        "and adds its activation times its own output vector to the stream. Read through "
        "the final normalisation and the output layer, that vector moves every token's logit: "
        f"here, the neurons whose **direct effect** on the logit of {plain(token_name)} is "
        "largest.",
        (r"\text{effect}_j = a_j\,\big(W_{\mathrm{down}}[j]\ \text{through}",
         r"\text{the final norm}\big)\cdot w_t"))
    effects = effects_for(state, layer, token, trace)
    top = draw_top(state, effects, token_name)
    if swiglu:
        draw_swiglu(state, layer, trace)
    options = [int(j) for j in top]
    neuron = control(st.selectbox, "Neuron", "residual.neuron", NEURON, default=options[0],
                     choices=options, format_func=lambda j: f"n{j}")
    draw_neuron(state, layer, neuron, trace)


def draw_swiglu(state: AppState, layer: int, trace) -> None:
    """SwiGLU for the inspected token: gate after SiLU, up, their product, and the write."""
    t = state.position
    parts = swiglu_parts(state.model, trace, layer, t)
    st.subheader("SwiGLU: a gate times an up projection")
    st.caption(f"Block {layer}, the inspected token {plain(state.labels[t])}.")
    explain(
        "This model's feed-forward is **SwiGLU** (Llama, Qwen2), not GPT-2's GELU MLP. It makes "
        "two projections of the token's vector: a **gate** passed through SiLU (near 0 for "
        "negative inputs, near the input for positive ones) and an **up** projection. A "
        "neuron is their product: the gate decides how much of the up value passes. The down "
        "projection then writes every neuron's value times its row into the stream.",
        r"\begin{aligned}a_n &= \mathrm{SiLU}(x W_{\mathrm{gate}})_n\,(x W_{\mathrm{up}})_n\\ "
        r"\mathrm{out} &= \textstyle\sum_n a_n\, W_{\mathrm{down}}[n]\\ "
        r"\mathrm{SiLU}(z) &= z\,\sigma(z)\end{aligned}")  # stacked: a phone is narrow
    top = top_products(parts, TOP_NEURONS)
    names = [f"n{j}" for j in top]
    values = {"gate after SiLU": parts.gate_silu[top], "up": parts.up[top],
              "product": parts.product[top]}
    show_chart(charts.gate_and_up(
        names, parts.gate_silu[top], parts.up[top], parts.product[top],
        f"Top {len(top)} of {len(parts.product)} neurons by |SiLU(gate)·up|"),
        "swiglu_gate_up", series_table({**values, "gate before SiLU": parts.gate[top]}, names,
                                       "neuron"),
        key="residual.swiglu_parts",
        alt=alt_text.bars(names, parts.product[top], "SiLU(gate)·up of the top neurons"))
    dims = [f"dimension {j}" for j in range(state.d)]
    show_chart(bar(parts.written, f"What the down projection writes (d = {state.d})",
                   x_title="dimension"),
               "swiglu_written", series_table({"written": parts.written,
                                               "ffn.output (trace)": parts.output},
                                              range(state.d), "dimension"),
               key="residual.swiglu_written",
               alt=alt_text.bars(dims, parts.written, "What the down projection writes"))
    st.caption(f"The sum of all {len(parts.product)} neurons' writes equals the block's "
               f"feed-forward output in the trace to {parts.difference:.1e} (float rounding).")
