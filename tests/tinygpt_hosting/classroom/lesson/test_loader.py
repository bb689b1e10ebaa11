"""Lesson files: the valid examples load, every invalid one names its step, line and problem, the
caps are checked before parsing, and each shipped lesson's true_next is what its text says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinygpt.train.corpus import load_corpus
from tinygpt_hosting.classroom.lesson import loader as lf

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "tests" / "fixtures" / "lessons"
SHIPPED = sorted((ROOT / "lessons").glob("*.toml"))


def error(name: str) -> lf.LessonError:
    with pytest.raises(lf.LessonError) as caught:
        lf.load_lesson(EXAMPLES / name)
    return caught.value


def test_the_minimal_lesson_loads_with_its_defaults():
    lesson = lf.load_lesson(EXAMPLES / "valid_minimal.toml")
    assert lesson.title == "The smallest lesson"
    (step,) = lesson.steps
    assert (step.number, step.line, step.page) == (1, 3, "Softmax_and_sampling")
    assert step.prompt.endswith("Juliet is the") and "\n" in step.prompt
    assert (step.models, step.position, step.controls, step.question) == ((), None, {}, None)


def test_an_unknown_key_names_its_step_and_line():
    err = error("bad_unknown_key.toml")
    assert (err.step, err.line) == (2, 10)
    assert "'temprature'" in str(err) and str(err).startswith("Step 2, line 10:")


def test_a_control_out_of_range_names_its_line_past_a_header_inside_a_string():
    err = error("bad_range.toml")  # the notes hold a "[[step]]" line: not a step
    assert (err.step, err.line) == (2, 12)
    assert "top_p is a number from 0.01 to 1" in str(err)


def test_the_true_token_is_among_the_choices():
    err = error("bad_true_next.toml")
    assert (err.step, err.line) == (1, 6) and "not among the choices" in str(err)


def test_a_page_that_does_not_exist_is_named_with_the_pages_that_do():
    err = error("bad_page.toml")
    assert (err.step, err.line) == (1, 2) and "Softmax_and_sampling" in str(err)


def test_a_syntax_error_gives_tomllibs_line():
    err = error("bad_syntax.toml")
    assert (err.step, err.line) == (1, 3) and "not valid TOML: Illegal character" in str(err)


def test_a_missing_prompt_names_the_steps_header():
    err = error("bad_missing_prompt.toml")
    assert (err.step, err.line) == (1, 3) and "prompt" in str(err)


def test_the_size_is_capped_before_the_file_is_read(tmp_path):
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * lf.MAX_LESSON_BYTES)
    with pytest.raises(lf.LessonError, match="bytes; a lesson is at most"):
        lf.load_lesson(big)
    with pytest.raises(lf.LessonError, match="bytes; a lesson is at most"):
        lf.read_lesson(b"x" * (lf.MAX_LESSON_BYTES + 1))


def test_the_number_of_steps_is_capped_before_parsing():
    step = '[[step]]\npage = "Logits"\nprompt = "a"\n'
    text = step * (lf.MAX_STEPS + 1) + "this line is not TOML at all ="  # never parsed
    with pytest.raises(lf.LessonError, match=f"at most {lf.MAX_STEPS}") as caught:
        lf.read_lesson(text.encode())
    assert caught.value.line == 3 * lf.MAX_STEPS + 1


@pytest.mark.parametrize("text, message", [
    (b"\xff\xfe", "not UTF-8"),
    (b'title = "x"', "at least one step"),
    (b'step = [{page = "Logits", prompt = "a"}]', "its own [[step]]"),
    (b'color = 1\n[[step]]\npage = "Logits"\nprompt = "a"', "Unknown key 'color'"),
    (b'[[step]]\npage = "Logits"\nprompt = ""', "prompt is empty"),
    (b'[[step]]\npage = "Logits"\nprompt = "a"\ntrue_next = " b"', "belong to a question"),
    (b'[[step]]\npage = "Logits"\nprompt = "a"\nquestion = "?"\nchoices = ["x", "x"]',
     "repeat"),
    (b'[[step]]\npage = "Logits"\nprompt = "a"\nposition = -1', "position"),
    (b'[[step]]\npage = "Logits"\nprompt = "a"\nmodel = "../x.npz"', "file name"),
    (b'[[step]]\npage = "Logits"\nprompt = "a"\ntop_k = 2.5', "top_k is a whole number"),
    (b'[[step]]\npage = "Logits"\nprompt = "a"\ntemperature = "hot"', "temperature is"),
    (b'[[step]]\npage = "Decoding"\nprompt = "a"\nstrategy = "beam"', "strategy is one of"),
])
def test_what_is_wrong_is_said(text, message):
    with pytest.raises(lf.LessonError, match=message.replace("[", r"\[").replace("]", r"\]")):
        lf.read_lesson(text)


def test_controls_take_the_pages_declarations():
    lesson = lf.read_lesson(b'[[step]]\npage = "Decoding"\nprompt = "a"\ntemperature = 2\n'
                            b'top_k = 5\nstrategy = "greedy"\nmodel = ["a.gguf", "b.npz"]\n')
    step = lesson.steps[0]
    assert step.controls == {"temperature": 2.0, "top_k": 5, "strategy": "greedy"}
    assert isinstance(step.controls["temperature"], float)
    assert step.models == ("a.gguf", "b.npz")


def test_the_other_pages_controls_are_checked_too():
    lesson = lf.read_lesson(b'[[step]]\npage = "What_if"\nprompt = "a"\nno_causal_mask = true\n'
                            b'logits_k = 20\nnorm_view = "lines: chosen tokens"\n')
    assert lesson.steps[0].controls == {"no_causal_mask": True, "logits_k": 20,
                                        "norm_view": "lines: chosen tokens"}
    for bad in (b"no_causal_mask = 1", b"logits_k = 51", b"logits_k = true",
                b'norm_view = "pie"', b"mean = \"yes\"", b"heads = [\"0.1\"]"):
        with pytest.raises(lf.LessonError):
            lf.read_lesson(b'[[step]]\npage = "What_if"\nprompt = "a"\n' + bad + b"\n")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_each_shipped_lesson_is_valid_and_long_enough(path):
    lesson = lf.load_lesson(path)
    assert lesson.title and len(lesson.steps) >= 5
    assert all(step.page and step.prompt for step in lesson.steps)
    assert any(step.question and step.true_next for step in lesson.steps)


def test_every_shipped_true_next_is_what_the_corpus_says():
    corpus = load_corpus("train") + load_corpus("val")
    rounds = [(path.name, step) for path in SHIPPED
              for step in lf.load_lesson(path).steps if step.true_next]
    assert len(SHIPPED) == 3 and len(rounds) >= 3
    for name, step in rounds:
        assert step.prompt + step.true_next in corpus, (name, step.number)
