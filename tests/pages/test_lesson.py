"""The guided lesson (issue 17): every step draws for the shipped-style model and a GPT-2
folder, the step travels in the link (?lesson_step=5) and follows Back / Next, a bad step in a link
gives a plain warning and step 1, and the numbers in the text are the model's own, checked
against a separate forward pass and a softmax written here."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from bench.common import write_gpt2_folder  # noqa: E402
from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    charts,
    open_page,
    query_param,
    title_of,
)
from tinygpt import load  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt_app.sections import lesson  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
LESSON = "pages/1_Lesson.py"
STEPS = len(lesson.STEPS)
GPT2_SHAPE = {"n_layer": 2, "n_head": 2, "n_embd": 32, "vocab_size": 600, "n_positions": 128}


def heading(at) -> str:
    return at.header[0].value


def text(at) -> str:
    """The step's paragraphs as a reader sees them (markdown escapes and bold removed)."""
    shown = "\n".join(m.value for m in at.markdown).replace("**", "")
    return re.sub(r"\\(.)", r"\1", shown)  # plain()'s escapes: "\\." -> "."


def softmax(row: np.ndarray) -> np.ndarray:
    z = np.asarray(row, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def test_there_are_about_ten_steps_each_linking_to_a_page_of_the_app():
    from tinygpt_app.kit.navigation import PAGE_FILES

    assert 8 <= STEPS <= 12
    assert all(step.page in PAGE_FILES for step in lesson.STEPS)


@pytest.mark.parametrize("number", range(1, STEPS + 1))
def test_every_step_draws_for_the_default_prompt(number):
    at = open_page(LESSON, prompt=None, lesson_step=str(number))
    assert_clean(at)
    assert not at.warning
    assert heading(at) == f"Step {number} of {STEPS}: {lesson.STEPS[number - 1].title}"
    assert at.selectbox(key="lesson.lesson_step").value == number
    assert len(charts(at)) == 1  # the one chart that matters
    assert "The full page" in text(at)


def test_next_and_back_move_the_step_and_the_link():
    at = open_page(LESSON, NORMAL)
    assert heading(at).startswith(f"Step 1 of {STEPS}")
    assert at.button(key="lesson.back").disabled
    at.button(key="lesson.next").click().run()
    assert_clean(at)
    assert heading(at).startswith(f"Step 2 of {STEPS}")
    assert query_param(at, "lesson_step") == "2"
    at.button(key="lesson.next").click().run()
    at.button(key="lesson.next").click().run()
    assert query_param(at, "lesson_step") == "4" and heading(at).startswith("Step 4")
    at.button(key="lesson.back").click().run()
    assert_clean(at)
    assert query_param(at, "lesson_step") == "3" and heading(at).startswith("Step 3")
    at.selectbox(key="lesson.lesson_step").set_value(STEPS).run()
    assert query_param(at, "lesson_step") == str(STEPS)
    assert at.button(key="lesson.next").disabled


def test_a_deep_link_opens_its_step_and_keeps_it_in_the_link():
    at = open_page(LESSON, NORMAL, lesson_step="5")
    assert_clean(at)
    assert heading(at).startswith(f"Step 5 of {STEPS}")
    assert query_param(at, "lesson_step") == "5"
    at.sidebar.select_slider[0].set_value(1).run()  # another position: the same step
    assert heading(at).startswith("Step 5") and query_param(at, "lesson_step") == "5"


@pytest.mark.parametrize("bad", ["0", str(STEPS + 1), "-3", "2.5", "inf", "NaN", "five", "١٢",
                                 "[x](https://evil.example)"])
def test_a_bad_step_in_the_link_gives_a_plain_warning_and_step_1(bad):
    at = open_page(LESSON, NORMAL, lesson_step=bad)
    assert_clean(at)
    assert heading(at).startswith(f"Step 1 of {STEPS}")
    assert query_param(at, "lesson_step") == "1"
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("step" in w and "starts at 1" in w for w in warnings), warnings
    assert not any("evil" in w for w in warnings)  # the link's value is never repeated


def tiny_model():
    return load(TINY)


def test_the_token_count_is_the_tokenizers():
    model, tok = tiny_model()
    at = open_page(LESSON, NORMAL, lesson_step="1")
    n = len(tok.encode(NORMAL))
    assert f"into {n} tokens" in text(at)
    assert f"vocab_size = {model.config.vocab_size:,}" in text(at)


def test_the_top_guess_is_the_softmax_of_the_models_own_logits():
    model, tok = tiny_model()
    ids = np.array(tok.encode(NORMAL))
    p = softmax(model.forward(ids)[-1])  # a separate forward, the last position
    first, second = np.argsort(-p, kind="stable")[:2]
    at = open_page(LESSON, NORMAL, lesson_step="8")
    shown = re.search(r"the top guess is (.+?) at ([\d.]+) %, then (.+?) at ([\d.]+) %",
                      text(at))
    assert shown, text(at)
    assert shown.group(1) == tok.token_display(int(first))
    assert float(shown.group(2)) == pytest.approx(100 * p[first], abs=0.05)
    assert shown.group(3) == tok.token_display(int(second))
    assert float(shown.group(4)) == pytest.approx(100 * p[second], abs=0.05)
    bits = float(re.search(r"entropy is ([\d.]+) bits", text(at)).group(1))
    assert bits == pytest.approx(-(p * np.log2(np.where(p > 0, p, 1))).sum(), abs=0.005)


def test_the_strongest_look_is_the_largest_attention_weight_to_an_earlier_token():
    model, tok = tiny_model()
    ids = np.array(tok.encode(NORMAL))
    _, trace = model.run_with_trace(ids)
    t, L = len(ids) - 1, model.config.n_layer
    rows = np.stack([trace[f"blocks.{i}.attn.weights"][:, t, :t] for i in range(L)])  # (L,H,t)
    layer, head, key = np.unravel_index(np.argmax(rows), rows.shape)
    at = open_page(LESSON, NORMAL, lesson_step="4")
    assert (f"({key}), weight {rows[layer, head, key]:.2f}, in block {layer}, head {head}"
            .replace("(", "(position ") in text(at)), text(at)
    assert f"Block {layer}, head {head}" in title_of(charts(at)[0])
    # the chart's sentence names the head first, then says where it looks (issue 49: it read
    # "The strongest Block 3, head 3 from ...")
    said = " ".join(c.value for c in at.caption).replace("\\", "")
    assert f"Block {layer}, head {head}: The strongest attention from" in said, said
    # the link to the full page opens that very head, at the same position
    assert f"Attention?pos={t}&layer={layer}&head={head}" in text(at)


def test_the_cutoff_keeps_the_top_p_nucleus():
    model, tok = tiny_model()
    p = softmax(model.forward(np.array(tok.encode(NORMAL)))[-1])
    cumulative = np.cumsum(np.sort(p)[::-1])
    kept = int(np.searchsorted(cumulative, lesson.TOP_P) + 1)  # the smallest set with >= p
    at = open_page(LESSON, NORMAL, lesson_step="9")
    assert f"keeps {kept:,} of {model.config.vocab_size:,} tokens" in text(at)
    assert f"holding {cumulative[kept - 1]:.4f}" in text(at)


def test_the_chosen_token_is_the_argmax_and_the_seeded_draw():
    model, tok = tiny_model()
    p = softmax(model.forward(np.array(tok.encode(NORMAL)))[-1])
    at = open_page(LESSON, NORMAL, lesson_step="10")
    greedy = tok.token_display(int(np.argmax(p)))
    assert f"takes the most likely: {greedy} ({100 * p.max():.1f} %)" in text(at)
    u = np.random.default_rng(lesson.SEED).random()
    assert f"draws u = {u:.4f}" in text(at)


def test_the_softmax_step_compares_with_one_position_back_and_goes_there():
    model, tok = tiny_model()
    ids = np.array(tok.encode(NORMAL))
    logits = model.forward(ids)  # a separate forward: rows t and t - 1
    t = len(ids) - 1
    here, back = softmax(logits[t]), softmax(logits[t - 1])
    at = open_page(LESSON, NORMAL, lesson_step="8")
    assert (f"the best guess was {tok.token_display(int(np.argmax(back)))} with only "
            f"{100 * back.max():.1f} %; here the best guess holds {100 * here.max():.1f} %"
            in text(at)), text(at)
    at.button(key="lesson.one_back").click().run()
    assert_clean(at)
    assert at.session_state["pos"] == t - 1 and query_param(at, "pos") == str(t - 1)


def test_the_last_step_writes_greedily_then_appends_the_token_and_goes_again():
    """The greedy run is generate()'s, and "append it and go again" puts the top token at the
    end of the prompt: the lesson then predicts from the longer prompt."""
    model, tok = tiny_model()
    ids = tok.encode(NORMAL)
    run = generate(model, np.array(ids), lesson.GREEDY_NEW, "greedy",
                   eos_token_id=tok.eos_token_id, record_steps=False)
    at = open_page(LESSON, NORMAL, lesson_step="10")
    assert f"greedy decoding writes {len(run.tokens)} tokens" in text(at), text(at)
    assert at.code[0].value == tok.decode(list(run.tokens))
    top = int(np.argmax(model.forward(np.array(ids))[-1]))
    at.button(key="lesson.go_again").click().run()
    assert_clean(at)
    longer = NORMAL + tok.decode([top])
    assert at.session_state["prompt"] == longer and query_param(at, "prompt") == longer
    assert at.session_state["pos"] == len(tok.encode(longer)) - 1  # the new last token
    assert query_param(at, "lesson_step") == "10"


def test_the_lesson_runs_on_a_gpt2_folder_with_its_own_sizes(tmp_path, monkeypatch):
    shutil.copy(TINY, tmp_path / "tiny.npz")
    folder = write_gpt2_folder(tmp_path / "gpt2", seed=3, **GPT2_SHAPE)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    model, tok = load(folder)
    n = len(tok.encode(NORMAL))
    for number in range(1, STEPS + 1):
        at = open_page(LESSON, NORMAL, lesson_step=str(number), model="gpt2")
        assert_clean(at)
        assert at.sidebar.selectbox[0].value == "gpt2"
        if number == 1:
            assert f"into {n} tokens" in text(at) and "vocab_size = 600" in text(at)
        if number == 2:
            assert f"{n} × 32 = {n * 32:,} numbers" in text(at)
        if number == 7:
            assert "600 logits" in text(at)


# ----------------------------------------------------------------------------- every family

SHIPPED_LLAMA = "shakespeare_llama.npz"  # models/, the Llama-style model the app ships


def open_on(family: str, number: int, monkeypatch, modern_models_dir):
    """The lesson's step `number` on a GPT-2-style model (tiny.npz), the shipped Llama-style
    model, or a random Llama- or Qwen2-shaped folder."""
    from tests.apptest_support import ROOT

    if family == "shipped_llama":
        monkeypatch.setenv("TINYGPT_MODELS_DIR", str(ROOT / "models"))
        return open_page(LESSON, NORMAL, lesson_step=str(number), model=SHIPPED_LLAMA)
    if family == "gpt2":
        return open_page(LESSON, NORMAL, lesson_step=str(number))
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(modern_models_dir))
    return open_page(LESSON, NORMAL, lesson_step=str(number), model=family)


