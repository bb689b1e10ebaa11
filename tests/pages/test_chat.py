"""The chat page (issue 46): the text a chat model reads is its tokenizer's apply_chat_template,
its chips mark the special tokens, the answer is the model's own greedy continuation with the
softmax of its own logits under each token; a model without a template gets one line, a broken
template a warning, never an error box."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import CHAT, NORMAL, assert_clean, open_page  # noqa: E402
from tests.pages.modern_folders import choose  # noqa: E402
from tests.tinygpt.tokenizer.test_chat_template import LLAMA3  # noqa: E402
from tinygpt import load  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt.readouts.chat import read_chat  # noqa: E402

QUESTION = "What is the capital of France?"


@pytest.fixture
def chat_models(modern_models_dir, tmp_path, monkeypatch):
    """The modern folders, the Llama one carrying a chat template, another a broken one."""
    root = tmp_path / "models"
    shutil.copytree(modern_models_dir, root)
    for name, template in (("llama", LLAMA3), ("qwen2", "{% for m in messages %}{{ m.x.y.z }}")):
        config = root / name / "tokenizer_config.json"
        config.write_text(json.dumps({**json.loads(config.read_text()),
                                      "chat_template": template}))
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(root))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return root


def chat_page(name: str):
    at = open_page(CHAT, NORMAL)
    return choose(at, name) if name else at


def test_a_model_without_a_template_gets_one_line(chat_models):
    at = chat_page("")
    assert_clean(at)
    assert len(at.info) == 1 and "no chat template" in at.info[0].value
    assert not at.main.text_area and not at.code


def test_the_page_shows_what_the_model_reads_and_its_answer(chat_models):
    at = chat_page("llama")
    assert_clean(at)
    model, tok = load(chat_models / "llama", chat_models)
    messages = [{"role": "user", "content": QUESTION}]
    new = at.slider(key="chat.new").value
    read = read_chat(tok, messages, model.config.n_ctx - new)
    assert at.code[0].value == tok.apply_chat_template(messages, add_generation_prompt=True,
                                                       tokenize=False)
    assert read.text.startswith("<|begin_of_text|><|start_header_id|>user")
    chips = "".join(m.value for m in at.markdown if "<span" in m.value)
    assert chips.count("special · id") == sum(read.special) == read.n_special > 0
    result = generate(model, np.array(read.ids), max_new_tokens=new, eos_token_id=tok.eos_token_id)
    assert at.code[1].value == (tok.decode(result.tokens.tolist()) or " ")
    assert len(result.tokens) == new or result.stop_reason == "eos"
    shown = [float(p) for p in re.findall(r"p (\d\.\d{3})", chips)]
    assert shown == pytest.approx([step.prob for step in result.steps], abs=5e-4)


def test_a_conversation_with_system_and_earlier_turns(chat_models):
    at = chat_page("llama")
    at.text_area(key="chat.system").set_value("Be brief.")
    at.text_area(key="chat.user_before").set_value("Hi")
    at.text_area(key="chat.assistant_before").set_value("Hello!").run()
    assert_clean(at)
    _, tok = load(chat_models / "llama", chat_models)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": QUESTION}]
    assert at.code[0].value == tok.apply_chat_template(messages, add_generation_prompt=True,
                                                       tokenize=False)
    at.text_area(key="chat.user").set_value("").run()  # every box empty but the earlier ones
    assert_clean(at)


def test_a_broken_template_is_a_warning_not_an_error_box(chat_models):
    at = chat_page("qwen2")
    assert_clean(at)
    assert any("could not be rendered" in w.value for w in at.warning)


def test_a_large_model_writes_its_answer_when_asked(chat_models, monkeypatch):
    from tinygpt_app.sections import decoding_runs

    monkeypatch.setattr(decoding_runs, "LARGE_MODEL_PARAMETERS", 0)
    at = chat_page("llama")
    at.text_area(key="chat.user").set_value("A question no other test asks").run()
    assert_clean(at)
    assert len(at.code) == 1 and at.button(key="chat.write")
    at.button(key="chat.write").click().run()
    assert_clean(at)
    assert len(at.code) == 2


def test_a_chat_model_starts_from_a_fact_and_romeo_comes_back(chat_models, monkeypatch):
    from tinygpt_app.kit.state import DEFAULT_PROMPT, FACT_PROMPT

    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "llama")
    at = open_page("pages/1_Lesson.py")
    assert_clean(at)
    assert at.session_state["prompt"] == FACT_PROMPT
    choose(at, "tiny.npz")
    assert_clean(at)
    assert at.session_state["prompt"] == DEFAULT_PROMPT
    at.sidebar.text_area(key="sidebar.prompt").set_value("My own words").run()
    choose(at, "llama")
    assert at.session_state["prompt"] == "My own words"  # typed text is never replaced
