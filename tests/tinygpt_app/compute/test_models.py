"""Model discovery never leaves the models folder: sidecars, stray files, traversal and
symlinks are refused."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute.models caches with streamlit")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt_app.compute.models import (  # noqa: E402
    available_models,
    default_model_id,
    model_label,
    resolve_model_path,
)


def test_model_discovery_stays_inside_the_models_folder(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, inside / "a.npz")
    (inside / "gpt2ish").mkdir()
    (inside / "gpt2ish" / "config.json").write_text("{}")
    (inside / "not_a_model").mkdir()
    (inside / "notes.txt").write_text("x")
    for sidecar in ("a.optim.npz", "a.ids.npz", "a.tmp.npz"):  # written by the trainer
        (inside / sidecar).write_bytes(b"")
    shutil.copy(TINY, tmp_path / "outside.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    monkeypatch.delenv("TINYGPT_DEFAULT_MODEL", raising=False)
    assert available_models() == ["a.npz", "gpt2ish"]
    assert default_model_id() == "a.npz"
    assert resolve_model_path("a.npz") == (inside / "a.npz").resolve()
    for bad in ("../outside.npz", str(tmp_path / "outside.npz"), "notes.txt", "not_a_model",
                "", ".", "gpt2ish/../a.npz", "a.optim.npz"):
        with pytest.raises(ValueError):
            resolve_model_path(bad)


def test_symlink_out_of_the_models_folder_is_refused(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, tmp_path / "secret.npz")
    (inside / "link.npz").symlink_to(tmp_path / "secret.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    with pytest.raises(ValueError):
        resolve_model_path("link.npz")


def test_session_models_are_labelled_as_trained_here():
    assert model_label("session:my-model #a1b2c3") == "my-model #a1b2c3 (trained here)"
    assert model_label("shakespeare.npz") == "shakespeare.npz"


def test_a_sessions_trained_models_are_bounded_in_bytes():
    """newest_within keeps the newest models whose weights fit the budget, at most `most`."""
    from tinygpt_app.compute.models import newest_within

    class Weights:
        def __init__(self, n: int) -> None:
            self.n = n

        def parameters(self):
            return {"w": np.zeros(self.n, dtype=np.uint8)}

    models = {f"m{i}": (Weights(n), None) for i, n in enumerate([400, 300, 200, 100])}
    assert list(newest_within(models, 3, 10_000)) == ["m1", "m2", "m3"]  # by count
    assert list(newest_within(models, 3, 350)) == ["m2", "m3"]  # by bytes, oldest out
    assert list(newest_within({"big": (Weights(5_000), None)}, 3, 10)) == ["big"]


def test_gguf_files_are_models_and_their_float32_copies_are_not(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    (inside / ".tinygpt-cache" / "0123.gguf-f32-v1").mkdir(parents=True)
    (inside / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    (inside / "SmolLM2-135M-Instruct.Q4_1.card.json").write_text("{}")
    (inside / ".hidden.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    assert available_models() == ["SmolLM2-135M-Instruct.Q4_1.gguf"]
    for bad in (".tinygpt-cache", ".hidden.gguf", "SmolLM2-135M-Instruct.Q4_1.card.json"):
        with pytest.raises(ValueError):
            resolve_model_path(bad)
