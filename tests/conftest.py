"""Fixtures shared by the test files; plain helpers are in tests/apptest_support.py."""

from __future__ import annotations

import pytest

from tests.apptest_support import FIXTURES


@pytest.fixture
def tiny_models(monkeypatch):
    """The app lists the models in tests/fixtures and opens tiny.npz by default.

    App test files use it for every test with `pytestmark = pytest.mark.usefixtures(...)`.
    """
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(FIXTURES))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