@pytest.mark.parametrize("family", ["gpt2", "shipped_llama", "llama", "qwen2"])
@pytest.mark.parametrize("number", range(1, STEPS + 1))
def test_every_step_draws_on_every_family(family, number, monkeypatch, modern_models_dir):
    at = open_on(family, number, monkeypatch, modern_models_dir)
    assert_clean(at)
    assert len(charts(at)) == 1
    rotary = family != "gpt2"
    shown = heading(at) + text(at) + " ".join(c.value for c in at.caption)
    if rotary:  # named for its parts: RMSNorm, no position table
        assert "LayerNorm" not in heading(at)
        assert "Token + position" not in shown and "position is added" not in shown
    if number in (3, 6):
        assert ("RMSNorm" if rotary else "LayerNorm") in heading(at)
    if number == 2 and rotary:
        assert "no position row is added" in text(at)


def test_the_rms_the_lesson_states_is_the_models_own(monkeypatch, modern_models_dir):
    from tests.pages.modern_folders import traced

    model, ids, trace = traced(modern_models_dir, "llama", NORMAL)
    x = trace["blocks.0.ln1.input"][-1].astype(np.float64)  # the last token, into block 0
    eps = model.blocks[0].ln1.eps
    at = open_on("llama", 3, monkeypatch, modern_models_dir)
    shown = float(re.search(r"root mean square rms = (\d+\.\d+)", text(at)).group(1))
    assert shown == pytest.approx(np.sqrt((x * x).mean() + eps), abs=5e-4)
    assert f"μ = {x.mean():+.4f} stays" in text(at)
    at = open_on("llama", 6, monkeypatch, modern_models_dir)
    h = trace["ln_f.input"][-1].astype(np.float64)
    shown = float(re.search(r"root mean square rms = (\d+\.\d+)", text(at)).group(1))
    assert shown == pytest.approx(np.sqrt((h * h).mean() + eps), abs=5e-4)


def test_a_step_that_fails_keeps_back_and_next(monkeypatch):
    """A step whose drawing raises shows the short error box, and both pairs of Back / Next
    (issue 49: the stepper ended at a step's error)."""
    def broken(state, logits, trace):
        raise ValueError("this step broke")

    steps = list(lesson.STEPS)
    steps[2] = lesson.Step(steps[2].title, steps[2].page, steps[2].link_label, broken)
    monkeypatch.setattr(lesson, "STEPS", type(lesson.STEPS)(steps))
    at = open_page(LESSON, NORMAL, lesson_step="3")
    assert any("this step broke" in e.value for e in at.error)
    for key in ("lesson.back", "lesson.next", "lesson.back.end", "lesson.next.end"):
        assert not at.button(key=key).disabled
    at.button(key="lesson.next").click().run()
    assert heading(at).startswith(f"Step 4 of {STEPS}")
