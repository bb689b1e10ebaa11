"""The live class in the app: a teacher session and student sessions in one test process,
sharing one SQLite class store in a temporary data directory.

Pages run on their own here (AppTest.from_file), so a following student takes the teacher's
prompt, position and controls but cannot switch page (the browser test checks that part). The
classroom's page hooks are plugged in here, as app.py does: without them a page knows no class.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import ROOT, assert_clean, open_page  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt_app.compute.models import load_model  # noqa: E402
from tinygpt_hosting.classroom import hooks as class_hooks  # noqa: E402
from tinygpt_hosting.classroom.session import open_classroom  # noqa: E402

CLASS = "pages/16_Class.py"
SAMPLING = "pages/7_Softmax_and_sampling.py"
INTERVENTIONS = "pages/11_Interventions.py"
PROMPT = "ROMEO:\nBut soft, what light"
PAYLOAD = "<b>bob</b> **x** [a](http://e)"


@pytest.fixture(autouse=True)
def class_store(tiny_models, monkeypatch, tmp_path):
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TINYGPT_CLASS_STORE", raising=False)
    class_hooks.register()


def run_page(page: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / page), default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def button(at: AppTest, label: str):
    return next(b for b in at.button if b.label.startswith(label))


def labels(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def texts(at: AppTest) -> str:
    return "\n".join(t.value for t in at.text)


def teacher_on(page: str, **params: str) -> tuple[AppTest, str]:
    """A teacher session opened by the teacher link, on `page`."""
    new = open_classroom().create_class()
    at = run_page(page, **{"class": new.code, "teacher": new.secret, **params})
    assert_clean(at)
    return at, new.code


def student(code: str, nickname: str = "") -> AppTest:
    at = run_page(CLASS, **{"class": code})
    at.text_input(key="class.join_nickname").input(nickname)
    button(at, "Join the class").click().run()
    assert_clean(at)
    return at


def page_text(at: AppTest) -> str:
    """Everything a page shows as text: code blocks, markdown, notes, buttons."""
    parts = [c.value for c in at.code] + [m.value for m in at.markdown]
    parts += [n.value for kind in (at.info, at.warning, at.caption) for n in kind]
    return "\n".join(parts + labels(at))


def test_start_a_class_gives_a_code_a_qr_code_and_a_private_link_only_when_asked():
    at = run_page(CLASS)
    at.button(key="class.start").click().run()
    assert_clean(at)
    code = at.session_state["class.code"]
    shown = [c.value for c in at.code]
    assert code in shown
    assert any(v.endswith(f"/Class?class={code}") for v in shown)
    secret = at.session_state["class.secret"]
    assert secret not in page_text(at)  # not on the screen until asked for
    assert at.get("image"), "the QR code"
    at.button(key="class.show_link").click().run()
    assert any(f"teacher={secret}" in c.value for c in at.code)
    assert any("controls this class" in w.value for w in at.warning)
    at.button(key="class.hide_link").click().run()
    assert secret not in page_text(at)
    assert "teacher" not in at.query_params


def test_the_teacher_link_is_never_shown_in_projector_mode():
    new = open_classroom().create_class()
    at = run_page(CLASS, **{"class": new.code, "teacher": new.secret, "projector": "1"})
    assert_clean(at)
    assert at.session_state["class.secret"] == new.secret  # the teacher, projecting
    assert not [b for b in at.button if b.key == "class.show_link"]
    at.session_state["class.show_teacher_link"] = True  # even if it was asked for before
    at.run()
    assert new.secret not in page_text(at)
    assert "not shown in projector mode" in page_text(at)


def test_the_join_link_carries_the_public_address(monkeypatch):
    monkeypatch.setenv("TINYGPT_PUBLIC_URL", "https://tinygpt.school.example/app")
    at, code = teacher_on(CLASS)
    assert f"https://tinygpt.school.example/app/Class?class={code}" in [c.value for c in at.code]
    assert not at.warning


def test_a_loopback_join_link_comes_with_the_warning(monkeypatch):
    monkeypatch.delenv("TINYGPT_PUBLIC_URL", raising=False)
    monkeypatch.setattr("tinygpt_hosting.streamlit_internals.network_url", lambda: None)
    at, code = teacher_on(CLASS)
    links = [c.value for c in at.code if c.value.endswith(f"/Class?class={code}")]
    assert links and "localhost" in links[0]
    assert any("Phones cannot open this link" in w.value for w in at.warning)


def test_the_network_address_comes_with_a_note_to_check_it(monkeypatch):
    monkeypatch.delenv("TINYGPT_PUBLIC_URL", raising=False)
    monkeypatch.setattr("tinygpt_hosting.streamlit_internals.network_url",
                        lambda: "http://192.168.1.20:8501")
    at, code = teacher_on(CLASS)
    assert f"http://192.168.1.20:8501/Class?class={code}" in [c.value for c in at.code]
    assert any("Open it on a phone" in i.value for i in at.info)


def test_students_follow_the_teacher_and_can_explore_on_their_own():
    teacher, code = teacher_on(SAMPLING, prompt=PROMPT, top_p="0.5", pos="2")
    teacher.run()  # the page's controls are published on the next tick
    pupil = student(code)
    assert pupil.session_state["prompt"] == PROMPT
    assert pupil.session_state["pos"] == 2
    assert float(pupil.session_state["control.top_p"]) == 0.5
    assert "Softmax and sampling" in "".join(i.value for i in pupil.info)  # would switch there
    teacher.sidebar.text_area[0].input("It is the east").run()
    assert "1 connected · 1 following" in texts(teacher)
    pupil.run()
    assert pupil.session_state["prompt"] == "It is the east"

    button(pupil, "Explore on my own").click().run()
    teacher.sidebar.text_area[0].input("and Juliet is the sun").run()
    pupil.run()
    assert pupil.session_state["prompt"] == "It is the east"  # exploring: not taken
    teacher.run()
    assert "1 connected · 0 following" in texts(teacher)
    button(pupil, "Follow again").click().run()
    pupil.run()
    assert pupil.session_state["prompt"] == "and Juliet is the sun"  # caught up


def test_students_follow_the_teachers_ablation():
    """The Interventions page's ablation (heads, neurons, mean) is what followers get."""
    teacher, code = teacher_on(INTERVENTIONS, prompt=PROMPT, experiment="Ablation",
                               heads="0.0,1.1", neurons="1.5", mean="1")
    teacher.run()  # published on the next tick
    pupil = student(code)
    assert pupil.session_state["control.heads"] == "0.0,1.1"  # as the link carries it
    assert pupil.session_state["control.neurons"] == "1.5"
    assert pupil.session_state["control.mean"] is True
    teacher.multiselect(key="interventions.heads").set_value(["0.2"]).run()
    teacher.toggle(key="interventions.mean").set_value(False).run()
    teacher.run()
    pupil.run()
    assert pupil.session_state["control.heads"] == "0.2"
    assert pupil.session_state["control.mean"] is False


