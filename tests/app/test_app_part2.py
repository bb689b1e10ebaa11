"""Pages 6 (softmax and sampling), 7 (decoding) and 9 (training) under streamlit.testing.

Every page with normal, empty, emoji + CJK and over-long prompts; each control moves the shown
numbers the right way (a lower temperature lowers the entropy, a smaller top-p keeps fewer
tokens, the same seed draws the same token); links reproduce the controls; decoding shows why
it stopped, including at <|endoftext|>; a short training lowers the loss and the trained model
is then selectable on another page.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    PROMPTS,
    TINY,
    assert_clean,
    assert_drawn_for,
    chart,
    charts,
    open_page,
    query_param,
    title_of,
)
from tinygpt.checkpoint import load, save  # noqa: E402
from tinygpt.model import GPT  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
SAMPLING, DECODING, TRAINING = ("pages/6_Softmax_and_sampling.py", "pages/7_Decoding.py",
                                "pages/9_Training.py")


def title(at: AppTest, part: str) -> str:
    return title_of(chart(at, part))


def metric(at: AppTest, label_start: str) -> float:
    for m in at.metric:
        if m.label.startswith(label_start):
            return float(re.match(r"[-\d.,]+", m.value).group().replace(",", ""))
    raise AssertionError(f"no metric {label_start!r}")


# ----------------------------------------------------------------------------- every page


@pytest.mark.parametrize("page", [SAMPLING, DECODING])
@pytest.mark.parametrize("kind", list(PROMPTS))
def test_page_runs_with_every_kind_of_prompt(page, kind):
    at = open_page(page, PROMPTS[kind])
    assert_drawn_for(at, kind)


def test_training_page_opens_with_its_form():
    at = open_page(TRAINING, NORMAL)
    assert_clean(at)
    assert at.button(key="p9_start") and not charts(at)


# ----------------------------------------------------------------------------- softmax & sampling


def test_lower_temperature_lowers_the_entropy():
    at = open_page(SAMPLING, NORMAL)
    at.slider(key="_w_temperature").set_value(1.5).run()
    hot = metric(at, "Entropy at T")
    at.slider(key="_w_temperature").set_value(0.5).run()
    assert_clean(at)
    cold = metric(at, "Entropy at T")
    assert cold < hot
    assert metric(at, "Entropy of the model") == pytest.approx(metric(at, "Entropy of the model"))
    assert query_param(at, "temperature") == "0.5"


def test_smaller_top_p_keeps_fewer_tokens():
    at = open_page(SAMPLING, NORMAL, top_p="0.9")
    wide = metric(at, "Tokens kept")
    at.slider(key="_w_top_p").set_value(0.3).run()
    assert_clean(at)
    narrow = metric(at, "Tokens kept")
    assert narrow < wide
    assert "0.3" in title(at, "Cumulative") or narrow > 0
    at.number_input(key="_w_top_k").set_value(5).run()
    kept = metric(at, "Tokens kept")
    assert kept <= 5
    assert f"Renormalised: {int(kept)} kept token(s)" in title(at, "Renormalised")


def test_the_renormalised_chart_says_when_it_shows_only_the_top_kept_tokens():
    at = open_page(SAMPLING, NORMAL, top_p="1", top_k="0")  # nothing cut: every token kept
    kept = int(metric(at, "Tokens kept"))
    shown = len(chart(at, "Renormalised")["data"][0]["x"])
    assert shown < kept
    assert f"the top {shown} of {kept:,} kept tokens" in title(at, "Renormalised")


def test_the_same_seed_draws_the_same_token():
    first = title(open_page(SAMPLING, NORMAL, seed="7"), "The draw")
    again = title(open_page(SAMPLING, NORMAL, seed="7"), "The draw")
    assert first == again  # same u, same token
    other = title(open_page(SAMPLING, NORMAL, seed="8"), "The draw")
    assert other != first  # another u


def test_draw_again_moves_the_seed():
    at = open_page(SAMPLING, NORMAL, seed="3")
    at.button(key="p6_redraw").click().run()
    assert_clean(at)
    assert at.number_input(key="_w_seed").value == 4 and query_param(at, "seed") == "4"


def test_temperature_zero_is_greedy_and_explained():
    at = open_page(SAMPLING, NORMAL, temperature="0")
    assert_clean(at)
    assert any("greedy" in i.value for i in at.info)
    assert metric(at, "Tokens kept") == 1


def test_an_impossible_value_in_the_link_is_refused_with_a_message():
    at = open_page(SAMPLING, NORMAL, temperature="-1", top_p="abc")
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "temperature = -1" in warnings and "top_p = abc" in warnings
    assert at.slider(key="_w_temperature").value == 1.0


def test_controls_come_from_the_link_and_go_back_into_it():
    at = open_page(SAMPLING, NORMAL, temperature="0.7", top_k="40", top_p="0.5", seed="11", pos="2")
    assert_clean(at)
    assert at.slider(key="_w_temperature").value == pytest.approx(0.7)
    assert at.number_input(key="_w_top_k").value == 40
    assert at.slider(key="_w_top_p").value == pytest.approx(0.5)
    assert "seed 11" in title(at, "The draw")
    assert "(position 2)" in title(at, "Next-token probabilities")


# ----------------------------------------------------------------------------- decoding


def test_decoding_shows_three_runs_and_why_they_stopped():
    at = open_page(DECODING, NORMAL, new="5", beams="2")
    assert_clean(at)
    assert len(at.code) == 3  # greedy, sampling, beam: each text can be copied
    reasons = [i.value for i in at.info] + [s.value for s in at.success]
    assert sum("Stopped" in r for r in reasons) == 3
    assert all("5 new tokens" in r for r in reasons if "Stopped" in r)
    assert "2 beams" in title(at, "Beam search")


def test_stepping_through_a_generation():
    at = open_page(DECODING, NORMAL, new="6", strategy="greedy")
    assert "Step 0 (Greedy)" in title(at, "Step 0")
    at.button(key="p7_next").click().run()
    assert_clean(at)
    assert at.slider(key="_w_step").value == 1 and query_param(at, "step") == "1"
    assert "Step 1" in title(at, "Step 1")


def test_a_link_reproduces_the_decoding_view():
    params = dict(new="8", strategy="sample", step="3", seed="5", temperature="0.8")
    a, b = open_page(DECODING, NORMAL, **params), open_page(DECODING, NORMAL, **params)
    assert [c.value for c in a.code] == [c.value for c in b.code]
    assert at_step(a) == at_step(b) == 3


def at_step(at: AppTest) -> int:
    return at.slider(key="_w_step").value


@pytest.fixture
def eos_model_dir(tmp_path):
    """A copy of the fixture whose output bias makes <|endoftext|> the top token everywhere."""
    model, tok = load(TINY)
    config = model.config.__class__(**{**model.config.__dict__, "output_bias": True,
                                       "tie_weights": False})
    eos_model = GPT(config, seed=0)
    bias = np.zeros(config.vocab_size, dtype=np.float32)
    bias[tok.eos_token_id] = 50.0
    eos_model.output.b_out[...] = bias
    save(eos_model, tok, tmp_path / "eos.npz")
    shutil.copy(TINY, tmp_path / "tiny.npz")
    return tmp_path


def test_generation_stops_at_endoftext(eos_model_dir, monkeypatch):
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(eos_model_dir))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "eos.npz")
    at = open_page(DECODING, NORMAL, new="20")
    assert_clean(at)
    stopped = [s.value for s in at.success]
    assert len(stopped) == 3 and all("<|endoftext|>" in s for s in stopped)
    assert all("after 1 tokens" in s for s in stopped)


# ----------------------------------------------------------------------------- training


def test_training_lowers_the_loss_and_offers_the_model_everywhere():
    at = open_page("app.py")
    at.switch_page(TRAINING).run()
    at.slider(key="p9_layers").set_value(1)
    at.select_slider(key="p9_heads").set_value(1)
    at.select_slider(key="p9_embd").set_value(16)
    at.select_slider(key="p9_block").set_value(16)
    at.slider(key="p9_batch").set_value(4)
    at.number_input(key="p9_steps").set_value(30)
    at.button(key="p9_start").click().run()
    assert_clean(at)
    job = at.session_state["_training_job"]
    assert job.wait(120), "the training did not finish"
    at.run()
    assert_clean(at)
    assert metric(at, "Latest loss") < metric(at, "First loss")
    loss = charts(at)[0]["data"][0]["y"]
    assert np.mean(np.asarray(loss[-5:], float) if isinstance(loss, list) else [0]) < 6.3
    options = at.sidebar.selectbox[0].options
    assert any("(trained here)" in o for o in options)
    at.button(key="p9_use").click().run()
    assert at.sidebar.selectbox[0].value.startswith("session:my-model")
    at.switch_page(SAMPLING).run()
    assert_clean(at)
    assert at.sidebar.selectbox[0].value.startswith("session:my-model")
    assert charts(at)


def test_pasted_text_that_is_too_short_is_refused():
    at = open_page(TRAINING, NORMAL)
    at.radio(key="p9_source").set_value("Text I paste below")
    at.text_area(key="p9_text").input("too short")
    at.button(key="p9_start").click().run()
    assert not at.exception
    assert any("at least" in e.value for e in at.error)
    assert "_training_job" not in at.session_state
