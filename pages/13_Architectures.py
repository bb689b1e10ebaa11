"""Architectures: GPT-2-style and Llama-style models side by side. What each is made of, where
its parameters are, what its KV cache costs a token, its held-out loss, what it guesses after
the same prompt, and how its tokenizer cuts the same text."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tinygpt.readouts.modern.architecture import (
    PARTS,
    components,
    kv_bytes_per_token,
    parameter_table,
    same_cuts,
)
from tinygpt.readouts.parts import parts_of
from tinygpt_app.charts.modern import architectures as charts
from tinygpt_app.charts.sampling import top_probabilities
from tinygpt_app.compute import architectures as arch
from tinygpt_app.compute.models import available_models, load_model, model_label, session_models
from tinygpt_app.kit import alt_text
from tinygpt_app.kit.controls import MODELS
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.labels import token_label
from tinygpt_app.kit.plain_text import cut, plain, without_paths
from tinygpt_app.kit.state import AppState, control
from tinygpt_app.kit.widgets import chips, columns, explain, series_table, show_chart

INTRO = ("The same idea, built two ways: GPT-2 (2019) and the Llama family (Llama, SmolLM2, "
         "Qwen2) that most open models follow today. Every number below is read from the "
         "models themselves.")
MAX_TEXT_CHARS = 300  # of the prompt, cut by each tokenizer
KEY_MODELS = "architectures.models"
ROW_PX = 35  # a dataframe row's height


def chosen_models(state: AppState) -> dict[str, tuple]:
    """The models side by side (at most arch.MAX_MODELS), loaded: id -> (model, tokenizer)."""
    options = available_models() + list(session_models())
    picked = control(st.multiselect, "Models side by side", KEY_MODELS, MODELS,
                     default=[m for m in arch.default_models(state.model_id) if m in options],
                     choices=options, max_selections=MODELS.cap, format_func=model_label,
                     help=f"Up to {MODELS.cap}: each one is loaded and reads the prompt once.")
    loaded = {}
    for model_id in picked or [state.model_id]:
        try:
            loaded[model_id] = load_model(model_id)
        except Exception as err:  # noqa: BLE001 - one model that fails leaves the others
            st.warning(f"{plain(cut(model_label(model_id)))} cannot be shown: "
                       f"{plain(cut(without_paths(err)))}")
    return loaded


def draw_components(models: dict[str, tuple]) -> None:
    st.header("1 · What each model is made of")
    table = pd.DataFrame({model_label(m): components(model.config)
                          for m, (model, _) in models.items()})
    table.index.name = "part"  # the corner cell names the rows (an empty header is unlabelled)
    for m, (model, _) in models.items():
        loss = arch.heldout_loss(m)
        table.loc["held-out loss", model_label(m)] = (
            "no card" if loss is None else f"{loss:.3f} nats per character")
        table.loc["parameters", model_label(m)] = f"{model.num_parameters():,}"
    st.dataframe(table, width="stretch", height=ROW_PX * (len(table) + 1) + 3)  # every row
    st.caption("Held-out loss: on text the model never trained on, as its model card states it "
               "(the models folder's <name>.card.json); no card, no number.")
    for m, (model, _) in models.items():
        parts = parts_of(model.config)
        st.markdown(f"**{plain(model_label(m))}** ({parts.family}): {parts.norm}: "
                    f"{parts.norm_does}; {parts.positions}: {parts.positions_does}; "
                    f"{parts.mlp}: {parts.mlp_does}.")


def draw_parameters(models: dict[str, tuple]) -> None:
    st.header("2 · Where the parameters are")
    names = [model_label(m) for m in models]
    counts = parameter_table([model.config for model, _ in models.values()])  # (M, P)
    fig = charts.parameters_by_part(names, PARTS, counts,
                                    f"Parameters by part, {len(names)} model(s)")
    table = series_table({name: counts[i] for i, name in enumerate(names)}, PARTS, "part")
    show_chart(fig, "parameters_by_part", table, key="architectures.parameters",
               alt=alt_text.groups({name: counts[i] for i, name in enumerate(names)}, PARTS,
                                   "Parameters by part"))
    explain("Each bar counts the numbers of one part's weight matrices and vectors; the bars "
            "of a model add up to its total. A tied output layer has none of its own (it "
            "reuses the token embedding); a model with rotary positions has no position "
            "table; RMSNorm has only γ, where LayerNorm has γ and β.")


def draw_kv_cache(models: dict[str, tuple]) -> None:
    st.header("3 · What the KV cache costs a token")
    for col, (m, (model, _)) in zip(columns(len(models)), models.items(), strict=True):
        c = model.config
        size = model.dtype.itemsize
        own = kv_bytes_per_token(c, size)
        full = kv_bytes_per_token(c, size, kv_heads=c.n_head)  # one per query head
        col.metric(f"{model_label(m)}: bytes per token", f"{own:,}",
                   help=f"2 × {c.kv_heads} key/value heads × {c.head_size} numbers × "
                        f"{c.n_layer} layers × {size} bytes")
        if own != full:
            col.caption(f"With one key/value head per query head: {full:,} bytes "
                        f"({c.group_size}× more).")
    explain("While a model generates, it keeps every earlier token's key and value in every "
            "layer, so that a new token costs one position. Grouped-query attention shares "
            "one key/value head between several query heads: fewer keys to keep. Per token: "
            "a key and a value (2) of n_kv heads × h_s numbers, in L layers, b bytes each "
            "(4 for float32).",
            r"\text{bytes} = 2\, n_{kv}\, h_s\, L\, b")  # short: fits a phone


def draw_next_tokens(state: AppState, models: dict[str, tuple]) -> None:
    st.header("4 · The same prompt: each model's next token")
    for col, (m, (model, tok)) in zip(columns(len(models)), models.items(), strict=True):
        ids = tok.encode(state.prompt)
        if not len(ids):
            col.info(f"{plain(model_label(m))}: this tokenizer makes no token of the prompt.")
            continue
        guess = arch.guess(m, model, ids)
        labels = [token_label(tok, i) for i in guess.ids]
        fig = top_probabilities([token_label(tok, i, show_id=True) for i in guess.ids],
                                guess.probs, f"{model_label(m)}: after its last "
                                             f"{guess.tokens_read} tokens")
        with col:
            show_chart(fig, f"next_token_{len(labels)}_{list(models).index(m)}",
                       series_table({"probability": guess.probs}, labels, "token"),
                       key=f"architectures.next.{list(models).index(m)}",
                       alt=alt_text.top_items(labels, guess.probs,
                                              f"{model_label(m)}'s most likely next tokens"))
    st.caption(f"Each model reads the prompt cut by its own tokenizer (at most its last "
               f"{arch.MAX_TOKENS} tokens). Models trained on different text guess differently.")


def draw_tokenizations(state: AppState, models: dict[str, tuple]) -> None:
    st.header("5 · How each tokenizer cuts the text")
    text = state.prompt[:MAX_TEXT_CHARS]
    pieces = {m: [token_label(tok, i) for i in tok.encode(text)]
              for m, (_, tok) in models.items()}
    if len(pieces) > 1 and same_cuts(list(pieces.values())):
        st.markdown(f"All {len(pieces)} tokenizers cut the text into the same "
                    f"{len(next(iter(pieces.values())))} tokens.")
    for m, (_, tok) in models.items():
        ids = tok.encode(text)
        st.markdown(f"**{plain(model_label(m))}**: {len(ids)} tokens, from a vocabulary of "
                    f"{tok.vocab_size:,}")
        chips([(token_label(tok, t), f"id {int(t)}") for t in ids])
    if len(state.prompt) > MAX_TEXT_CHARS:
        st.caption(f"The first {MAX_TEXT_CHARS} characters of the prompt.")


with page("Architectures", intro=INTRO) as state:
    models = chosen_models(state)
    if models:
        draw_components(models)
        draw_parameters(models)
        draw_kv_cache(models)
        draw_next_tokens(state, models)
        draw_tokenizations(state, models)