def test_predict_then_reveal_with_the_models_numbers():
    teacher, code = teacher_on(CLASS, prompt=PROMPT)
    alice, bob = student(code, "alice"), student(code, "bob")
    teacher.button(key="class.ask").click().run()
    assert_clean(teacher)
    for pupil in (alice, bob):
        pupil.run()
        assert "what comes next" in texts(pupil)
        assert not any(b.label.startswith("Reveal") for b in pupil.button)
    alice.text_input(key="class.typed").input("the")
    button(alice, "Send my guess").click().run()
    _, tok = load_model("tiny.npz")
    picked = next(c for c in bob.session_state["class.chips"]  # a chip other than " the"
                  if c != tok.encode(" the")[0])
    bob.button_group(key="class.pick").set_value(picked)
    button(bob, "Send my guess").click().run()
    for pupil in (alice, bob):
        assert any("is in" in s.value for s in pupil.success)
    teacher.run()
    assert "round 1: 2 answered" in texts(teacher)
    teacher.button(key="class.reveal").click().run()
    assert_clean(teacher)

    model, tokenizer = load_model("tiny.npz")
    ids = tokenizer.encode(PROMPT)
    probs = ti.probabilities(model.forward(np.asarray(ids))[-1])
    guesses = [tokenizer.encode(" the")[0], ti.first_token(tokenizer, tokenizer.decode([picked]))]
    report = ti.guess_report(probs, guesses, [1, 1], 0.9)
    alice.run()
    bob.run()
    assert "Your guess ·the: " in texts(alice)
    assert "Your guess " in texts(bob) and "A tie: " in [m.value for m in alice.metric][1]
    for at in (teacher, alice):
        table = at.dataframe[-1].value
        assert table["guessed by"].sum() == 2
        np.testing.assert_allclose(sorted(table["model probability"]), sorted(report.probs),
                                   rtol=1e-5)
        assert sorted(table["rank"]) == sorted(report.ranks.tolist())
        assert f"{report.share_kept:.0%}" in [m.value for m in at.metric]


