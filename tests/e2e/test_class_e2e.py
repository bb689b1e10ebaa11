"""A live class in a real browser: one teacher and two students, each in their own browser
context (their own cookies and Streamlit session), against one `streamlit run app.py`.

The students follow the teacher's prompt and page within a few seconds, both guess, the teacher
reveals, both see the result. Screenshots: the projected teacher view (1280x720) and a phone
(390x844), in screenshots/ or $TINYGPT_SCREENSHOTS.
"""

from __future__ import annotations

import time
import urllib.parse

import pytest

from tests.e2e.browser_support import (
    MENU,
    SHOTS,
    assert_no_error,
    skip_without_a_browser,
    wait_idle,
)

pytestmark = pytest.mark.browser

skip_without_a_browser()

FOLLOW_SECONDS = 5.0  # the issue asks ~2 s; a loaded 2-core test machine gets some slack
# The students' own heartbeat is slowed to 20 s (still inside the 30 s "connected" window): a
# follow or a question within FOLLOW_SECONDS then comes from the server's push (class_push).
HEARTBEAT_SECONDS = "20"
NEW_PROMPT = "JULIET:\nO Romeo, Romeo, wherefore art thou"


def SERVER(folder):  # noqa: N802 - read by tests/e2e/conftest.py's server
    """A fresh server whose class store is a new SQLite file."""
    return {"env": {"TINYGPT_DATA_DIR": str(folder),
                    "TINYGPT_CLASS_POLL_SECONDS": HEARTBEAT_SECONDS}}


def prompt_of(page) -> str | None:
    return urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query).get("prompt", [None])[0]


def wait_until(page, predicate, what: str, timeout: float = FOLLOW_SECONDS) -> float:
    """Seconds until predicate(page) holds (checked every 100 ms); fails after `timeout`."""
    start = time.monotonic()
    while not predicate(page):
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what}: not within {timeout} s (url {page.url})")
        page.wait_for_timeout(100)
    return time.monotonic() - start


def click(page, name: str) -> None:
    page.get_by_role("button", name=name).first.click()


def test_a_class_in_three_browsers(server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    teacher_ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    phones = [browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True,
                                  has_touch=True) for _ in range(2)]
    try:
        teacher = teacher_ctx.new_page()
        teacher.goto(f"{server}/Class", timeout=60_000)
        wait_idle(teacher)
        click(teacher, "Start a class")
        wait_idle(teacher)
        code = teacher.locator("[data-testid='stCode']").first.inner_text().strip()
        assert len(code) == 6, code
        assert teacher.locator("[data-testid='stImage'] img").count() == 1  # the QR code
        assert "teacher=" not in teacher.locator("[data-testid='stMain']").inner_text()  # hidden

        students = []
        for i, ctx in enumerate(phones):
            page = ctx.new_page()
            page.goto(f"{server}/Class?class={code}", timeout=60_000)
            wait_idle(page)
            page.get_by_role("textbox", name="Nickname (optional)").fill(f"<b>student {i}</b>")
            click(page, "Join the class")
            wait_idle(page)
            assert_no_error(page, f"student {i} joined")
            students.append(page)
        wait_until(teacher, lambda p: "2 connected · 2 following" in p.inner_text("body"),
                   "the teacher sees two students", timeout=15)
        assert "<b>student 0</b>" in teacher.inner_text("body")  # the nickname as typed

        # the teacher types a new prompt: both students take it
        box = teacher.locator("[data-testid='stSidebar'] textarea").first
        box.fill(NEW_PROMPT)
        box.press("Control+Enter")
        delays = [wait_until(s, lambda p: prompt_of(p) == NEW_PROMPT, "follow the prompt")
                  for s in students]
        # the teacher opens another page: both students go there
        teacher.locator(f"{MENU} a", has_text="Logits").first.click()
        wait_idle(teacher)
        for s in students:
            delays.append(wait_until(
                s, lambda p: urllib.parse.urlparse(p.url).path.endswith("/Logits"),
                "follow the page"))
            wait_idle(s)
            assert_no_error(s, "the followed page")
        print(f"follow delays (s): {[round(d, 2) for d in delays]}")

        # what comes next? one student types, the other picks a chip
        click(teacher, "Ask the class: what comes next?")
        wait_idle(teacher)
        for s in students:
            wait_until(s, lambda p: p.get_by_role("button", name="Send my guess").count() > 0,
                       "the question arrives")
            wait_idle(s)
        students[0].locator("input[aria-label*='type your guess']").fill("the")
        click(students[0], "Send my guess")
        students[1].locator("[data-testid='stButtonGroup'] button").first.click()
        click(students[1], "Send my guess")
        for s in students:
            wait_until(s, lambda p: "is in" in p.inner_text("body"), "the guess is in")
        wait_until(teacher, lambda p: "round 1: 2 answered" in p.inner_text("body"),
                   "the teacher sees 2 answers", timeout=15)
        click(teacher, "Reveal round 1")
        wait_idle(teacher)
        assert_no_error(teacher, "reveal")
        assert "The model's favourite" in teacher.inner_text("body")
        for s in students:
            wait_until(s, lambda p: "The model's favourite" in p.inner_text("body"),
                       "the result arrives")
            wait_idle(s)
            assert_no_error(s, "the result")
        teacher.get_by_text("Round 1: the class and the model").first.scroll_into_view_if_needed()
        teacher.screenshot(path=str(SHOTS / "Class_teacher.png"))
        students[0].get_by_text("The class's favourite").first.scroll_into_view_if_needed()
        students[0].screenshot(path=str(SHOTS / "Class_student_phone.png"))
    finally:
        for ctx in (teacher_ctx, *phones):
            ctx.close()
