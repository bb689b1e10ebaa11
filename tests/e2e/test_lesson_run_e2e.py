"""A shipped lesson run in Chromium from its first step to the report (issue 48): the teacher
projects at 1280x720 (projector mode), two students hold phones at 390x844 (mobile user agent
and touch), each in their own browser context (their own cookies and Streamlit session).

The teacher starts a class and opens the first shipped lesson; the students join and follow.
Next moves the class through every step: each student's page, prompt and controls become the
step's. Each step's "what comes next?" round is answered by both students (the first always
gives the text's true next token, the second never), then revealed: the teacher's screen shows
the true token, the room's probability for it beside the model's and the running score; each
student sees their own count of true tokens, and only their own. At the end the teacher opens
the Class page and downloads the report: a row per round, with the room's probability as a hand
computation gives it and the model's as the reveal showed it.

Screenshots of the teacher and both phones (the first step, an open round of choices, a reveal,
the report) go to screenshots/lesson_run/ (or $TINYGPT_SCREENSHOTS/lesson_run/).
"""

from __future__ import annotations

import csv
import io
import re
import urllib.parse
from contextlib import contextmanager

import pytest

from tests.e2e.browser_support import (
    EXPAND,
    MENU,
    PHONE,
    PROJECTOR,
    SHOTS,
    assert_no_error,
    main_text,
    skip_without_a_browser,
    wait_idle,
)

pytestmark = pytest.mark.browser

skip_without_a_browser()

RUN_SHOTS = SHOTS / "lesson_run"
LESSON = "1_next_word.toml"
WRONG = "moon"  # the second student's free guess: never a true next token of the lesson
FOLLOW_TIMEOUT = 90_000  # ms: a loaded 2-core machine runs three sessions' pages in turn
HELD_BACK = "waits for the reveal"
NEXT = re.compile(r"Next$")  # the lesson bar's button (its icon's name may come first)


def SERVER(folder):  # noqa: N802 - read by tests/e2e/conftest.py's server
    """A fresh server whose class store is a new SQLite file; the first shipped lesson (the
    selected one) runs on the shipped model, which it falls back to."""
    return {"env": {"TINYGPT_DATA_DIR": str(folder)}, "timeout": 180}


@contextmanager
def screens(browser):
    """The projected teacher screen and two phones, each a fresh browser profile."""
    contexts = [browser.new_context(**PROJECTOR)] + [browser.new_context(**PHONE)
                                                     for _ in range(2)]
    for context in contexts:
        context.set_default_timeout(120_000)
    try:
        yield contexts
    finally:
        for context in contexts:
            context.close()


def open_page(context, url: str):
    page = context.new_page()
    page.goto(url, timeout=120_000)
    wait_idle(page, timeout=300_000)
    return page


def shoot(page, name: str, full: bool = False) -> None:
    RUN_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(RUN_SHOTS / f"{name}.png"), full_page=full)


def shoot_all(teacher, students, moment: str) -> None:
    shoot(teacher, f"{moment}-teacher-projector")
    for i, student in enumerate(students):
        shoot(student, f"{moment}-student{i + 1}-phone", full=True)


def wait_text(page, pattern: str, timeout: float = FOLLOW_TIMEOUT) -> None:
    """Wait until the page's text matches the regular expression `pattern`, then redrawn."""
    page.wait_for_function("p => new RegExp(p).test(document.body.innerText)", arg=pattern,
                           timeout=timeout)
    wait_idle(page)


def shows_step(page, step) -> bool:
    """The page is the step's page, on its prompt, with its controls in the link."""
    url = urllib.parse.urlparse(page.url)
    query = urllib.parse.parse_qs(url.query)
    if not url.path.rstrip("/").endswith("/" + step.page):
        return False
    if query.get("prompt", [None])[0] != step.prompt:
        return False
    if step.question is not None:  # the page holds its controls back while the round is open
        return True
    return all(name not in query or float(query[name][0]) == float(value)
               for name, value in step.controls.items())


def wait_for_step(page, step, who: str) -> None:
    deadline = FOLLOW_TIMEOUT / 1000
    waited = 0.0
    while not shows_step(page, step):
        if waited > deadline:
            pytest.fail(f"{who} does not show step {step.number} ({step.page}): {page.url}")
        page.wait_for_timeout(250)
        waited += 0.25
    wait_idle(page)
    assert_no_error(page, f"{who}, step {step.number}")


def start_and_join(teacher, students, server: str) -> str:
    teacher.get_by_role("button", name="Start a class").click()
    wait_idle(teacher)
    code = teacher.locator("[data-testid='stMain'] [data-testid='stCode']").first.inner_text()
    code = code.strip()
    for i, student in enumerate(students):
        student.goto(f"{server}/Class?class={code}", timeout=120_000)
        wait_idle(student, timeout=300_000)
        student.get_by_role("textbox", name="Nickname (optional)").fill(f"phone {i + 1}")
        student.get_by_role("button", name="Join the class").tap()
        wait_idle(student)
        assert_no_error(student, f"student {i + 1} joined")
    wait_text(teacher, "2 connected · 2 following", timeout=60_000)
    return code


def answer(student, step, right: bool) -> None:
    """Send the student's guess: the true next token (right) or another one."""
    student.get_by_role("button", name="Send my guess").wait_for(timeout=FOLLOW_TIMEOUT)
    wait_idle(student)
    if step.choices:  # a choice question: pick one of the step's choices
        pick = step.true_next if right else next(c for c in step.choices if c != step.true_next)
        label = pick.replace(" ", "·")
        student.locator("[data-testid='stButtonGroup'] button",
                        has_text=re.compile(f"^{re.escape(label)}$")).first.tap()
    else:
        student.locator("input[aria-label*='type your guess']").fill(
            step.true_next.strip() if right else WRONG)  # "a new word" stays ticked
    student.get_by_role("button", name="Send my guess").tap()
    wait_text(student, "is in. Wait for the reveal")


