"""The fixtures most browser tests share: one real app server and one headless Chromium per
module. A module that needs a server of its own (another script, other settings) defines its own
`server`, which takes precedence over this one."""

from __future__ import annotations

import pytest

from tests.e2e.browser_support import chromium, streamlit_server


@pytest.fixture(scope="module")
def server():
    """`streamlit run app.py` on a free loopback port, the shipped model; its base URL."""
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's tests (each test opens its own pages)."""
    with chromium() as b:
        yield b
