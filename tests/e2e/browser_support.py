"""What the browser tests share: the list of pages, a real `streamlit run` on loopback, Debian's
Chromium under Playwright, and waiting for a page to be drawn.

Imported as a module (`from tests.e2e.browser_support import ...`). Playwright is imported only
inside chromium(), so a test file can import this and still skip cleanly without it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# --headless is Playwright's default; these are the flags the project's guide names
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SHOTS = Path(os.environ.get("TINYGPT_SCREENSHOTS", ROOT / "screenshots")).resolve()
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
MENU = ".st-key-page_menu"  # the sidebar's page menu (tinygpt_app.kit.frame.page_menu)
PROMPT = "JULIET:\nO Romeo, Romeo, wherefore art thou"
EXPAND = "[data-testid='stExpandSidebarButton']"  # the collapsed sidebar's open button
# Browser contexts of the room: the projected teacher screen and a student's phone
PHONE_UA = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 "
            "(KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1")
PROJECTOR = {"viewport": {"width": 1280, "height": 720}}
PHONE = {"viewport": {"width": 390, "height": 844}, "user_agent": PHONE_UA, "is_mobile": True,
         "has_touch": True}


def skip_without_a_browser() -> None:
    """Skip the calling test module when Playwright or Debian's Chromium is missing."""
    pytest.importorskip("playwright.sync_api", reason="the python package playwright is not "
                        "installed (pip install playwright)")
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is missing (apt-get install chromium chromium-driver)",
                    allow_module_level=True)


def page_paths() -> list[str]:
    """URL path of every page: '' for the home page, 'pages/5_Residual_stream.py' ->
    'Residual_stream' (the paths links have always used), from the app's one page list."""
    from tinygpt_app.kit import navigation

    return ["", *(navigation.url_path(f) for f in navigation.PAGE_FILES)]


def page_name(path: str) -> str:
    """A page's name for files and reports: its URL path, 'Home' for the front page."""
    return path or "Home"


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


@contextmanager
def streamlit_server(timeout: float = 60, script: Path = ROOT / "app.py",
                     env: dict[str, str] | None = None,
                     log: Path | None = None, launch: bool = False) -> Iterator[str]:
    """`streamlit run app.py` (or `script`; with launch=True the app's own launcher,
    `python -m tinygpt_app.launch`, as deploy/ starts it) on a free loopback port, with `env`
    added to its environment (and its log written to `log`); yields its URL and stops it
    afterwards."""
    port = free_port()
    start = ["-m", "tinygpt_app.launch"] if launch else ["-m", "streamlit", "run", str(script)]
    cmd = [sys.executable, *start,
           "--server.headless", "true", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    log_file = open(log, "wb") if log else None  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**models_env(), **(env or {})},
                            stdout=log_file or subprocess.DEVNULL,
                            stderr=subprocess.STDOUT if log_file else subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else \
                    (log.read_text(errors="replace") if log else "")
                pytest.fail(f"streamlit did not start: {err[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log_file:
            log_file.close()


@contextmanager
def chromium() -> Iterator[object]:
    """Debian's Chromium under Playwright (headless); closed afterwards."""
    from playwright.sync_api import sync_playwright  # here: see the module docstring

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


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


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def assert_no_error(page, where: str) -> None:
    assert page.locator("[data-testid='stException']").count() == 0, f"exception on {where}"
    errors = page.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, f"error on {where}: {errors.first.inner_text()}"


def url_param(page, key: str) -> str | None:
    return page.evaluate(f"() => new URLSearchParams(location.search).get('{key}')")


def wait_for_param(page, key: str, test: str) -> None:
    """Wait until the link's `key` passes `test` (JavaScript on its value `v`), then redrawn."""
    page.wait_for_function(
        f"() => (v => {test})(new URLSearchParams(location.search).get('{key}'))",
        timeout=60_000)
    wait_idle(page)


def commit_prompt(page, prompt: str = PROMPT) -> None:
    """Type `prompt` in the sidebar's text area, commit it (Ctrl+Enter) and wait for the rerun."""
    box = page.locator("[data-testid='stSidebar'] textarea").first
    box.fill(prompt)
    box.press("Control+Enter")
    page.wait_for_function(
        "p => new URLSearchParams(location.search).get('prompt') === p", arg=prompt,
        timeout=60_000,
    )
    wait_idle(page)


TITLE_OF_PATH = {"LayerNorm": "Normalisation"}  # the page kept its URL when its title grew


def assert_is_page(page, path: str) -> None:
    """The link opened its own page (an unknown path would fall back to Home)."""
    title = page.title()
    if path:
        expected = TITLE_OF_PATH.get(path, path.replace("_", " "))
        assert expected.lower() in title.lower(), (path, title)  # "Live class"
    else:
        assert title.startswith("tinygpt:"), title
    assert urllib.parse.urlparse(page.url).path.strip("/") == path


def sidebar_navigation(page) -> str:
    """The sidebar menu's text, once its links are drawn (a page run on its own, before the
    frame's rerun through app.py, draws the menu's box without links)."""
    page.locator(f"{MENU} a").first.wait_for(timeout=30_000)
    return page.locator(MENU).inner_text()
