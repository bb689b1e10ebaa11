"""What if: switch off a piece of the model and watch the prediction (and one stage) change.

Both runs are the model's own `run_with_trace`, the second with `Interventions`."""

import numpy as np
import pandas as pd
import streamlit as st

import ui
from tinygpt import readouts as ti
from tinygpt.model import Interventions

TOP = 8  # next tokens compared
MAX_ATTN = 160  # the attention maps show at most the last MAX_ATTN positions

SWITCHES = {
    "no_position": ("No position embeddings",
                    "Drop P: the model no longer knows the order of the tokens."),
    "no_causal_mask": ("No causal mask",
                       "Every token may look at later tokens too (it could 'cheat')."),
    "no_layernorm": ("No LayerNorm", "Every LayerNorm (LN1, LN2 and the final one) passes x "
                     "through unchanged."),
    "no_residual": ("No residual connections",
                    "x = sublayer(x) instead of x = x + sublayer(x): each block overwrites."),
}


def switches(state: ui.AppState) -> Interventions:
    """Draw the switches; return the Interventions they describe."""
    cols = st.columns(4)
    flags = {
        name: col.toggle(label, key=f"p8_{name}", help=help_text)
        for col, (name, (label, help_text)) in zip(cols, SWITCHES.items(), strict=True)
    }
    heads = [(layer, h) for layer in range(state.n_layer) for h in range(state.n_head)]
    c1, c2, c3 = st.columns(3)
    zero = c1.multiselect("Zero these heads", heads, key="p8_zero_heads",
                          format_func=lambda lh: f"block {lh[0]}, head {lh[1]}")
    skip_attn = c2.multiselect("Skip attention in blocks", list(range(state.n_layer)),
                               key="p8_skip_attn")
    skip_ffn = c3.multiselect("Skip the feed-forward in blocks", list(range(state.n_layer)),
                              key="p8_skip_ffn")
    return Interventions(zero_heads=frozenset(zero), skip_attn=frozenset(skip_attn),
                         skip_ffn=frozenset(skip_ffn), **flags)


