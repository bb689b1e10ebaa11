"""End to end in a real browser: Playwright drives Debian's Chromium against `streamlit run`.

For every page, on a freshly started server: open it by its URL, check it is that page (the
navigation keeps today's paths), type a prompt, move the position slider, check the page re-ran
without an error box, and save a screenshot of it. A deep link as the very first request of a
fresh server shows the page with app.py's navigation (Home, three sections).

Screenshots go to screenshots/ (not tracked), or to $TINYGPT_SCREENSHOTS. To refresh the
ones the README shows:  TINYGPT_SCREENSHOTS=docs/screenshots pytest tests/test_browser.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from tinygpt_app import navigation

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("TINYGPT_SCREENSHOTS", ROOT / "screenshots")).resolve()
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
PROMPT = "JULIET:\nO Romeo, Romeo, wherefore art thou"

sync_api = pytest.importorskip("playwright.sync_api", reason="the python package playwright "
                               "is not installed (pip install playwright)")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium is missing (apt-get install chromium chromium-driver)",
                allow_module_level=True)


def page_paths() -> list[str]:
    """URL path of every page: '' for the home page, 'pages/4_Residual_stream.py' ->
    'Residual_stream' (the paths links have always used)."""
    return ["", *(navigation.url_path(f) for f in navigation.PAGE_FILES)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def models_env() -> dict[str, str]:
    """The shipped model when it is there (the screenshots should show it), else the fixture."""
    env = dict(os.environ)
    if not any((ROOT / "models").glob("*.npz")):
        env["TINYGPT_MODELS_DIR"] = str(ROOT / "tests" / "fixtures")
        env["TINYGPT_DEFAULT_MODEL"] = "tiny.npz"
    return env


@pytest.fixture(scope="module")
def server():
    with serve() as url:
        yield url


@contextmanager
def serve():
    """A fresh `streamlit run app.py` on a free loopback port; its URL while the block runs."""
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
           "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=models_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                pytest.fail(f"streamlit did not start: {err[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield b
        b.close()


def wait_idle(page, timeout: float = 90_000) -> None:
    """Wait until the script has re-run and the charts have been drawn."""
    page.wait_for_timeout(300)  # let a rerun that was just triggered start
    page.wait_for_selector(IDLE, timeout=timeout)
    # charts show a skeleton until Plotly's code has loaded, then draw into .main-svg
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stMain'] [data-testid='stSkeleton']\")",
        timeout=timeout,
    )
    charts = page.locator("[data-testid='stPlotlyChart']")
    for i in range(charts.count()):
        charts.nth(i).locator(".main-svg").first.wait_for(state="attached", timeout=timeout)


def assert_is_page(page, path: str) -> None:
    """The link opened its own page (an unknown path would fall back to Home)."""
    title = page.title()
    if path:
        assert title.startswith(path.replace("_", " ")), (path, title)
    else:
        assert title.startswith("tinygpt:"), title
    assert urllib.parse.urlparse(page.url).path.strip("/") == path


def sidebar_navigation(page) -> str:
    return page.locator("[data-testid='stSidebarNav']").inner_text()


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def assert_no_error(page, where: str) -> None:
    assert page.locator("[data-testid='stException']").count() == 0, f"exception on {where}"
    errors = page.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, f"error on {where}: {errors.first.inner_text()}"


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
        box = page.locator("[data-testid='stSidebar'] textarea").first
        box.fill(PROMPT)
        box.press("Control+Enter")
        page.wait_for_function(
            "p => new URLSearchParams(location.search).get('prompt') === p", arg=PROMPT,
            timeout=60_000,
        )
        wait_idle(page)
        assert_no_error(page, f"/{path} after typing")
        if path != "Training":  # the training page does not depend on the prompt
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
    with serve() as url:
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


def url_param(page, key: str) -> str | None:
    return page.evaluate(f"() => new URLSearchParams(location.search).get('{key}')")


def wait_for_param(page, key: str, test: str) -> None:
    """Wait until the link's `key` passes `test` (JavaScript on its value `v`), then redrawn."""
    page.wait_for_function(
        f"() => (v => {test})(new URLSearchParams(location.search).get('{key}'))",
        timeout=60_000)
    wait_idle(page)


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
        steps.fill("20")
        steps.press("Enter")
        page.get_by_role("button", name="Start training").click()
        page.get_by_text("is ready").wait_for(timeout=120_000)
        wait_idle(page)
        assert_no_error(page, "training page after training")
        page.get_by_role("button", name="Use it now").click()
        wait_for_param(page, "model", "v.startsWith('session:')")
        sidebar = page.locator("[data-testid='stSidebar']").inner_text()
        assert "d = 64" in sidebar, "the sidebar does not describe the trained model (d = 64)"
        page.screenshot(path=str(TOUR / "training.png"))
