"""The browser tests' two fixtures: one real app server per module and one headless Chromium
for the whole run.

`server` runs `streamlit run app.py` with the shipped model. A module that needs other settings
says so in a module-level SERVER: a function of a fresh folder (for a class store, say) that
returns streamlit_server's arguments (`script`, `env`, `timeout`). A test that needs a fresh
server of its own (the first request of a new process) starts it in the test."""

from __future__ import annotations

import pytest

from tests.e2e.browser_support import chromium, streamlit_server


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """`streamlit run` on a free loopback port, with the module's SERVER settings; its URL."""
    settings = getattr(request.module, "SERVER", None)
    options = settings(tmp_path_factory.mktemp("server")) if settings else {}
    with streamlit_server(**options) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for every browser test (each test opens its own pages)."""
    with chromium() as b:
        yield b
