"""The browser token in Chromium (issue 25): the component keeps a random token in the
browser's localStorage and the server learns it on each run; the same browser keeps it across
a reload, a fresh browser profile gets another one. Also: the component takes no room."""

from __future__ import annotations

import re

import pytest

from tests.e2e.browser_support import (
    IDLE,
    ROOT,
    skip_without_a_browser,
)
from tinygpt_app.kit import browser_token

pytestmark = pytest.mark.browser

skip_without_a_browser()

APP = ROOT / "tests" / "e2e" / "token_app.py"
SAID = re.compile(r"server token: (\S+)")


def SERVER(folder):  # noqa: N802 - read by tests/e2e/conftest.py's server
    return {"script": APP}


def server_token(page) -> str:
    """What the server says it knows, once the browser's report has come back."""
    page.wait_for_function(
        "() => /server token: [A-Za-z0-9_-]{43}/.test(document.body.innerText)",
        timeout=60_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    return SAID.search(page.locator("[data-testid='stMain']").inner_text()).group(1)


def stored_token(page) -> str | None:
    return page.evaluate(f"() => localStorage.getItem('{browser_token.STORAGE_NAME}')")


def test_the_same_browser_keeps_its_token_and_another_gets_its_own(server, browser):
    first = browser.new_context()
    try:
        page = first.new_page()
        page.goto(server)
        token = server_token(page)
        assert browser_token.valid(token)
        assert stored_token(page) == token  # the server knows the browser's own token
        page.reload()
        assert server_token(page) == token  # a new session, the same browser
    finally:
        first.close()
    fresh = browser.new_context()
    try:
        page = fresh.new_page()
        page.goto(server)
        assert server_token(page) not in (token, None)
    finally:
        fresh.close()


def test_a_damaged_stored_token_is_replaced_not_sent(server, browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server)
        server_token(page)
        page.evaluate(f"() => localStorage.setItem('{browser_token.STORAGE_NAME}', "
                      "'<b>not a token</b>')")
        page.reload()
        token = server_token(page)
        assert browser_token.valid(token) and stored_token(page) == token
    finally:
        context.close()


def test_it_takes_no_room(server, browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    try:
        page = context.new_page()
        page.goto(server)
        server_token(page)
        box = page.locator(f".st-key-{browser_token.WIDGET_KEY.replace('.', '-')}")
        assert box.count() == 1
        assert box.evaluate("e => getComputedStyle(e).display") == "none"
    finally:
        context.close()