ui.page_setup("What if…")
with ui.guard():
    state = ui.sidebar()
    if state is not None and state.ready:
        ui.explain(
            "Each switch removes one idea from the transformer. The model was trained with "
            "all of them on, so turning one off shows what that idea was doing: compare "
            "the next-token guesses and the internal view below, normal against switched."
        )
        iv = switches(state)
        logits, trace = ui.get_trace(state)
        new_logits, new_trace = ui.get_trace(state, iv)
        t = state.position

        # ---- the prediction
        st.subheader(f"Next-token guess after {state.labels[t]}")
        if not iv.active:
            st.info("All switches are off, so both runs are the same model. Flip one above.")
        p, q = ti.probabilities(logits[t]), ti.probabilities(new_logits[t])  # (v,) each
        # the union of both runs' top tokens, ordered by the normal run's probability
        shown = list(dict.fromkeys([*ti.top_k(logits[t], TOP)[0], *ti.top_k(new_logits[t],
                                                                            TOP)[0]]))
        shown.sort(key=lambda i: -p[i])
        tokens = [f"{i}:{ui.token_text(state.tokenizer, i)}" for i in shown]
        ui.show_chart(ui.prediction_change_figure(tokens, p[shown], q[shown], t),
                      f"what_if_next_token_position{t}",
                      ui.series_table({"p normal": p[shown], "p with the switches": q[shown]},
                                      tokens, "token"))
        kl = float(ti.kl_divergence(p, q))
        before, after = int(np.argmax(p)), int(np.argmax(q))
        changed = "changed" if before != after else "did not change"
        name = lambda i: repr(ui.token_text(state.tokenizer, i))  # noqa: E731
        st.markdown(
            f"The top guess **{changed}**: {name(before)} ({p[before]:.3f}) → "
            f"{name(after)} ({q[after]:.3f}). "
            f"Entropy {float(ti.entropy(p)):.2f} → {float(ti.entropy(q)):.2f} bits; "
            f"KL(normal ‖ switched) = {kl:.3f} bits."
        )
        ui.explain(
            "KL divergence measures how much the switched model's distribution q differs "
            "from the normal one p (0 means identical).",
            r"\mathrm{KL}(p\,\|\,q) = \sum_i p_i \log_2 \frac{p_i}{q_i}",
        )
        if state.n > 1:
            hits_before = int(ti.next_token_hits(logits, state.ids).sum())
            hits_after = int(ti.next_token_hits(new_logits, state.ids).sum())
            loss_before = -float(np.mean(ti.target_logprobs(logits, state.ids)))
            loss_after = -float(np.mean(ti.target_logprobs(new_logits, state.ids)))
            st.dataframe(pd.DataFrame({
                "": ["normal", "switched"],
                f"top-1 hits on this prompt (of {state.n - 1})": [hits_before, hits_after],
                "loss on this prompt": [loss_before, loss_after],
            }), hide_index=True)

        # ---- one stage, before and after
        st.subheader("Inside the model")
        stage = st.radio("Stage", ["attention weights", "residual norms", "logit lens"],
                         horizontal=True, key="p8_stage")
        if stage == "attention weights":
            c1, c2 = st.columns(2)
            layer = c1.selectbox("Block", list(range(state.n_layer)), key="p8_layer")
            head = c2.selectbox("Head", list(range(state.n_head)), key="p8_head")
        left, right = st.columns(2)
        if stage == "attention weights":
            keep = slice(max(0, state.n - MAX_ATTN), state.n)
            labels = state.labels[keep]
            if state.n > MAX_ATTN:
                st.caption(f"Showing the last {MAX_ATTN} of {state.n} positions.")
            for col, tr, title in ((left, trace, "normal"), (right, new_trace, "switched")):
                w = ti.attention_with_mask(tr, layer, head)[keep, keep]
                fig = ui.attention_heatmap(w, labels, f"{title}: block {layer}, head {head} "
                                           f"weights (n × n = {state.n} × {state.n})")
                fig.data[0].update(zmin=0.0, zmax=1.0)  # one colour scale for both maps
                with col:
                    ui.show_chart(fig, f"what_if_attention_{title}_block{layer}_head{head}",
                                  ui.grid_table(w, labels, labels, "query", "key"),
                                  key=f"p8_attn_{title}")
            ui.explain("Grey cells are hidden by the causal mask. Zeroing a head does not "
                       "change its weights, only stops its output from being used; the "
                       "blocks after it see a different input and so attend differently.")
        elif stage == "residual norms":
            stages = [label for label, _ in ti.residual_stages(state.n_layer)]
            for col, tr, title in ((left, trace, "normal"), (right, new_trace, "switched")):
                norms = ti.residual_norms(tr, state.n_layer)  # (1 + 2L, n)
                fig = ui.residual_norms_figure(norms, stages, state.labels, state.d)
                fig.layout.title.text = f"{title}: ‖x‖, stages × n = {state.n} tokens"
                with col:
                    ui.show_chart(fig, f"what_if_residual_norms_{title}",
                                  ui.grid_table(norms, stages, state.labels, "stage", "token"),
                                  key=f"p8_norms_{title}")
            ui.explain("Without residual connections or LayerNorm, the size of the vectors "
                       "is no longer kept in check: compare the colour bars.")
        else:
            end = max(t + 1, min(state.n, 12))
            positions = list(range(max(0, end - 12), end))
            for col, tr, title in ((left, trace, "normal"), (right, new_trace, "switched")):
                lens = ti.logit_lens(state.model, tr, k=1, positions=positions)
                text = [[ui.token_text(state.tokenizer, i) for i in row]
                        for row in lens.ids[:, :, 0]]
                fig = ui.logit_lens_figure(lens.probs[:, :, 0], text, lens.labels,
                                           state.labels, positions, state.v)
                fig.layout.title.text = f"{title}: logit lens after each block"
                with col:
                    ui.show_chart(fig, f"what_if_logit_lens_{title}",
                                  ui.lens_table(lens.probs[:, :, 0], text, lens.labels,
                                                [state.labels[i] for i in positions]),
                                  key=f"p8_lens_{title}")
            ui.explain("The top token read from the stream after each block (final LayerNorm "
                       "then the output layer), normal against switched. The lens always "
                       "applies the final LayerNorm, even when a switch removes it from the "
                       "model.")