def test_an_open_round_holds_the_answer_back_until_the_reveal():
    teacher, code = teacher_on(SAMPLING, prompt=PROMPT)
    pupil = student(code)
    assert teacher.get("plotly_chart")
    teacher.button(key="class.ask").click().run()
    assert_clean(teacher)
    assert any("waits for the reveal" in i.value for i in teacher.info)
    assert not teacher.get("plotly_chart") and not teacher.dataframe  # no answer projected
    pupil.run()
    chips = pupil.session_state["class.chips"]
    model, tokenizer = load_model("tiny.npz")
    probs = ti.probabilities(model.forward(np.asarray(tokenizer.encode(PROMPT)))[-1])
    assert set(chips) != set(np.argsort(-probs, kind="stable")[:8].tolist())  # not the top 8
    teacher.button(key="class.reveal").click().run()
    assert_clean(teacher)
    assert teacher.get("plotly_chart") and not any("waits" in i.value for i in teacher.info)


def test_rounds_are_kept_and_the_teacher_can_go_back():
    teacher, code = teacher_on(CLASS, prompt=PROMPT)
    pupil = student(code)
    teacher.button(key="class.ask").click().run()
    pupil.run()
    pupil.text_input(key="class.typed").input("x")
    button(pupil, "Send my guess").click().run()
    teacher.button(key="class.reveal").click().run()
    teacher.button(key="class.ask").click().run()
    assert teacher.selectbox(key="class.round_choice").options == ["1", "2"]
    teacher.selectbox(key="class.round_choice").set_value(1).run()
    assert_clean(teacher)
    assert teacher.dataframe[-1].value["guessed by"].sum() == 1


def test_a_student_cannot_act_as_the_teacher():
    teacher, code = teacher_on(CLASS, prompt=PROMPT)
    pupil = student(code)
    assert "class.secret" not in pupil.session_state
    assert not any(b.label.startswith(("Ask", "Reveal", "End")) for b in pupil.button)
    forged = run_page(CLASS, **{"class": code, "teacher": "A" * 43})
    assert any("does not control this class" in e.value for e in forged.error)
    assert "class.secret" not in forged.session_state
    assert not any(b.label.startswith(("Ask", "Reveal", "End")) for b in forged.button)
    assert "teacher" not in forged.query_params  # the link's secret leaves the address bar


def test_class_text_is_plain_text():
    teacher, code = teacher_on(CLASS, prompt=PROMPT)
    student(code, PAYLOAD[:24])
    teacher.run()
    assert PAYLOAD[:24] in texts(teacher)  # st.text: shown as typed, never as markup
    markdown = "\n".join(m.value for m in teacher.markdown)
    assert "<b>" not in markdown and "bob" not in markdown


def test_guess_first_on_the_home_page():
    at = open_page("app.py", PROMPT)
    assert at.dataframe  # the model's answer, until the student chooses to guess first
    at.toggle(key="home.guess_first").set_value(True).run()
    assert not at.dataframe and not at.get("plotly_chart")  # hidden until a guess is typed
    at.text_input(key="home.guess").input("the").run()
    assert_clean(at)
    assert at.dataframe
    model, tokenizer = load_model("tiny.npz")
    ids = tokenizer.encode(PROMPT)
    probs = ti.probabilities(model.forward(np.asarray(ids))[-1])
    token = tokenizer.encode(" the")[0]
    rank = int((probs > probs[token]).sum()) + 1
    values = [m.value for m in at.metric]
    assert f"{probs[token]:.2%}" in values
    assert any(v.startswith(f"{rank:,} of") for v in values)


