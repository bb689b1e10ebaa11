"""Page 7, decoding: three runs and why each stopped (also at <|endoftext|>), stepping through a
generation, and links that reproduce the view."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    chart_title,
    open_page,
    query_param,
)
from tinygpt.checkpoint.files import load, save  # noqa: E402
from tinygpt.network.model import GPT  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
DECODING = "pages/8_Decoding.py"


def test_decoding_shows_three_runs_and_why_they_stopped():
    at = open_page(DECODING, NORMAL, new="5", beams="2")
    assert_clean(at)
    assert len(at.code) == 3  # greedy, sampling, beam: each text can be copied
    reasons = [i.value for i in at.info] + [s.value for s in at.success]
    assert sum("Stopped" in r for r in reasons) == 3
    assert all("5 new tokens" in r for r in reasons if "Stopped" in r)
    assert "2 beams" in chart_title(at, "Beam search")


def test_stepping_through_a_generation():
    at = open_page(DECODING, NORMAL, new="6", strategy="greedy")
    assert "Step 0 (Greedy)" in chart_title(at, "Step 0")
    at.button(key="decoding.next").click().run()
    assert_clean(at)
    assert at.slider(key="decoding.step").value == 1 and query_param(at, "step") == "1"
    assert "Step 1" in chart_title(at, "Step 1")


def test_a_link_reproduces_the_decoding_view():
    params = dict(new="8", strategy="sample", step="3", seed="5", temperature="0.8")
    a, b = open_page(DECODING, NORMAL, **params), open_page(DECODING, NORMAL, **params)
    assert [c.value for c in a.code] == [c.value for c in b.code]
    assert at_step(a) == at_step(b) == 3


def at_step(at: AppTest) -> int:
    return at.slider(key="decoding.step").value


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
    stopped = [s.value.replace("\\", "") for s in at.success]  # as read: plain()'s escapes gone
    assert len(stopped) == 3 and all("<|endoftext|>" in s for s in stopped)
    assert all("after 1 tokens" in s for s in stopped)


def test_a_steps_distribution_is_the_models_own_at_that_position():
    """The step view's bars against a plain forward of the whole generated text (the page
    runs only the new tokens, with the prompt's keys and values)."""
    from tests.apptest_support import chart, decode
    from tinygpt import readouts as ti

    at = open_page(DECODING, NORMAL, new="6", strategy="greedy", step="3")
    assert_clean(at)
    model, tok = load(TINY)
    greedy = at.code[0].value
    ids = tok.encode(NORMAL)
    all_ids = np.asarray(ids + tok.encode(greedy))
    probs = ti.probabilities(model.forward(all_ids)[len(ids) - 1 + 3])  # chose new token 3
    bars = [trace for trace in chart(at, "Step 3")["data"] if trace.get("type") == "bar"]
    shown = np.concatenate([decode(trace["y"] if trace.get("orientation") != "h"
                                   else trace["x"]) for trace in bars])
    top = np.sort(probs)[::-1][:len(shown)]
    np.testing.assert_allclose(np.sort(shown)[::-1], top, rtol=1e-4, atol=1e-6)


def forbid_model_calls(monkeypatch) -> None:
    """From here on a generation would fail: the host's generate_runs is None."""
    from tinygpt_app import host as serving

    serving.load_wing()  # the page plugs the wing in on its first run; replace what it installs
    monkeypatch.setattr(serving, "_host", dataclasses.replace(serving.host(), generate_runs=None))


def test_fewer_new_tokens_are_read_off_the_longer_runs(monkeypatch):
    """Moving "New tokens" down reuses the runs made (no model call) and shows what a run of
    that length makes on its own: the page's texts equal tinygpt.generate's."""
    from tinygpt import generate
    from tinygpt_app.compute import caches

    none_made_yet = caches.SharedCache(caches.GENERATION_BYTES)
    monkeypatch.setattr(caches, "GENERATIONS", none_made_yet)
    at = open_page(DECODING, NORMAL, new="12", beams="2", seed="4")
    assert_clean(at)
    forbid_model_calls(monkeypatch)  # a model call would fail now
    at.slider(key="decoding.new").set_value(5).run()
    assert_clean(at)
    assert sum("no new model call" in c.value for c in at.caption) == 3
    model, tok = load(TINY)
    ids = tok.encode(NORMAL)
    common = dict(eos_token_id=tok.eos_token_id)
    want = [generate(model, ids, 5, strategy="greedy", **common),
            generate(model, ids, 5, strategy="sample", temperature=1.0, top_p=0.9, seed=4,
                     **common),
            generate(model, ids, 5, strategy="beam", num_beams=2, **common)]
    assert [c.value for c in at.code] == [tok.decode(w.tokens.tolist()) or " " for w in want]


# ---- a large model (tinygpt_app.sections.decoding_runs): runs written only when asked

WRITE = {"greedy": "decoding.write.greedy", "sample": "decoding.write.sample",
         "beam": "decoding.write.beam"}


@pytest.fixture
def large(monkeypatch):
    """The fixture model counted as large, with no run made yet by any session."""
    from tinygpt_app.compute import caches
    from tinygpt_app.sections import decoding_runs

    monkeypatch.setattr(decoding_runs, "LARGE_MODEL_PARAMETERS", 0)
    monkeypatch.setattr(caches, "GENERATIONS", caches.SharedCache(caches.GENERATION_BYTES))
    return caches


