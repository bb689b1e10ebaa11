"""Page 9, training: the form; a short training lowers the loss and the trained model is then
selectable on another page; a pasted text that is too short is refused."""

from __future__ import annotations

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
SAMPLING, TRAINING = "pages/6_Softmax_and_sampling.py", "pages/9_Training.py"


def test_training_page_opens_with_its_form():
    at = open_page(TRAINING, NORMAL)
    assert_clean(at)
    assert at.button(key="training.start") and not charts(at)


def test_training_lowers_the_loss_and_offers_the_model_everywhere():
    at = open_page("app.py")
    at.switch_page(TRAINING).run()
    at.slider(key="training.layers").set_value(1)
    at.select_slider(key="training.heads").set_value(1)
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


def test_pasted_text_that_is_too_short_is_refused():
    at = open_page(TRAINING, NORMAL)
    at.radio(key="training.source").set_value("Text I paste below")
    at.text_area(key="training.text").input("too short")
    at.button(key="training.start").click().run()
    assert not at.exception
    assert any("at least" in e.value for e in at.error)
    assert "training.job" not in at.session_state
