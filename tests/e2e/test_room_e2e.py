"""The lesson as a room lives it (issue 49), in Chromium: the teacher projects at 1280x720 in
projector mode, students hold phones at 390x844 (mobile user agent and touch).

- while a "what comes next?" round is open, neither the projected screen nor a phone shows the
  model's answer (Home's "What the model guesses next", its chart, its table); after the reveal
  the student reads their own guess against the class and the model;
- the Class page's QR code and class code sit within the first projected screen with 30
  students seated, and their names are hidden there until the one visible toggle shows them;
- the Lesson's Back and Next sit in the first projected screen on every step, on both shipped
  models, whatever the step draws;
- on Softmax projected, no button label or axis title is cut;
- on the phone, the revealed round's table fits the screen (no column cut) and nothing lies over
  its CSV button.

Screenshots go to screenshots/room/ (or $TINYGPT_SCREENSHOTS/room/).
"""

from __future__ import annotations

import os
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
    streamlit_server,
    wait_idle,
)

pytestmark = pytest.mark.browser

skip_without_a_browser()

ROOM_SHOTS = SHOTS / "room"
ANSWER = "What the model guesses next"
NAMES = [f"Student{n:02d}" for n in range(30)]


@contextmanager
def environment(**settings: str):
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with a fresh class store, which this test process opens too (seats by hand)."""
    with environment(TINYGPT_DATA_DIR=str(tmp_path_factory.mktemp("room49"))), \
            streamlit_server(timeout=180) as url:
        yield url


@contextmanager
def screen(browser, options: dict):
    context = browser.new_context(**options)
    context.set_default_timeout(120_000)
    try:
        yield context
    finally:
        context.close()


def open_page(context, url: str):
    page = context.new_page()
    page.goto(url, timeout=120_000)
    wait_idle(page, timeout=300_000)
    return page


def start_class(page) -> str:
    page.get_by_role("button", name="Start a class").click()
    wait_idle(page)
    return page.locator("[data-testid='stMain'] [data-testid='stCode']").first.inner_text().strip()


def seat_students(code: str, names: list[str]) -> None:
    """Students seated straight in the class store (as many phones would be)."""
    from tinygpt_hosting.classroom.rules import open_classroom

    room = open_classroom()
    for name in names:
        room.join(code, name)


# The revealed round on a phone: tables wider than their frame (a column cut), and download
# buttons that another element's box lies over (the table's floating toolbar did).
TABLE_AND_BUTTON_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const cut = [...main.querySelectorAll("[data-testid='stDataFrame'] .dvn-scroller")]
    .filter(s => s.scrollWidth > s.clientWidth + 1).map(s => [s.scrollWidth, s.clientWidth]);
  const meets = (a, b) => a.left < b.right - 1 && b.left < a.right - 1
                          && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const bars = [...main.querySelectorAll("[data-testid='stElementToolbar']")]
    .map(t => t.getBoundingClientRect()).filter(r => r.width && r.height);
  const covered = [...main.querySelectorAll("[data-testid='stDownloadButton'] button")]
    .filter(b => bars.some(r => meets(r, b.getBoundingClientRect())))
    .map(b => b.innerText.trim());
  return {tables: main.querySelectorAll("[data-testid='stDataFrame']").length, cut, covered};
}"""
# Button and metric labels Streamlit had to cut with an ellipsis ("CSV, 33 ro…", "Entropy
# after the cut (…").
CUT_BUTTONS_JS = """() => [...document.querySelectorAll("[data-testid='stMain'] button, "
                                                       + "[data-testid='stMetricLabel']")]
    .flatMap(b => [b, ...b.querySelectorAll("*")])
    .filter(el => el.offsetParent && el.scrollWidth > el.clientWidth + 1)
    .map(el => el.textContent.trim())"""


def within_first_screen(page, box: dict | None) -> bool:
    height = page.viewport_size["height"]
    return bool(box) and box["y"] >= 0 and box["y"] + box["height"] <= height


def test_the_qr_code_and_code_fit_the_projected_screen_and_names_hide(server, browser):
    with screen(browser, PROJECTOR) as context:
        teacher = open_page(context, f"{server}/Class?projector=1")
        code = start_class(teacher)
        seat_students(code, NAMES)
        teacher.wait_for_function("() => /30 connected/.test(document.body.innerText)",
                                  timeout=30_000)
        main = teacher.locator("[data-testid='stMain']")
        qr = main.locator("[data-testid='stImage'] img").first.bounding_box()
        code_box = main.locator("[data-testid='stCode']").first.bounding_box()
        ROOM_SHOTS.mkdir(parents=True, exist_ok=True)
        teacher.screenshot(path=str(ROOM_SHOTS / "class-projector-30.png"))
        assert within_first_screen(teacher, qr), qr
        assert within_first_screen(teacher, code_box), code_box
        text = main_text(teacher)
        assert not any(name in text for name in NAMES)  # hidden while projected
        toggle = teacher.get_by_text("Show the names", exact=False).first
        assert within_first_screen(teacher, toggle.bounding_box())  # one visible toggle
        toggle.click()
        teacher.wait_for_function("() => /Student07/.test(document.body.innerText)",
                                  timeout=30_000)
        qr = main.locator("[data-testid='stImage'] img").first.bounding_box()
        assert within_first_screen(teacher, qr), qr  # the roll call does not push it down
        teacher.screenshot(path=str(ROOM_SHOTS / "class-projector-30-names.png"))


