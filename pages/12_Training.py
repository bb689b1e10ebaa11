"""Training: train a small GPT in the browser and watch the loss fall.

The run (vocabulary, encoding, tinygpt.train.trainer.Trainer) is a low-priority child process
(tinygpt_app.training.job.TrainingJob, tinygpt_app.training.worker), so it never holds the server's
GIL; a fragment polls it once a second and the trained model comes back when it ends. Sizes,
steps and time are capped, one run per session and at most training.MAX_TRAININGS on the whole
server, so one student cannot freeze the class.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from tinygpt.readouts import uniform_entropy
from tinygpt.train.trainer import loss_curves
from tinygpt_app.charts.training import loss_curve
from tinygpt_app.compute.models import SESSION_MODEL_BYTES, model_label, register_session_model
from tinygpt_app.host import host
from tinygpt_app.kit.frame import page, session_id
from tinygpt_app.kit.plain_text import plain
from tinygpt_app.kit.slots import Slot
from tinygpt_app.kit.state import AppState, use_model
from tinygpt_app.kit.widgets import explain, show_chart
from tinygpt_app.sections.explain import draw_checkpoints
from tinygpt_app.training import job as training
from tinygpt_app.training.job import FRESH_VOCAB, MAX_TEXT, MIN_TEXT, TrainingJob, Turn

# this user's TrainingJob (its text at most MAX_TEXT, its model bounded as a session model's)
JOB: Slot[TrainingJob | None] = Slot("training.job", None, max_bytes=SESSION_MODEL_BYTES)
WAITING: Slot[dict | None] = Slot("training.waiting", None,  # a Start's settings, in line
                                  max_bytes=4 * MAX_TEXT)
MAX_BORROWED_VOCAB = 8_192  # bigger tokenizers make the output layer too slow to train here
SOURCES = ("Shakespeare (the shipped corpus)", "Text I paste below")
LEARNING_RATES = (1e-3, 2e-3, 3e-3, 5e-3, 1e-2)
ARCHITECTURES = {"GPT-2-style": "gpt2", "Llama-style": "llama"}  # label -> the trainer's arch


def settings_form(state: AppState, busy: bool) -> dict | None:
    """The form; returns the chosen settings when it is submitted."""
    borrow_ok = state.v <= MAX_BORROWED_VOCAB
    vocabularies = [f"A fresh one learnt from the training text (v = {FRESH_VOCAB})"]
    if borrow_ok:
        current = plain(model_label(state.model_id))  # radio options render markdown
        vocabularies.insert(0, f"The current model's tokenizer ({current}, v = {state.v:,})")
    with st.form("training.form"):
        c1, c2 = st.columns(2)
        source = c1.radio("Training text", SOURCES, key="training.source")
        vocab = c2.radio("Vocabulary", vocabularies, key="training.vocab")
        arch = st.radio("Architecture", list(ARCHITECTURES), key="training.arch",
                        horizontal=True, help="GPT-2-style: LayerNorm, learned positions, GELU. "
                        "Llama-style: RMSNorm, rotary positions, half as many key/value heads "
                        "as query heads, SwiGLU; no biases.")
        text = st.text_area(f"Your text (used with '{SOURCES[1]}'; {MIN_TEXT:,} to "
                            f"{MAX_TEXT:,} characters; the last 10 % is held out)",
                            key="training.text", max_chars=MAX_TEXT, height=120)
        c = st.columns(4)
        n_layer = c[0].slider("Blocks (n_layer)", 1, 4, 2, key="training.layers")
        n_head = c[1].select_slider("Heads", [1, 2, 4], 2, key="training.heads")
        n_embd = c[2].select_slider("Width d (n_embd)", [16, 32, 48, 64, 96, 128], 64,
                                    key="training.embd")
        block = c[3].select_slider("Context (block size)", [16, 32, 64, 96, 128], 64,
                                   key="training.block")
        c = st.columns(4)
        batch = c[0].slider("Batch size", 4, 32, 16, key="training.batch")
        steps = c[1].number_input("Steps", 10, 2000, 300, step=10, key="training.steps")
        lr = c[2].select_slider("Peak learning rate", LEARNING_RATES, 3e-3, key="training.lr")
        limit = c[3].slider("Time limit (s)", 10, 300, 120, step=10, key="training.limit")
        name = st.text_input("Name of your model", "my-model", max_chars=30, key="training.name")
        go = st.form_submit_button("Start training", type="primary", disabled=busy,
                                   key="training.start")
    if not go:
        return None
    return dict(source=source, fresh=not vocab.startswith("The current"), text=text,
                arch=ARCHITECTURES[arch],
                n_layer=n_layer, n_head=n_head, n_embd=n_embd, block=block, batch=batch,
                steps=int(steps), lr=float(lr), limit=float(limit),
                name=(name.strip() or "my-model"))


def ask(state: AppState, s: dict) -> TrainingJob | Turn | str:
    return training.prepare_and_start(state, s["source"] == SOURCES[1], s["text"], s["fresh"],
                                      s, client=session_id(),
                                      address=host().address_key(st.context.ip_address))


def settle(got: TrainingJob | Turn | str, s: dict) -> None:
    """A refusal is shown; a place in line is kept (in_line shows it); a job is started."""
    if isinstance(got, Turn):
        WAITING.set(s)
        return
    WAITING.pop()
    if isinstance(got, str):
        st.error(plain(got))
        return
    JOB.set(got)
    st.rerun()  # the whole page: its progress view


def start(state: AppState, s: dict) -> None:
    """Start now, or wait in line (the page asks again every second: `in_line`)."""
    settle(ask(state, s), s)


def leave_line() -> None:
    WAITING.pop()
    training.QUEUE.leave(session_id())


@st.fragment(run_every=1.0)
def in_line(state: AppState) -> None:
    """Every second while this student waits: their place and wait, or their start."""
    s = WAITING.get()
    if s is None:
        return
    got = ask(state, s)
    if not isinstance(got, Turn):
        settle(got, s)  # its turn (the whole page again), or a refusal
        return
    st.info(f"Every training slot is taken: you are number {got.place} in line, so your "
            f"training starts in at most {got.wait:.0f} s (if everyone ahead uses their whole "
            "time limit). It starts by itself; keep this tab open.")
    st.button("Leave the line", key="training.leave", on_click=leave_line)


def progress(job: TrainingJob) -> None:
    """Progress bar, loss curve and samples: the same view live and at the end."""
    records = job.records()
    done = len(records)
    last = records[-1] if records else None
    fraction = min(1.0, max(done / job.max_steps, job.seconds / job.time_limit
                            if job.running else done / job.max_steps))
    st.progress(fraction, text=f"step {done} of {job.max_steps} · {job.seconds:.0f} s "
                               f"(limit {job.time_limit:.0f} s)"
                               + (f" · loss {last.loss:.3f}" if last else ""))
    if not records:
        st.info("Starting: the training process is learning the vocabulary and encoding the "
                "text; the first step is on its way…" if job.running else "No step was done.")
        return
    family = "Llama-style" if job.arch == "llama" else "GPT-2-style"
    st.caption(f"A {family} model, {job.params:,} parameters, trained on {plain(job.about)}.")
    curves = loss_curves(records)
    uniform = uniform_entropy(job.vocab, math.e)  # ln v: the loss of a uniform guess
    steps, train = curves.steps, curves.train_loss
    val_recs = [r for r in records if r.val_loss is not None]
    fig = loss_curve(
        steps, train, curves.val_steps, curves.val_loss,
        f"Loss of '{job.name}': {done} steps (v = {job.vocab:,})", floor=uniform)
    table = pd.DataFrame({"step": steps, "train_loss": train,
                          "val_loss": [r.val_loss for r in records],
                          "lr": [r.lr for r in records],
                          "grad_norm": [r.grad_norm for r in records]})
    show_chart(fig, "training_loss", table, key="training.loss",
               alt=f"Training loss {float(train[0]):.3f} at step {int(steps[0])}, "
                   f"{float(train[-1]):.3f} at step {int(steps[-1])}"
                   + (f"; validation loss {val_recs[-1].val_loss:.3f} at step "
                      f"{val_recs[-1].step}." if val_recs else "."))
    c = st.columns(3)
    c[0].metric("First loss", f"{records[0].loss:.3f}")
    c[1].metric("Latest loss", f"{last.loss:.3f}", f"{curves.change:+.3f}",
                delta_color="inverse")
    if val_recs:
        c[2].metric("Validation loss", f"{val_recs[-1].val_loss:.3f}")
    explain(
        "The loss is the average surprise of the model at each real next token, −ln p. It "
        f"starts near ln v = {uniform:.2f} (a uniform guess over v = {job.vocab:,} "
        "tokens) and falls as the model learns. The validation text was never trained on: "
        "when its loss stops falling while the training loss goes on, the model is memorising.",
        r"\mathcal{L} = -\frac{1}{N}\sum_{t} \ln p_\theta(x_{t+1} \mid x_{\le t})",
    )
    draw_checkpoints(job)
    samples = [r for r in records if r.sample is not None]
    if samples:
        st.subheader("Samples as it learns")
        for r in reversed(samples):
            st.markdown(f"**step {r.step}** (loss {r.loss:.3f})")
            st.code(r.sample or " ", language=None, wrap_lines=True)


@st.fragment(run_every=1.0)
def live(job: TrainingJob) -> None:
    """Redrawn every second while the child process trains; a full rerun when it ends."""
    if job.done:
        st.rerun()  # the whole page: register the model, refresh the sidebar
    st.button("Stop training", key="training.stop", on_click=job.stop, icon=":material/stop:")
    progress(job)


def finished(job: TrainingJob) -> None:
    if job.error:
        st.error(f"Training failed: {plain(job.error)}")
    if job.model_id is None and job.model is not None and not job.error:
        job.model_id = register_session_model(job.name, job.model, job.tokenizer)
        st.rerun()  # again, so the sidebar's model list shows it
    if job.model_id is not None:
        why = "you stopped it" if job.stopped else (
            "the time limit" if len(job.records()) < job.max_steps else "all steps done")
        st.success(f"**{plain(model_label(job.model_id))}** is ready ({len(job.records())} steps, "
                   f"{why}). It is now in the sidebar's model list on every page, for you "
                   "only (it is forgotten when you close the tab).")
        st.button("Use it now", key="training.use", on_click=use_model, args=(job.model_id,),
                  type="primary")
    progress(job)


with page("Training", needs_prompt=False) as state:
    explain(
        "Train your own small GPT here, GPT-2-style or Llama-style, on the shipped Shakespeare "
        "plays or on a text you paste. Each step takes a batch of windows of the text, "
        "measures how surprised the model is by every next token, and nudges all the weights "
        "to be less surprised (AdamW). Sizes are kept small so it trains in a minute or two: "
        f"at most 4 blocks, d = 128, a context of 128, 2,000 steps and 5 minutes; one "
        f"training per person and at most {training.MAX_TRAININGS} on the server at once "
        "(the others wait in line, first come first served).")
    job = JOB.get()
    busy = job is not None and job.running
    chosen = settings_form(state, busy)
    if busy:
        st.caption("Your training is running: the form unlocks when it ends.")
    if chosen is not None and not busy:
        start(state, chosen)
    if not busy and WAITING.is_set():  # the every-second fragment only while in line:
        in_line(state)  # a fragment that reruns keeps the form's Start button disabled
    if job is not None:
        st.header(f"Training '{plain(job.name)}'")
        if job.running:
            live(job)
        else:
            finished(job)
