"""The first minutes of a lesson in a real room (issue 25), in Chromium: a desktop (1440x900),
a projector (1280x720, projector mode) and a phone (390x844 with a mobile user agent and
touch, not only a small window).

- the prompt box is the first thing in the sidebar, within the first screen, with a visible
  Apply button (a phone has no Ctrl+Enter);
- choosing a page in the app's menu closes the sidebar on a phone and on the projector: one tap;
- the Class page's join link and QR code carry TINYGPT_PUBLIC_URL; a server students cannot
  reach says so beside its loopback link;
- the teacher link is not in the page until asked for, and never in projector mode;
- after a reload, a teacher and a student are back in the class in one click each.

Screenshots go to screenshots/lesson-room/ (or $TINYGPT_SCREENSHOTS/lesson-room/).
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import pytest

from tests.e2e.browser_support import (
    EXPAND,
    MENU,
    PHONE_UA,
    SHOTS,
    assert_no_error,
    skip_without_a_browser,
    streamlit_server,
    wait_idle,
)

pytestmark = pytest.mark.browser

skip_without_a_browser()

PUBLIC = "https://tinygpt.school.example/room"
SCREENS = {
    "desktop": ({"viewport": {"width": 1440, "height": 900}}, ""),
    "projector": ({"viewport": {"width": 1280, "height": 720}}, "?projector=1"),
    "phone": ({"viewport": {"width": 390, "height": 844}, "user_agent": PHONE_UA,
               "is_mobile": True, "has_touch": True, "device_scale_factor": 2}, ""),
}
ROOM_SHOTS = SHOTS / "lesson-room"
CLOSE = "[data-testid='stSidebarCollapseButton']"
PROMPT_BOX = "[data-testid='stSidebar'] textarea"
CODE_BLOCKS = "[data-testid='stMain'] [data-testid='stCode']"


def SERVER(folder):  # noqa: N802 - read by tests/e2e/conftest.py's server
    """A server whose public address is set, with a fresh class store."""
    return {"env": {"TINYGPT_DATA_DIR": str(folder), "TINYGPT_PUBLIC_URL": PUBLIC},
            "timeout": 180}


@contextmanager
def screen(browser, name: str):
    """A new browser profile (its own storage) on the screen `name`; closed afterwards."""
    options, _ = SCREENS[name]
    context = browser.new_context(**options)
    context.set_default_timeout(120_000)
    try:
        yield context
    finally:
        context.close()


def open_page(context, server: str, path: str, name: str):
    page = context.new_page()
    page.goto(f"{server}/{path}{SCREENS[name][1]}", timeout=120_000)
    wait_idle(page, timeout=300_000)
    return page


def open_sidebar(page) -> None:
    if page.locator(EXPAND).count():
        page.locator(EXPAND).first.click()
        page.locator(CLOSE).first.wait_for()


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


@pytest.mark.parametrize("name", list(SCREENS))
def test_the_prompt_box_comes_first_within_the_first_screen(server, browser, name):
    with screen(browser, name) as context:
        page = open_page(context, server, "", name)
        open_sidebar(page)
        box = page.locator(PROMPT_BOX).first.bounding_box()
        height = SCREENS[name][0]["viewport"]["height"]
        assert box and box["y"] + box["height"] <= height, (name, box)
        menu = page.locator(MENU).bounding_box()
        assert menu is None or box["y"] < menu["y"]  # before the page menu
        apply = page.get_by_role("button", name=re.compile("Apply")).first.bounding_box()
        assert apply and apply["y"] + apply["height"] <= height, (name, apply)
        ROOM_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ROOM_SHOTS / f"prompt-first-{name}.png"))


def test_apply_runs_the_prompt_without_a_keyboard(server, browser):
    with screen(browser, "phone") as context:
        page = open_page(context, server, "", "phone")
        open_sidebar(page)
        page.locator(PROMPT_BOX).first.fill("It is the east")
        page.get_by_role("button", name=re.compile("Apply")).first.tap()
        page.wait_for_function(
            "() => new URLSearchParams(location.search).get('prompt') === 'It is the east'")
        wait_idle(page)
        assert_no_error(page, "Apply")


@pytest.mark.parametrize("name", ["phone", "projector"])
def test_choosing_a_page_closes_the_sidebar(server, browser, name):
    with screen(browser, name) as context:
        page = open_page(context, server, "", name)
        open_sidebar(page)
        link = page.locator(f"{MENU} a", has_text="Attention").first
        link.tap() if name == "phone" else link.click()  # the one tap
        page.wait_for_url(re.compile(r"/Attention"))
        wait_idle(page, timeout=300_000)  # a loaded 2-core machine: the page's own run
        page.locator(EXPAND).first.wait_for(timeout=10_000)  # closed, nothing else to tap
        assert page.locator(CLOSE).count() == 0
        assert_no_error(page, f"Attention on the {name}")


def test_on_a_desktop_the_sidebar_stays_open(server, browser):
    with screen(browser, "desktop") as context:
        page = open_page(context, server, "", "desktop")
        page.locator(f"{MENU} a", has_text="Attention").first.click()
        page.wait_for_url(re.compile(r"/Attention"))
        wait_idle(page, timeout=300_000)  # a loaded 2-core machine: the page's own run
        assert page.locator(CLOSE).count() == 1


def start_class(page) -> str:
    page.get_by_role("button", name="Start a class").click()
    wait_idle(page)
    return page.locator(CODE_BLOCKS).first.inner_text().strip()


def test_the_class_links_and_the_teacher_link(server, browser):
    with screen(browser, "desktop") as context:
        page = open_page(context, server, "Class", "desktop")
        code = start_class(page)
        text = main_text(page)
        assert f"{PUBLIC}/Class?class={code}" in text
        assert "teacher=" not in text and "127.0.0.1" not in text
        page.get_by_role("button", name="Show my teacher link").click()
        wait_idle(page)
        assert f"{PUBLIC}/Class?class={code}&teacher=" in main_text(page)
        copy = page.locator(CODE_BLOCKS).last.locator("button")
        assert copy.count() >= 1  # st.code's copy button
        page.get_by_role("button", name="Hide my teacher link").click()
        wait_idle(page)
        assert "teacher=" not in main_text(page)
        ROOM_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ROOM_SHOTS / "class-desktop.png"))


def test_projector_mode_never_shows_the_teacher_link(server, browser):
    with screen(browser, "projector") as context:
        page = open_page(context, server, "Class", "projector")
        start_class(page)
        text = main_text(page)
        assert "teacher=" not in text and "not shown in projector mode" in text
        assert page.get_by_role("button", name="Show my teacher link").count() == 0
        qr = page.locator("[data-testid='stMain'] [data-testid='stImage']").first.bounding_box()
        for label in ("Ask the class", "Start a class", "End the class"):
            for button in page.get_by_role("button", name=re.compile(label)).all():
                other = button.bounding_box()
                assert not other or not overlaps(qr, other), label
        page.screenshot(path=str(ROOM_SHOTS / "class-projector.png"))


def overlaps(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
            and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"])


def test_after_a_reload_teacher_and_student_are_back_in_one_click(server, browser):
    with screen(browser, "desktop") as teaching, screen(browser, "phone") as phone:
        teacher = open_page(teaching, server, "Class", "desktop")
        code = start_class(teacher)
        student = open_page(phone, server, f"Class?class={code}", "phone")
        student.get_by_role("button", name="Join the class").tap()
        wait_idle(student)
        assert "Leave the class" in main_text(student) or \
            student.get_by_role("button", name="Explore on my own").count()

        teacher.reload()
        wait_idle(teacher, timeout=180_000)
        resume = teacher.get_by_role("button", name=f"Resume class {code}")
        resume.wait_for()
        assert "teacher=" not in main_text(teacher)
        resume.click()  # one click
        wait_idle(teacher)
        assert code in main_text(teacher)
        assert teacher.get_by_role("button", name="End the class").count() == 1

        student.reload()
        wait_idle(student, timeout=180_000)
        back = student.get_by_role("button", name=f"Back to class {code}")
        back.wait_for()
        back.tap()  # one tap
        wait_idle(student)
        student.get_by_role("button", name=re.compile("Explore on my own")).first.wait_for()
        assert_no_error(student, "back in the class")
        teacher.wait_for_function(
            "() => /1 connected · 1 following/.test(document.body.innerText)", timeout=60_000)


def test_a_server_phones_cannot_reach_says_so(browser, tmp_path):
    """No public address, the server bound to 127.0.0.1 only: the loopback link comes with
    the warning, never alone."""
    env = {"TINYGPT_DATA_DIR": str(tmp_path), "TINYGPT_PUBLIC_URL": ""}
    with streamlit_server(timeout=180, env=env) as url:
        with screen(browser, "desktop") as context:
            page = open_page(context, url, "Class", "desktop")
            code = start_class(page)
            text = main_text(page)
            assert "127.0.0.1" in text and f"Class?class={code}" in text
            assert "Phones cannot open this link" in text