def alone(strategy: str, new: int, **settings):
    """What tinygpt.generate writes for this run of the fixture model, on its own."""
    from tinygpt import generate

    model, tok = load(TINY)
    return tok.decode(generate(model, tok.encode(NORMAL), new, strategy=strategy,
                               eos_token_id=tok.eos_token_id, **settings).tokens.tolist())


def test_the_shipped_model_writes_its_runs_as_the_page_opens():
    at = open_page(DECODING, NORMAL)
    assert len(at.code) == 3 and not any(b.key and b.key.startswith("decoding.write")
                                         for b in at.button)
    assert at.slider(key="decoding.new").value == 40  # decoding_runs.DEFAULT_NEW


def test_a_large_model_opens_on_the_first_step_and_writes_nothing(large, monkeypatch):
    """No run is made on opening (a generation would fail): the three buttons, the fewer new
    tokens said on the page, and the first step's bars, the model's own distribution."""
    from tests.apptest_support import chart, decode
    from tinygpt import readouts as ti
    from tinygpt_app.sections import decoding_runs

    forbid_model_calls(monkeypatch)
    at = open_page(DECODING, NORMAL)
    assert_clean(at)
    assert not at.code and all(at.button(key=key) for key in WRITE.values())
    new = decoding_runs.DEFAULT_NEW_LARGE
    assert at.slider(key="decoding.new").value == new < decoding_runs.DEFAULT_NEW
    assert any(f"start at {new} new tokens" in c.value for c in at.caption)
    model, tok = load(TINY)
    probs = ti.probabilities(model.forward(np.asarray(tok.encode(NORMAL)))[-1])
    bars = [t for t in chart(at, "Step 0")["data"] if t.get("type") == "bar"]
    shown = np.concatenate([decode(t["y"] if t.get("orientation") != "h" else t["x"])
                            for t in bars])
    top = np.sort(probs)[::-1][:len(shown)]
    np.testing.assert_allclose(np.sort(shown)[::-1], top, rtol=1e-4, atol=1e-6)


def test_a_run_asked_for_is_written_alone_and_equals_generate(large):
    at = open_page(DECODING, NORMAL, new="7", seed="3")
    at.button(key=WRITE["greedy"]).click().run()
    assert_clean(at)
    assert [c.value for c in at.code] == [alone("greedy", 7) or " "]  # the other two wait
    assert at.button(key=WRITE["sample"]) and at.button(key=WRITE["beam"])
    assert "Step 0 (Greedy)" in chart_title(at, "Step 0")  # steps through the run written
    at.button(key=WRITE["sample"]).click().run()
    assert_clean(at)
    assert [c.value for c in at.code] == [alone("greedy", 7) or " ",
                                          alone("sample", 7, temperature=1.0, top_p=0.9,
                                                seed=3) or " "]
    at.number_input(key="decoding.seed").set_value(4).run()  # asked runs follow the settings
    assert at.code[1].value == (alone("sample", 7, temperature=1.0, top_p=0.9, seed=4) or " ")


def test_runs_the_class_made_are_shown_at_once_and_a_new_prompt_asks_again(large,
                                                                           monkeypatch):
    first = open_page(DECODING, NORMAL, new="5", beams="2")
    first.button(key="decoding.write.all").click().run()
    assert_clean(first)
    assert len(first.code) == 3
    forbid_model_calls(monkeypatch)  # no model call from here on
    other = open_page(DECODING, NORMAL, new="5", beams="2")  # another student's session
    assert_clean(other)
    assert [c.value for c in other.code] == [c.value for c in first.code]
    assert "2 beams" in chart_title(other, "Beam search")
    first.sidebar.text_area[0].input("To be, or not").run()
    assert_clean(first)
    assert not first.code and first.button(key=WRITE["greedy"])


def test_step_0_of_a_run_just_written_needs_no_model_pass(large, monkeypatch):
    """Step 0's scores are the prompt read's last row, which the run started from: showing a
    run just written runs none of its tokens again. Step 1 runs them. Both steps' bars are the
    model's own next-token probabilities (model.forward on the text so far)."""
    from tests.apptest_support import chart, decode
    from tinygpt import readouts as ti

    real = large.continuation
    monkeypatch.setattr(large, "continuation", None)  # a call would fail the page
    at = open_page(DECODING, NORMAL, new="6")
    at.button(key=WRITE["greedy"]).click().run()
    assert_clean(at)
    model, tok = load(TINY)
    ids = tok.encode(NORMAL)

    def bars(title: str) -> np.ndarray:
        shown = [t for t in chart(at, title)["data"] if t.get("type") == "bar"]
        return np.sort(np.concatenate([decode(t["y"] if t.get("orientation") != "h"
                                              else t["x"]) for t in shown]))[::-1]

    def model_top(text_ids: list[int], n: int) -> np.ndarray:
        probs = ti.probabilities(model.forward(np.asarray(text_ids))[-1])
        return np.sort(probs)[::-1][:n]

    step0 = bars("Step 0 (Greedy)")
    np.testing.assert_allclose(step0, model_top(ids, len(step0)), rtol=1e-4, atol=1e-6)
    monkeypatch.setattr(large, "continuation", real)
    at.button(key="decoding.next").click().run()
    assert_clean(at)
    step1 = bars("Step 1")
    first = int(model.forward(np.asarray(ids)).argmax(-1)[-1])  # greedy's first token
    np.testing.assert_allclose(step1, model_top([*ids, first], len(step1)), rtol=1e-4,
                               atol=1e-6)
