"""Projector mode in a real browser (issue 17): at a beamer's 1280×720 the link's ?projector=1
collapses the sidebar, enlarges the type and the chart fonts; the sidebar's toggle puts it in
the link. Screenshots of two pages go to screenshots/devices/ (or $TINYGPT_SCREENSHOTS/devices/).
"""

from __future__ import annotations

import pytest

from tests.e2e.browser_support import (
    SHOTS,
    assert_no_error,
    skip_without_a_browser,
    url_param,
    wait_for_param,
    wait_idle,
)
from tinygpt_app.kit.projector import PROJECTOR_CSS, PROJECTOR_SELECTORS

pytestmark = pytest.mark.browser

skip_without_a_browser()

PROJECTOR = {"width": 1280, "height": 720}
DEVICE_SHOTS = SHOTS / "devices"
PAGES = {"Lesson-step-8": "Lesson?lesson_step=8", "Attention": "Attention"}

MEASURE_JS = """() => {
    const sidebar = document.querySelector("[data-testid='stSidebar']");
    const tick = document.querySelector("[data-testid='stPlotlyChart'] .xtick text");
    const body = document.querySelector("[data-testid='stMain'] [data-testid='stMarkdown'] p");
    return {sidebar_collapsed: sidebar ? sidebar.dataset.collapsed : null,
            root_font: parseFloat(getComputedStyle(document.documentElement).fontSize),
            body_font: body ? parseFloat(getComputedStyle(body).fontSize) : null,
            tick_font: tick ? parseFloat(tick.style.fontSize) : null};
}"""


def measure(browser, url: str, shot: str | None = None) -> dict:
    page = browser.new_page(viewport=PROJECTOR)
    try:
        page.goto(url, timeout=60_000)
        wait_idle(page)
        assert_no_error(page, url)
        if shot:
            DEVICE_SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(DEVICE_SHOTS / f"{shot}.png"))
        return page.evaluate(MEASURE_JS)
    finally:
        page.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_projector_mode_from_the_link(server, browser, name):
    sep = "&" if "?" in PAGES[name] else "?"
    normal = measure(browser, f"{server}/{PAGES[name]}")
    projected = measure(browser, f"{server}/{PAGES[name]}{sep}projector=1",
                        shot=f"{name}-projector-mode")
    assert normal["sidebar_collapsed"] == "false"
    assert projected["sidebar_collapsed"] == "true"  # the page gets the whole width
    assert projected["root_font"] > normal["root_font"]
    assert projected["body_font"] >= 1.3 * normal["body_font"]
    assert projected["tick_font"] >= 16 > normal["tick_font"]


def test_the_toggle_puts_projector_mode_in_the_link(server, browser):
    page = browser.new_page(viewport=PROJECTOR)
    try:
        page.goto(f"{server}/Lesson", timeout=60_000)
        wait_idle(page)
        before = page.evaluate(MEASURE_JS)
        page.locator("[data-testid='stSidebar'] [data-testid='stCheckbox']",
                     has_text="Projector mode").click()
        wait_for_param(page, "projector", "v === '1'")
        assert_no_error(page, "/Lesson after the toggle")
        after = page.evaluate(MEASURE_JS)
        assert after["root_font"] > before["root_font"]
        assert after["tick_font"] >= 16
        assert url_param(page, "projector") == "1"
    finally:
        page.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_every_streamlit_selector_of_the_style_sheet_matches(server, browser, name):
    """The projector style targets Streamlit's data-testid names (streamlit_internals): a
    rename upstream would leave the style sheet silently doing nothing; here it fails."""
    sep = "&" if "?" in PAGES[name] else "?"
    page = browser.new_page(viewport=PROJECTOR)
    try:
        page.goto(f"{server}/{PAGES[name]}{sep}projector=1", timeout=60_000)
        wait_idle(page)
        assert_no_error(page, name)
        for selector in PROJECTOR_SELECTORS:
            assert selector in PROJECTOR_CSS  # the list is the style sheet's
            assert page.locator(selector).count() > 0, f"{selector} matches nothing on {name}"
    finally:
        page.close()