def metric_value(page, label: str) -> str:
    metric = page.locator("[data-testid='stMetric']", has_text=label).first
    return metric.locator("[data-testid='stMetricValue']").inner_text().strip()


def play_round(teacher, students, step, number: int, revealed: list) -> dict:
    """Both students answer the step's round, the teacher reveals it; what the screens said."""
    for page, where in ((teacher, "the projector"), *((s, f"phone {i + 1}")
                                                      for i, s in enumerate(students))):
        wait_text(page, HELD_BACK)  # the answer waits for the reveal
        assert "The model's probability for it" not in main_text(page), (step.number, where)
    assert f"Round {number}: {step.question}" in main_text(teacher)  # projected while open
    if step.choices:
        for student in students:
            student.get_by_role("button", name="Send my guess").scroll_into_view_if_needed()
        shoot_all(teacher, students, "2-open-round-choices")
    for i, student in enumerate(students):
        answer(student, step, right=i == 0)
    wait_text(teacher, f"round {number}: 2 answered")
    teacher.get_by_role("button", name=f"Reveal round {number}").click()
    wait_text(teacher, "The model's probability for it")
    assert_no_error(teacher, f"the reveal of round {number}")
    text = main_text(teacher)
    assert "The text's true next token: " + step.true_next.replace(" ", "·") in text
    assert "The room's probability for it" in text
    assert "Who predicts Shakespeare better: this class or the model?" in text
    assert "You guessed" not in text  # a student's count is on their own screen only
    revealed.append(step)
    seen = {"model": metric_value(teacher, "The model's probability for it"),
            "room": metric_value(teacher, "The room's probability for it")}
    for i, student in enumerate(students):
        hits = len(revealed) if i == 0 else 0
        wait_text(student, f"You guessed {hits} of {len(revealed)} true tokens so far")
        assert_no_error(student, f"phone {i + 1}, the reveal of round {number}")
        text = main_text(student)
        assert text.count("You guessed") == 1, (number, i)  # their own count, no one else's
        assert metric_value(student, "The model's probability for it") == seen["model"]
    return seen


def room_probability(step) -> float:
    """By hand: (1 true guess + ½) / (2 guesses + ½ × the choices); a free guess's choices are
    the distinct tokens guessed (the true one and the wrong one)."""
    return 1.5 / (2 + 0.5 * (len(step.choices) or 2))


def download_report(teacher) -> list[dict]:
    teacher.locator(EXPAND).first.click()  # the projected sidebar opens on request
    teacher.locator(f"{MENU} a", has_text="Class").first.click()
    teacher.wait_for_url(re.compile(r"/Class"))
    wait_text(teacher, "Class report")
    button = teacher.get_by_role("button", name="Download the report (CSV)")
    button.scroll_into_view_if_needed()
    shoot(teacher, "4-report-teacher-projector")
    with teacher.expect_download() as download:
        button.click()
    text = open(download.value.path(), encoding="utf-8").read()  # noqa: SIM115 - read once
    return list(csv.DictReader(io.StringIO(text)))


def test_a_lesson_from_the_first_step_to_the_report(server, browser):
    from tinygpt_hosting.classroom.lesson import loader

    lesson = loader.load_lesson(loader.shipped_lessons()[LESSON])
    with screens(browser) as (projected, *phones):
        teacher = open_page(projected, f"{server}/Class?projector=1")
        students = [p.new_page() for p in phones]
        start_and_join(teacher, students, server)
        teacher.get_by_role("button", name="Open this lesson").click()

        revealed, seen = [], {}
        for index, step in enumerate(lesson.steps):
            if index:
                teacher.get_by_role("button", name=NEXT).click()
            wait_text(teacher, f"step {index + 1} of {len(lesson.steps)}")
            wait_for_step(teacher, step, "the teacher")
            assert "Notes for you" not in main_text(teacher)  # never projected
            for i, student in enumerate(students):
                wait_for_step(student, step, f"phone {i + 1}")
            if index == 0:
                shoot_all(teacher, students, "1-first-step")
            if step.question is not None:
                number = len(revealed) + 1
                seen[number] = play_round(teacher, students, step, number, revealed)
                if step.choices:
                    for page in (teacher, *students):
                        page.locator(".st-key-class_score").first.scroll_into_view_if_needed()
                    shoot_all(teacher, students, "3-reveal")
        assert teacher.get_by_role("button", name=NEXT).is_disabled()

        rows = download_report(teacher)
        for i, student in enumerate(students):
            wait_text(student, "Leave the class")  # they followed the teacher to the Class page
            shoot(student, f"4-report-student{i + 1}-phone", full=True)

    asked = [step for step in lesson.steps if step.question is not None]
    assert len(rows) == len(asked) == len(revealed)
    for number, (row, step) in enumerate(zip(rows, asked, strict=True), start=1):
        assert row["round"] == str(number)
        assert row["question"] == step.question
        assert row["true token"] == repr(step.true_next)
        assert row["answers"] == "2"
        assert f"{step.true_next!r} ×1" in row["class guesses"]
        assert len(row["model top 5"].split("; ")) == 5
        assert float(row["room p(true)"]) == pytest.approx(room_probability(step), abs=1e-4)
        assert f"{float(row['room p(true)']):.1%}" == seen[number]["room"]
        shown = float(seen[number]["model"].rstrip("%"))  # the reveal's "12.3%"
        assert float(row["model p(true)"]) * 100 == pytest.approx(shown, abs=0.051)
        assert "phone 1" not in ",".join(row.values())  # nicknames are left out
