"""Hostile input to the app: whatever a student pastes or clicks, and whatever lands in the
models folder.

Property-based (hypothesis) with modest example counts, so the suite stays quick: pages survive
random prompts and random control values in their links. And plain checks: pasted text is
capped, model files are read only inside the models folder, and the pages run with sockets
blocked. The same for the core: tests/tinygpt/tokenizer/test_bpe_hostile.py,
tests/tinygpt/decoding/test_generation_hostile.py, tests/tinygpt/checkpoint/test_files_hostile.py
and tests/test_no_pickle.py.
"""

from __future__ import annotations

import re
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apptest_support import NORMAL, PAGES, TINY, assert_clean, open_page
from tests.core_support import ANY_TEXT

# ----------------------------------------------------------------------------- the app

pytest.importorskip("streamlit", reason="the app tests need streamlit")
from tinygpt_app.compute.models import resolve_model_path  # noqa: E402
from tinygpt_app.kit.controls import SPECS  # noqa: E402
from tinygpt_app.kit.state import MAX_PROMPT_CHARS  # noqa: E402

# what a link may carry: numbers in and out of range, words, nothing, very long text
URL_VALUE = st.one_of(
    st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True).map(str),
    st.sampled_from(["", "nan", "inf", "-1", "0", "1e309", "greedy", "beam", "true", "ü"]),
    st.text(max_size=30),
)
CONTROLS = ["pos", "model", *sorted({spec.name for spec in SPECS.values()})]  # every declared


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(page=st.sampled_from([p for p in PAGES if "Training" not in p]),
       prompt=ANY_TEXT | st.sampled_from(["", "🎭" * 300, "To be " * 200]),
       controls=st.dictionaries(st.sampled_from(CONTROLS), URL_VALUE, max_size=5))
def test_pages_survive_random_prompts_and_control_values(tiny_models, page, prompt, controls):
    at = open_page(page, prompt=prompt, **controls)
    assert_clean(at)
    assert at.sidebar.text_area[0].value == prompt


@pytest.mark.parametrize("page", [p for p in PAGES if "Training" not in p])
@pytest.mark.parametrize("value", ["999999", "-1", "x,y,z", "1,2,3,4,5,6,7,8,9", "9.9,1.1"])
def test_every_declared_control_refuses_a_bad_link_value_with_a_note(tiny_models, page, value):
    """Every control of kit.controls at once, each with a value out of its range or kind: the
    page runs, each control at a value it takes, and says why in a note."""
    at = open_page(page, prompt=NORMAL, **{spec.name: value for spec in SPECS.values()})
    assert_clean(at)


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(prompt=ANY_TEXT, temperature=st.floats(0.0, 3.0), top_p=st.floats(0.01, 1.0),
       top_k=st.integers(0, 512))
def test_sampling_page_survives_random_control_moves(tiny_models, prompt, temperature, top_p,
                                                      top_k):
    at = open_page("pages/7_Softmax_and_sampling.py", prompt=prompt or "x")
    at.slider(key="sampling.temperature").set_value(round(temperature / 0.05) * 0.05).run()
    at.number_input(key="sampling.top_k").set_value(top_k).run()
    at.slider(key="sampling.top_p").set_value(round(top_p, 2) or 0.01).run()
    assert_clean(at)


def test_pasted_text_is_capped_with_a_note(tiny_models):
    at = open_page("pages/2_Tokens_and_embeddings.py", prompt="short")
    at.sidebar.text_area[0].set_value("All the world's a stage. " * 4000).run()  # 100k chars
    assert_clean(at)
    assert len(at.session_state["prompt"]) == MAX_PROMPT_CHARS
    assert any("cut to its first" in w.value for w in at.warning)


def test_a_long_link_prompt_is_capped_too(tiny_models):
    at = open_page("app.py", prompt="x" * (MAX_PROMPT_CHARS * 3))
    assert_clean(at)
    assert len(at.session_state["prompt"]) == MAX_PROMPT_CHARS


# ----------------------------------------------------------------------------- models folder


def test_a_symlinked_folder_out_of_the_models_folder_is_refused(tmp_path, monkeypatch):
    """(A symlinked *file* is refused in test_models.py; a folder is the GPT-2 case.)"""
    outside = tmp_path / "elsewhere" / "gpt2"
    outside.mkdir(parents=True)
    (outside / "config.json").write_text("{}")
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, inside / "tiny.npz")
    (inside / "gpt2").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    with pytest.raises(ValueError):
        resolve_model_path("gpt2")


def test_a_model_named_in_the_link_must_be_listed(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, inside / "tiny.npz")
    shutil.copy(TINY, tmp_path / "secret.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    for sneaky in ("../secret.npz", str(tmp_path / "secret.npz"), "tiny.npz/../../secret.npz",
                   "tiny.npz\x00", "%2e%2e/secret.npz", "session:../secret.npz"):
        at = open_page("app.py", prompt="Hello", model=sneaky)
        assert_clean(at)
        assert at.sidebar.selectbox[0].value == "tiny.npz"


# ----------------------------------------------------------------------------- no network

@pytest.mark.parametrize("page", PAGES)
def test_pages_run_offline(no_network, tiny_models, page):
    at = open_page(page, prompt=NORMAL)
    assert_clean(at)


# ----------------------------------------------------------------------------- link parameters

# every control a link can set, per page, and what a valid value in the URL looks like
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?")
PAGE_CONTROLS = {
    "pages/7_Softmax_and_sampling.py": ["temperature", "top_k", "top_p", "seed"],
    "pages/8_Decoding.py": ["new", "temperature", "top_k", "top_p", "seed", "beams",
                                     "strategy",
                            "step"],
}
ANY_LINK_VALUE = st.text(max_size=40) | URL_VALUE | st.sampled_from(
    ["inf", "-inf", "1e309", "NaN", "٣", "1_0", "9" * 400, "[x](https://evil.example)"])


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(page=st.sampled_from(sorted(PAGE_CONTROLS)), data=st.data())
def test_any_string_for_any_control_gives_a_valid_value_in_the_link(tiny_models, page, data):
    names = PAGE_CONTROLS[page]
    values = data.draw(st.dictionaries(st.sampled_from([*names, "pos"]), ANY_LINK_VALUE,
                                       min_size=1))
    at = open_page(page, prompt="Hello there", **values)
    assert_clean(at)
    for name in [*names, "pos"]:
        if name not in at.query_params:  # e.g. the step of a run that made no tokens
            continue
        value = at.query_params[name]
        value = value[0] if isinstance(value, list) else value
        if name == "strategy":
            assert value in {"greedy", "sample"}, value
        else:
            assert NUMBER.fullmatch(value), (name, value)
