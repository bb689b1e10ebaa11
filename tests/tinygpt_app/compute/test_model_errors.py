"""A model file that fails (issue 12, findings 4 and 10): it is remembered, so picking it again
costs nothing until it changes, and no error box anywhere shows a server path."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute.models caches with streamlit")

from tests.apptest_support import ROOT, TINY, open_page  # noqa: E402
from tinygpt_app.compute import models  # noqa: E402


@pytest.fixture
def models_folder(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(TINY, folder / "tiny.npz")
    (folder / "broken.npz").write_bytes(b"PK\x03\x04 not really a zip" * 10)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(folder))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    return folder


def test_a_file_that_failed_is_not_read_again_until_it_changes(models_folder, monkeypatch):
    reads = []
    real_load = models.load
    monkeypatch.setattr(models, "load", lambda *a, **k: reads.append(a) or real_load(*a, **k))
    for _ in range(3):
        with pytest.raises(models.ModelLoadError, match="broken.npz") as err:
            models.load_model("broken.npz")
        assert str(models_folder) not in str(err.value)
    assert len(reads) == 1  # picked three times, read once
    (models_folder / "broken.npz").write_bytes(b"still broken, but another file")
    with pytest.raises(models.ModelLoadError):
        models.load_model("broken.npz")
    assert len(reads) == 2  # a changed file is tried again


@pytest.mark.parametrize("error", [ValueError("invalid literal for int()"), IndexError("x")])
def test_any_error_from_a_file_is_remembered_too(models_folder, monkeypatch, error):
    """A loader bug that raises something other than CheckpointError (a plain ValueError
    from int('\u00b2') did) must not make every page run read the file again."""
    shutil.copy(TINY, models_folder / "odd.npz")
    reads = []

    def failing_load(*args, **kwargs):
        reads.append(args)
        raise error

    monkeypatch.setattr(models, "load", failing_load)
    for _ in range(3):
        with pytest.raises(models.ModelLoadError, match=f"odd.npz.*{type(error).__name__}"):
            models.load_model("odd.npz")
    assert len(reads) == 1


def page_text(at) -> str:
    """Everything the page sent to the browser, as text (every element's protobuf)."""
    def walk(node):
        yield node
        for child in getattr(node, "children", {}).values():
            yield from walk(child)

    return "\n".join(str(node.proto) for node in walk(at._tree) if hasattr(node, "proto"))


def assert_no_server_path(at, *folders) -> None:
    text = page_text(at)
    for folder in (ROOT, *folders):
        assert str(folder) not in text, f"{folder} shown on the page"


def test_picking_a_broken_model_shows_a_short_message_without_paths(models_folder):
    at = open_page("app.py", prompt="Hello")
    at.sidebar.selectbox[0].set_value("broken.npz").run()
    assert at.sidebar.selectbox[0].value == "tiny.npz"  # the previous model stays
    assert any("broken.npz: not a zip" in e.value.replace("\\", "") for e in at.error)
    assert_no_server_path(at, models_folder, models_folder.parent)


def test_after_a_broken_pick_the_model_in_use_stays_and_the_next_click_clears_the_error(
        models_folder):
    """Picking a broken file says so once, with the model still in use; picking the good one
    again (unchanged in the menu, so no change event) or any other click shows no error."""
    at = open_page("pages/6_Logits.py", prompt="Hello")
    menu = next(box for box in at.selectbox if box.key == "sidebar.model")
    menu.set_value("broken.npz").run()
    assert len(at.error) == 1 and "still tiny.npz" in at.error[0].value.replace("\\", "")
    assert at.query_params["model"] == "tiny.npz"
    menu = next(box for box in at.selectbox if box.key == "sidebar.model")
    menu.set_value("tiny.npz").run()
    assert not at.error and not at.exception


def test_a_broken_default_model_shows_no_server_path(models_folder, monkeypatch):
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "broken.npz")
    os.remove(models_folder / "tiny.npz")
    at = open_page("pages/2_Tokens_and_embeddings.py", prompt="Hello")
    assert at.error and not at.exception
    assert_no_server_path(at, models_folder, models_folder.parent)


def test_a_missing_models_folder_shows_no_server_path(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere" / "models"
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(missing))
    at = open_page("app.py", prompt="Hello")
    assert at.error and not at.exception
    assert_no_server_path(at, missing, tmp_path)


@pytest.mark.parametrize(("name", "value"), [("TINYGPT_MAX_TRAININGS", "abc"),
                                             ("TINYGPT_SWITCH_INTERVAL_MS", "0"),
                                             ("TINYGPT_TRACE_CACHE_MB", "inf")])
def test_a_bad_environment_value_breaks_no_page_and_shows_no_path(models_folder, monkeypatch,
                                                                   name, value):
    monkeypatch.setenv(name, value)
    at = open_page("pages/12_Training.py", prompt="Hello")
    assert not at.exception and not at.error
    assert_no_server_path(at, models_folder)


def test_an_error_inside_a_page_shows_no_server_path(models_folder, monkeypatch):
    """guard(): an unexpected exception's message loses its absolute paths."""
    from tinygpt_app.kit.plain_text import without_paths

    message = f"[Errno 2] No such file or directory: '{models_folder / 'x' / 'y.npz'}'"
    assert without_paths(message) == "[Errno 2] No such file or directory: 'y.npz'"


def test_a_load_past_its_budget_is_refused_remembered_and_holds_nobody(models_folder,
                                                                       monkeypatch):
    """Issue 45: a tokenizer whose warm-up never ended held the server. A load runs in a
    thread of its own with a time budget: past it the model is refused (the message names the
    file), remembered until the file changes, and other work goes on while it loads."""
    import threading
    import time

    release = threading.Event()
    reads = []

    def slow(path):
        reads.append(path)
        release.wait(30)  # a warm-up that does not end (until the test lets it)
        raise RuntimeError("never used")

    monkeypatch.setattr(models, "_read_model", slow)
    monkeypatch.setenv("TINYGPT_MODEL_LOAD_SECONDS", "0.5")
    other = []
    worker = threading.Thread(target=lambda: other.extend(sum(range(10**5)) for _ in range(5)))
    start = time.monotonic()
    worker.start()
    try:
        with pytest.raises(models.ModelLoadError, match=r"tiny.npz: loading it took longer"):
            models.load_model("tiny.npz")
        assert time.monotonic() - start < 5
        worker.join(5)
        assert len(other) == 5  # other work was served meanwhile
        with pytest.raises(models.ModelLoadError, match="took longer"):
            models.load_model("tiny.npz")  # remembered: not loaded again
        assert len(reads) == 1
    finally:
        release.set()


def test_loads_at_once_are_bounded_and_busy_loaders_are_not_held_against_a_file(monkeypatch):
    import threading

    release = threading.Event()
    started = []
    monkeypatch.setattr(models, "_loaders", threading.BoundedSemaphore(1))

    def slow(path):
        started.append(path)
        release.wait(30)
        return path

    try:
        with pytest.raises(models.LoadTooSlow):
            models.load_within(slow, "a", 0.2)
        with pytest.raises(models.LoadersBusy):
            models.load_within(slow, "b", 0.2)  # the late one still holds the only loader
    finally:
        release.set()
    for _ in range(100):  # the late load ends and gives its loader back
        try:
            assert models.load_within(lambda p: p, "c", 1.0) == "c"
            break
        except models.LoadersBusy:
            threading.Event().wait(0.05)
    assert started == ["a"]
