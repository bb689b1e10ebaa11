"""The checkpoint scrubber on the Training page: snapshots of the prediction after the sidebar's
prompt during a run, each equal to the model's own top-k at that step, and a slider over them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import NORMAL, assert_clean, chart, decode, open_page  # noqa: E402
from tinygpt.readouts import top_k  # noqa: E402
from tinygpt_app.kit.slots import SESSION_MODELS  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
TRAINING = "pages/12_Training.py"


def test_snapshots_during_a_run_and_a_slider_over_them():
    at = open_page(TRAINING, NORMAL)
    at.slider(key="training.layers").set_value(1)
    at.select_slider(key="training.heads").set_value(1)
    at.select_slider(key="training.embd").set_value(16)
    at.select_slider(key="training.block").set_value(16)
    at.slider(key="training.batch").set_value(4)
    at.number_input(key="training.steps").set_value(40)
    at.button(key="training.start").click().run()
    job = at.session_state["training.job"]
    assert job.wait(120), "the training did not finish"
    at.run()
    assert_clean(at)
    snapshots = job.snapshots()
    assert [s.step for s in snapshots] == [1, *range(2, 41, 2)]
    # the last snapshot is the trained model's own prediction
    model, _ = at.session_state[SESSION_MODELS.key][job.model_id]  # the trained model, kept
    tokens, _ = top_k(model.forward(job.watch)[-1], 5)
    assert np.array_equal(snapshots[-1].tokens, tokens)
    slider = at.select_slider(key="training.checkpoint")
    assert slider.value == 40
    slider.set_value(1).run()
    assert_clean(at)
    bars = decode(chart(at, "at step 1")["data"][0]["x"], float)
    assert np.allclose(bars, snapshots[0].probs, atol=1e-6)

