"""End to end in a real browser: Playwright drives Debian's Chromium against `streamlit run`.

For every page, on a freshly started server: open it by its URL, type a prompt, move the
position slider, check the page re-ran without an error box, and save a screenshot of it.

Screenshots go to screenshots/ (not tracked), or to $TINYGPT_SCREENSHOTS. To refresh the
ones the README shows:  TINYGPT_SCREENSHOTS=docs/screenshots pytest tests/test_browser.py
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from tests.e2e.browser_support import (
    PROMPT,
    SHOTS,
    assert_is_page,
    assert_no_error,
    commit_prompt,
    main_text,
    page_paths,
    sidebar_navigation,
    skip_without_a_browser,
    streamlit_server,
    url_param,
    wait_for_param,
    wait_idle,
)
from tinygpt_app.kit import navigation

pytestmark = pytest.mark.browser

skip_without_a_browser()


@pytest.mark.parametrize("path", page_paths())
def test_page_in_a_browser(server, browser, path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 2000})
    try:
        page.goto(f"{server}/{path}", timeout=60_000)  # a deep link on a fresh session
        wait_idle(page)
        assert_no_error(page, f"/{path}")
        assert_is_page(page, path)

        # type a prompt in the shared sidebar; Ctrl+Enter commits the text area
        before = main_text(page)
        commit_prompt(page, PROMPT)
        assert_no_error(page, f"/{path} after typing")
        if path not in ("Training", "Class", "Chat", "Interventions"):  # their own prompts
            assert main_text(page) != before, "the page did not change with the prompt"

        # move a control: the position slider, to the first token
        slider = page.locator("[data-testid='stSidebar'] [data-testid='stSlider'] "
                              "input[type='range']")
        if slider.count():  # every page with the shared sidebar and a prompt has it
            slider.first.focus()
            slider.first.press("Home")
            wait_for_param(page, "pos", "v === '0'")
            assert_no_error(page, f"/{path} after moving the position")
            value = page.locator("[data-testid='stSidebar'] [data-testid='stSliderThumbValue']")
            assert value.first.inner_text().startswith("0:"), "the slider did not move"
        if path == "What_if":  # flip a switch, so the screenshot shows a difference
            page.get_by_text("No causal mask", exact=True).click()
            wait_idle(page)
            assert_no_error(page, "/What_if with a switch on")
            assert "All switches are off" not in main_text(page)
        page.screenshot(path=str(SHOTS / f"{path or 'Home'}.png"))
    finally:
        page.close()


def test_a_deep_link_is_the_first_request_of_a_fresh_server(browser):
    """Before app.py has run once, Streamlit would serve /Softmax_and_sampling from pages/ on
    its own; the page frame reruns it through app.py, so even this first visitor gets the
    page they asked for, with its link's controls, under the grouped navigation."""
    with streamlit_server() as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        try:
            page.goto(f"{url}/Softmax_and_sampling?temperature=0.7&top_p=0.5&seed=3",
                      timeout=60_000)
            wait_idle(page)
            assert_no_error(page, "the first deep link")
            assert_is_page(page, "Softmax_and_sampling")
            assert url_param(page, "temperature") == "0.7" and url_param(page, "seed") == "3"
            nav = sidebar_navigation(page)
            for entry in ("Home", *navigation.SECTIONS, "Softmax and sampling", "What if"):
                assert entry in nav, (entry, nav)
            assert "\napp\n" not in f"\n{nav}\n"  # not the pages/ folder's own list
        finally:
            page.close()


# ------------------------------------------------------------- controls, decoding, training

TOUR = SHOTS / "tour"


@contextmanager
def tour_page(browser, url: str):
    """A fresh page at `url`, drawn, for a tour screenshot; closed however the test ends."""
    TOUR.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 2000})
    try:
        page.goto(url, timeout=60_000)
        wait_idle(page)
        yield page
    finally:
        page.close()


def test_dragging_a_sampling_slider(server, browser):
    with tour_page(browser, f"{server}/Softmax_and_sampling?temperature=1&top_p=0.9") as page:
        assert_no_error(page, "softmax page")
        metric = page.locator("[data-testid='stMetricValue']").nth(1)
        before = metric.inner_text()
        slider = page.locator("[data-testid='stMain'] [data-testid='stSlider'] "
                              "input[type='range']").first  # the temperature
        slider.focus()
        for _ in range(6):  # six steps of 0.05 down: T = 0.7
            slider.press("ArrowLeft")
        wait_for_param(page, "temperature", "v !== '1'")
        assert_no_error(page, "softmax page after the slider")
        assert float(url_param(page, "temperature")) < 1.0
        assert metric.inner_text() != before, "the entropy did not change"
        page.screenshot(path=str(TOUR / "softmax_and_sampling.png"))


def test_stepping_a_generation(server, browser):
    with tour_page(browser, f"{server}/Decoding?new=12&strategy=sample&step=0") as page:
        assert_no_error(page, "decoding page")
        assert "Stopped" in main_text(page)
        page.get_by_role("button", name="next ▶").click()
        wait_for_param(page, "step", "v === '1'")
        assert_no_error(page, "decoding page after a step")
        assert "Step 1" in main_text(page)
        page.screenshot(path=str(TOUR / "decoding.png"))


def test_a_short_training(server, browser):
    with tour_page(browser, f"{server}/Training") as page:
        assert_no_error(page, "training page")
        steps = page.locator("[data-testid='stNumberInput'] input").first
        steps.fill("20")  # inside the form: sent with the click on Start, as a person does it
        page.get_by_role("button", name="Start training").click()
        page.get_by_text("is ready").wait_for(timeout=120_000)
        wait_idle(page)
        assert_no_error(page, "training page after training")
        page.get_by_role("button", name="Use it now").click()
        wait_for_param(page, "model", "v.startsWith('session:')")
        sidebar = page.locator("[data-testid='stSidebar']").inner_text()
        assert "d = 64" in sidebar, "the sidebar does not describe the trained model (d = 64)"
        page.screenshot(path=str(TOUR / "training.png"))
