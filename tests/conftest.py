"""Fixtures shared by the test files; plain helpers are in tests/apptest_support.py."""

from __future__ import annotations

import socket

import pytest

from tests.apptest_support import FIXTURES


@pytest.fixture
def tiny_models(monkeypatch):
    """The app lists the models in tests/fixtures and opens tiny.npz by default.

    App test files use it for every test with `pytestmark = pytest.mark.usefixtures(...)`.
    """
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(FIXTURES))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection or resolve a name fails loudly."""
    def refuse(*args, **kwargs):
        raise OSError(f"network access attempted: {args[:2]}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    with pytest.raises(OSError, match="network access attempted"):  # the block works
        socket.create_connection(("127.0.0.1", 9))