def test_an_open_round_hides_the_answer_on_the_projector_and_the_phone(server, browser):
    with screen(browser, PROJECTOR) as projected, screen(browser, PHONE) as phone:
        teacher = open_page(projected, f"{server}/Class?projector=1")
        code = start_class(teacher)
        student = open_page(phone, f"{server}/Class?class={code}")
        student.get_by_role("button", name="Join the class").tap()
        wait_idle(student)
        teacher.locator(EXPAND).first.click()  # the projected sidebar opens on request
        teacher.locator(f"{MENU} a", has_text="Home").first.click()
        teacher.wait_for_function(f"() => document.body.innerText.includes('{ANSWER}')")
        wait_idle(teacher, timeout=300_000)
        assert ANSWER in main_text(teacher)
        student.wait_for_function(f"() => document.body.innerText.includes('{ANSWER}')",
                                  timeout=60_000)  # following the teacher to Home
        wait_idle(student)
        teacher.get_by_role("button", name="Ask the class: what comes next?").click()
        wait_idle(teacher)
        student.get_by_role("button", name="Send my guess").wait_for(timeout=60_000)
        wait_idle(student)
        ROOM_SHOTS.mkdir(parents=True, exist_ok=True)
        teacher.screenshot(path=str(ROOM_SHOTS / "round-open-projector.png"), full_page=True)
        student.screenshot(path=str(ROOM_SHOTS / "round-open-phone.png"), full_page=True)
        for page, where in ((teacher, "projector"), (student, "phone")):
            text = main_text(page)
            assert ANSWER not in text, where
            assert "waits for the reveal" in text, where
            assert page.locator("[data-testid='stMain'] [data-testid='stPlotlyChart']"
                                ).count() == 0, where
            assert page.locator("[data-testid='stMain'] [data-testid='stDataFrame']"
                                ).count() == 0, where
        student.locator("input[aria-label*='type your guess']").fill("the")
        student.get_by_role("button", name="Send my guess").tap()
        student.wait_for_function("() => /is in/.test(document.body.innerText)")
        teacher.get_by_role("button", name="Reveal round 1").click()
        wait_idle(teacher)
        assert ANSWER in main_text(teacher)
        student.wait_for_function("() => /Your guess ·the: /.test(document.body.innerText)",
                                  timeout=60_000)
        wait_idle(student)
        assert_no_error(student, "the reveal")
        student.screenshot(path=str(ROOM_SHOTS / "round-revealed-phone.png"), full_page=True)
        table = student.locator("[data-testid='stMain'] [data-testid='stDataFrame']").first
        table.scroll_into_view_if_needed()
        table.hover()  # its toolbar shows on hover (a tap on a phone)
        student.wait_for_timeout(500)
        student.screenshot(path=str(ROOM_SHOTS / "round-revealed-phone-table.png"))
        found = student.evaluate(TABLE_AND_BUTTON_JS)
        assert found["tables"] and not found["cut"] and not found["covered"], found


def test_projected_softmax_cuts_no_button_label(server, browser):
    """Projected, the Softmax page's buttons and metrics keep their whole labels (issue 49:
    "CSV, 33 ro…", "Entropy after the cut (…"); its chart labels: test_first_screen."""
    with screen(browser, PROJECTOR) as context:
        page = open_page(context, f"{server}/Softmax_and_sampling?projector=1")
        assert_no_error(page, "Softmax projected")
        assert page.locator("[data-testid='stMain'] button").count() > 0
        assert page.evaluate(CUT_BUTTONS_JS) == []


def button_box(page, name: str):
    return page.get_by_role("button", name=name, exact=True).first.bounding_box()


@pytest.mark.parametrize("model", ["shakespeare.npz", "shakespeare_llama.npz"])
def test_back_and_next_are_on_the_first_screen_of_every_lesson_step(server, browser, model):
    from tinygpt_app.sections.lesson import STEPS

    with screen(browser, PROJECTOR) as context:
        page = open_page(context, f"{server}/Lesson?projector=1&model={model}")
        for number in range(1, len(STEPS) + 1):
            assert f"Step {number} of {len(STEPS)}" in main_text(page), (model, number)
            for name in ("Back", "Next"):
                assert within_first_screen(page, button_box(page, name)), (model, number, name)
            if number == 3:
                page.screenshot(path=str(ROOM_SHOTS / f"lesson-step3-{model}.png"))
            if number < len(STEPS):
                page.get_by_role("button", name="Next", exact=True).first.click()
                page.wait_for_function(
                    f"() => document.body.innerText.includes('Step {number + 1} of')")
                wait_idle(page)