def test_when_the_class_ends_students_are_told_and_leave_it():
    teacher, code = teacher_on(CLASS, prompt=PROMPT)
    pupil = student(code)
    teacher.button(key="class.end").click().run()
    assert_clean(teacher)
    assert teacher.button(key="class.start")  # the teacher can start a new one
    pupil.run()
    assert pupil.error and "class" in pupil.error[0].value
    assert "class.code" not in pupil.session_state
    pupil.run()
    assert_clean(pupil)
    assert pupil.button(key="class.start")  # back to start-or-join


ATTENTION = "pages/4_Attention.py"


def head_weights_by_hand(model, ids: list[int], layer: int, head: int) -> np.ndarray:
    """The head's attention weights (T, T) from the layers' parameters, not from a Trace."""
    ids = np.asarray(ids)
    x = model.embedding.embeddings[ids] + model.embedding.position_embeddings[:len(ids)]
    for index, block in enumerate(model.blocks[:layer]):
        x = block.forward(x[None], index=index)[0]
    attn = model.blocks[layer].attn
    a = model.blocks[layer].ln1.forward(x[None])[0]
    C, hs = a.shape[-1], attn.head_size
    qkv = a @ attn.W_qkv + attn.b_qkv
    q = qkv[:, head * hs:(head + 1) * hs]
    k = qkv[:, C + head * hs:C + (head + 1) * hs]
    scores = q @ k.T / np.sqrt(hs)
    scores = np.where(np.tril(np.ones_like(scores, dtype=bool)), scores, -np.inf)
    return ti.probabilities(scores)


def test_which_token_does_this_head_attend_to():
    teacher, code = teacher_on(ATTENTION, prompt=PROMPT, pos="4", layer="1", head="1")
    assert "class.ask_attention" not in [b.key for b in run_page(CLASS).button]
    alice, bob = student(code, "alice"), student(code, "bob")
    teacher.button(key="class.ask_attention").click().run()
    assert_clean(teacher)
    for pupil, position in ((alice, 0), (bob, 4)):
        pupil.run()
        assert "layer 1, head 1, which token does" in texts(pupil)
        pupil.selectbox(key="class.position").set_value(position)
        button(pupil, "Send my guess").click().run()
        assert any("is in" in s.value for s in pupil.success)
    teacher.run()
    teacher.button(key="class.reveal").click().run()
    assert_clean(teacher)

    model, tokenizer = load_model("tiny.npz")
    weights = head_weights_by_hand(model, tokenizer.encode(PROMPT), 1, 1)[4, :5]
    table = next(d.value for d in teacher.dataframe if "guessed by" in d.value.columns)
    assert table["guessed by"].tolist() == [1, 1]
    assert [int(label.split(":")[0]) for label in table["position: token"]] == [0, 4]
    np.testing.assert_allclose(table["attention weight"], weights[[0, 4]], rtol=1e-4)
    best = int(np.argmax(weights))
    assert f"{best}:" in next(m.value for m in teacher.metric
                              if m.label == "The head's favourite")


def test_without_the_classroom_hooks_a_page_knows_no_class():
    """The classroom is optional: unplugged, a teacher link on a page is not taken, and the page
    draws as usual; plugged in again, the same link makes the tab the teacher."""
    new = open_classroom().create_class()
    link = {"class": new.code, "teacher": new.secret, "prompt": PROMPT}
    class_hooks.unregister()
    try:
        alone = run_page(SAMPLING, **link)
    finally:
        class_hooks.register()
    assert_clean(alone)
    assert "class.secret" not in alone.session_state
    assert "Class " + new.code not in texts(alone)
    plugged = run_page(SAMPLING, **link)
    assert_clean(plugged)
    assert plugged.session_state["class.secret"] == new.secret
    assert f"Class {new.code}" in texts(plugged)


