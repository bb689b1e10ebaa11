"""Page 9, training: the form; a short training lowers the loss and the trained model is then
selectable on another page; a pasted text that is too short is refused; a long paste starts a
child process at once, and a full server refuses it before any work."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    assert_clean,
    charts,
    metric,
    open_page,
)

pytestmark = pytest.mark.usefixtures("tiny_models")
SAMPLING, TRAINING = "pages/7_Softmax_and_sampling.py", "pages/12_Training.py"


def test_training_page_opens_with_its_form():
    at = open_page(TRAINING, NORMAL)
    assert_clean(at)
    assert at.button(key="training.start") and not charts(at)


def train_a_tiny_model(at, *, heads: int):
    """One layer, d = 16, 30 steps of 4 x 16 tokens, started and waited for; the page rerun."""
    at.slider(key="training.layers").set_value(1)
    at.select_slider(key="training.heads").set_value(heads)
    at.select_slider(key="training.embd").set_value(16)
    at.select_slider(key="training.block").set_value(16)
    at.slider(key="training.batch").set_value(4)
    at.number_input(key="training.steps").set_value(30)
    at.button(key="training.start").click().run()
    assert_clean(at)
    job = at.session_state["training.job"]
    assert job.wait(120), "the training did not finish"
    at.run()
    assert_clean(at)
    return job


def test_training_lowers_the_loss_and_offers_the_model_everywhere():
    at = open_page("app.py")
    at.switch_page(TRAINING).run()
    train_a_tiny_model(at, heads=1)
    assert metric(at, "Latest loss") < metric(at, "First loss")
    loss = charts(at)[0]["data"][0]["y"]
    assert np.mean(np.asarray(loss[-5:], float) if isinstance(loss, list) else [0]) < 6.3
    options = at.sidebar.selectbox[0].options
    assert any("(trained here)" in o for o in options)
    at.button(key="training.use").click().run()
    assert at.sidebar.selectbox[0].value.startswith("session:my-model")
    at.switch_page(SAMPLING).run()
    assert_clean(at)
    assert at.sidebar.selectbox[0].value.startswith("session:my-model")
    assert charts(at)


def test_a_llama_style_run_trains_the_modern_parts():
    """Architecture "Llama-style": RMSNorm, rotary positions, grouped-query attention (2 query
    heads on 1 key/value head), SwiGLU, no biases; its loss falls too."""
    at = open_page(TRAINING, NORMAL)
    at.radio(key="training.arch").set_value("Llama-style")
    job = train_a_tiny_model(at, heads=2)
    c = job.model.config
    assert (c.norm, c.position, c.mlp, c.n_head, c.kv_heads, c.inner_dim) == (
        "rmsnorm", "rope", "swiglu", 2, 1, 48)
    assert not (c.attn_bias or c.proj_bias or c.mlp_bias)
    assert metric(at, "Latest loss") < metric(at, "First loss")
    assert any("Llama-style model" in c.value for c in at.caption)


def test_pasted_text_that_is_too_short_is_refused():
    at = open_page(TRAINING, NORMAL)
    at.radio(key="training.source").set_value("Text I paste below")
    at.text_area(key="training.text").input("too short")
    at.button(key="training.start").click().run()
    assert not at.exception
    assert any("at least" in e.value for e in at.error)
    assert "training.job" not in at.session_state


FRESH = "A fresh one learnt from the training text (v = 512)"


def adversarial_text(n: int) -> str:
    """n characters that a fresh vocabulary finds expensive: many distinct rare characters."""
    rng = np.random.default_rng(0)
    return "".join(map(chr, rng.integers(0x4E00, 0x9FFF, size=n)))


def paste(text: str):
    at = open_page(TRAINING, NORMAL)
    at.radio(key="training.source").set_value("Text I paste below")
    at.radio(key="training.vocab").set_value(FRESH)
    at.text_area(key="training.text").set_value(text)
    return at


def test_a_text_over_the_cap_is_refused_before_any_work():
    """The text area cuts a paste to MAX_TEXT itself; anything longer that reaches the job
    (another caller) is refused by its length before anything else."""
    from tinygpt_app.training.job import MAX_TEXT, refusal

    assert "at most" in refusal(True, "x" * (MAX_TEXT + 1))
    assert refusal(True, "x" * MAX_TEXT) is None


def test_a_full_server_puts_a_200k_paste_in_line_before_learning_a_vocabulary(monkeypatch):
    """Every slot taken: a 200k-character paste waits in line at once (it used to cost ~40 s of
    GIL-bound vocabulary learning first, slowing every other student), and the student sees
    their place and the wait."""
    import time

    from tinygpt.tokenizer.bpe import BPETokenizer
    from tinygpt_app.training import job as training
    from tinygpt_app.training.queue import TrainingQueue

    monkeypatch.setattr(BPETokenizer, "train", lambda *a, **k: pytest.fail("trained a vocab"))
    queue = TrainingQueue(1, 10)
    assert queue.ask("another student", 120.0)[0].started
    monkeypatch.setattr(training, "QUEUE", queue)
    at = paste(adversarial_text(training.MAX_TEXT))
    start = time.perf_counter()
    at.button(key="training.start").click().run()
    assert time.perf_counter() - start < 10
    assert_clean(at)
    waits = [re.search(r"number 1 in line.* at most (\d+) s", i.value) for i in at.info]
    assert any(w and 100 <= int(w.group(1)) <= 120 for w in waits), [i.value for i in at.info]
    assert queue.running() == 1 and queue.waiting() == 1  # no slot leaked either way
    at.run()  # a second later: still waiting, same place
    assert any("number 1 in line" in i.value for i in at.info)
    queue.finish(1)  # the other student's training ends: this one starts by itself
    at.run()
    job = at.session_state["training.job"]
    try:
        assert job.running and queue.running() == 1 and queue.waiting() == 0
    finally:
        job.stop()
        assert job.wait(30)
    assert queue.running() == 0


def test_the_page_starts_a_200k_paste_in_a_child_process_and_returns_at_once(monkeypatch):
    """The page thread learns no vocabulary and encodes nothing: it takes a slot and starts
    the child, which holds the slot until it ends."""
    import os
    import time

    from tinygpt.tokenizer.bpe import BPETokenizer
    from tinygpt_app.training import job as training

    monkeypatch.setattr(BPETokenizer, "train", lambda *a, **k: pytest.fail("trained a vocab"))
    before = training.trainings_running()
    at = paste(adversarial_text(training.MAX_TEXT))
    start = time.perf_counter()
    at.button(key="training.start").click().run()
    assert time.perf_counter() - start < 10  # learning this vocabulary takes far longer
    assert_clean(at)
    job = at.session_state["training.job"]
    assert job.running and job.pid != os.getpid()
    assert training.trainings_running() == before + 1
    assert any("first step is on its way" in i.value for i in at.info)
    job.stop()
    assert job.wait(30)
    assert training.trainings_running() == before
    at.run()
    assert_clean(at)
    assert at.button(key="training.start").disabled is False


def _start_with(monkeypatch, queue):
    from tinygpt_app.training import job as training

    monkeypatch.setattr(training, "QUEUE", queue)
    at = open_page(TRAINING, NORMAL)
    at.button(key="training.start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "training.job" not in at.session_state
    return [e.value for e in at.error]


def test_with_no_training_slots_start_says_training_is_off(monkeypatch):
    """TINYGPT_MAX_TRAININGS=0: a plain message, for the first student and the next."""
    from tinygpt_app.training.queue import TrainingQueue

    queue = TrainingQueue(0, 10)
    for _ in range(2):
        assert any("switched off on this server" in e for e in _start_with(monkeypatch, queue))


def test_one_computer_with_its_places_taken_is_told_why(monkeypatch):
    """Another tab of this computer (AppTest's address is loopback) holds its only place."""
    from tinygpt_app.training.queue import TrainingQueue

    queue = TrainingQueue(1, 10, per_address=1)
    assert queue.ask("another student", 120.0, "10.0.0.9")[0].started
    assert queue.ask("my other tab", 120.0, "127.0.0.1")[0].place == 1
    errors = _start_with(monkeypatch, queue)
    assert any("already holds 1 places in the training line" in e for e in errors), errors
    assert queue.waiting() == 1