TOKEN, OTHER_TOKEN = "wxUnUZhDikmO4hDyStn4FWhLbS0yBMiEeXdtwBsB2iI", "Q" * 43


def browser_session(page: str, token: str, **params: str) -> AppTest:
    """A new session (a reload) whose browser has already reported `token`."""
    at = AppTest.from_file(str(ROOT / page), default_timeout=90)
    for key, value in params.items():
        at.query_params[key] = value
    at.session_state["browser_token"] = token
    return at.run()


def test_a_teacher_who_reloads_resumes_in_one_click_and_another_browser_cannot():
    first = browser_session(CLASS, TOKEN)
    first.button(key="class.start").click().run()
    code, secret = first.session_state["class.code"], first.session_state["class.secret"]
    stranger = browser_session(CLASS, OTHER_TOKEN)
    assert not [b for b in stranger.button if b.key == "class.resume"]
    reloaded = browser_session(SAMPLING, TOKEN, prompt=PROMPT)
    assert_clean(reloaded)
    assert button(reloaded, f"Resume class {code}")
    assert secret not in page_text(reloaded)
    reloaded.button(key="class.resume").click().run()
    assert_clean(reloaded)
    assert reloaded.session_state["class.code"] == code
    assert reloaded.session_state["class.secret"] == secret
    assert f"Class {code}" in texts(reloaded)  # the teacher's counters: teaching again


def test_a_teacher_can_forget_this_browser_and_an_ended_class_is_not_offered():
    first = browser_session(CLASS, TOKEN)
    first.button(key="class.start").click().run()
    reloaded = browser_session(CLASS, TOKEN)
    reloaded.button(key="class.forget").click().run()
    assert not [b for b in reloaded.button if b.key == "class.resume"]
    assert not [b for b in browser_session(CLASS, TOKEN).button if b.key == "class.resume"]
    second = browser_session(CLASS, TOKEN)
    second.button(key="class.start").click().run()
    second.button(key="class.end").click().run()
    assert not [b for b in browser_session(CLASS, TOKEN).button if b.key == "class.resume"]


def test_a_student_who_reloads_is_back_in_the_same_seat_following_in_one_click():
    teacher, code = teacher_on(SAMPLING, prompt=PROMPT)
    pupil = browser_session(CLASS, TOKEN, **{"class": code})
    pupil.text_input(key="class.join_nickname").input("ana")
    button(pupil, "Join the class").click().run()
    seat = pupil.session_state["class.student"]
    button(pupil, "Explore on my own").click().run()
    reloaded = browser_session(CLASS, TOKEN)
    assert_clean(reloaded)
    assert button(reloaded, f"Back to class {code}")
    reloaded.button(key="class.resume").click().run()
    assert_clean(reloaded)
    assert reloaded.session_state["class.student"] == seat
    assert reloaded.session_state["class.following"] is True
    assert reloaded.session_state["prompt"] == PROMPT  # caught up with the teacher
    button(reloaded, "Leave the class").click().run()
    assert not [b for b in browser_session(CLASS, TOKEN).button if b.key == "class.resume"]
    teacher.run()
    assert "1 connected" in texts(teacher)  # one seat, not two


def looks_like_a_code(text: str) -> list[str]:
    """Words in `text` a student could take for a class code (6 characters of its alphabet)."""
    from tinygpt_hosting.classroom.rules import CODE_ALPHABET, CODE_LENGTH

    words = "".join(ch if ch.isalnum() else " " for ch in text).split()
    return [w for w in words if len(w) == CODE_LENGTH and all(ch in CODE_ALPHABET for ch in w)]


def test_the_join_box_and_its_error_show_no_made_up_code():
    at = run_page(CLASS)
    box = at.text_input(key="class.join_code")
    assert box.placeholder and not looks_like_a_code(box.placeholder)
    box.input("xx")
    button(at, "Join the class").click().run()
    errors = [e.value for e in at.error]
    assert errors and "6 letters" in errors[0]
    assert not looks_like_a_code(errors[0])
