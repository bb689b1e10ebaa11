"""The models a user may choose: the files of the models folder, and the ones trained here.

- Folder models: the direct entries of ``settings.models_dir()`` (``*.npz`` checkpoints,
  ``*.gguf`` files, and Hugging Face folders with a ``config.json``; hidden entries, such as
  the GGUF files' float32 copies in ``.tinygpt-cache/``, are never listed). Nothing outside
  that folder is ever opened. Each is loaded once per server (``st.cache_resource``) and
  again when its file changes.
- Session models: trained on the Training page, kept in this user's session only (in the slot
  kit.slots plugs in with `keep_session_models_in`).

A load cannot hold the server (issue 45: a tokenizer whose warm-up never ended stopped every
page run). It runs in a thread of its own, at most LOADS_AT_ONCE at a time, while the page
that asked waits outside the fair-share line (host().outside_the_line, on a class server: the
other students' runs go on) for at most settings.model_load_seconds(). Past that budget the model is
refused with a message naming the file, and remembered as refused until the file changes
(its mtime and size), like any file that failed to load. The late load goes on in its thread
(Python cannot stop a thread) but holds its place among LOADS_AT_ONCE until it ends, and what
it makes is dropped.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Protocol

import streamlit as st

from tinygpt.checkpoint.files import CheckpointError, load
from tinygpt.network.model import GPT
from tinygpt_app import settings
from tinygpt_app.compute.shared_cache import SharedCache
from tinygpt_app.host import host

# files the trainer writes next to a checkpoint (models/x.npz): not models themselves
SIDECARS = (".ids.npz", ".optim.npz", ".tmp.npz")
SESSION_PREFIX = "session:"  # ids of models trained in the browser: "session:name #a1b2c3"
MAX_SESSION_MODELS = 3  # per session; the oldest is forgotten first
SESSION_MODEL_BYTES = 32 * 2**20  # per session, their weights together: the oldest go first
#   (the Training page's largest model weighs about 2 MB; a session's memory stays bounded in
#   bytes whatever it trains: docs/class_limits.md)
# model files that failed to load, remembered server-wide: their short messages (the bound was
# 64 files before it was in bytes; a message and its key weigh under 1 KB)
FAILURE_BYTES = 64 * 2**10
LOADS_AT_ONCE = 2  # model loads running at once in the server, each in its own thread


class SessionStore(Protocol):
    """Where one session keeps its trained models (kit.slots.SESSION_MODELS)."""

    def get(self) -> dict: ...

    def set(self, value: dict) -> object: ...


class _NoSession:
    """Before kit plugs the session's slot in (a script outside the app): no trained models."""

    def get(self) -> dict:
        return {}

    def set(self, value: dict) -> object:
        raise RuntimeError("no session to keep a trained model in")


_session_store: SessionStore = _NoSession()


def keep_session_models_in(store: SessionStore) -> None:
    """Keep the models trained in a session in `store`: the kit's session slot (compute
    never touches Streamlit's session state itself)."""
    global _session_store
    _session_store = store


class ModelLoadError(Exception):
    """A listed model that cannot be used; the message is short and names no server path."""


# (path, version) -> message: a file that failed is not read again until it changes
_failures = SharedCache(FAILURE_BYTES)


def models_dir() -> Path:
    """The folder whose direct entries are the models a user may choose (set by the server),
    its real path: resolving costs a system call per folder of the path, so it is kept as
    the listing is (every page run asks)."""
    folder = settings.models_dir()
    return _recently(("resolved", str(folder)), folder.resolve)


LISTING_SECONDS = 1.0  # the folder is listed again (and files stat-ed) at most this often
LISTING_BYTES = 2**20  # the listings and versions kept: a few small entries per model file
# (what, args) -> answer, forgotten LISTING_SECONDS after it was found
_recent = SharedCache(LISTING_BYTES, ttl=LISTING_SECONDS)


def _recently(key: tuple, compute):
    """`compute()`, or its answer from less than LISTING_SECONDS ago: every page run asks for
    the listing and the model's version several times, and each answer walks the folder. A new
    or retrained file is seen within a second."""
    answer = _recent.get(key)
    if answer is None:
        answer = compute()
        _recent.put(key, answer)
    return answer


def available_models() -> list[str]:
    """Names of the entries directly inside models_dir(): *.npz and *.gguf files, and Hugging
    Face folders."""
    base = models_dir()
    return list(_recently(("listing", str(base)), lambda: _list_models(base)))


def _list_models(base: Path) -> tuple[str, ...]:
    if not base.is_dir():
        return ()
    names = []
    for entry in sorted(base.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix == ".npz" and not entry.name.endswith(SIDECARS):
            names.append(entry.name)
        elif entry.is_file() and entry.suffix.lower() == ".gguf":
            names.append(entry.name)
        elif entry.is_dir() and (entry / "config.json").is_file():
            names.append(entry.name)
    return tuple(names)


def default_model_id() -> str | None:
    """TINYGPT_DEFAULT_MODEL if present, else the shipped model, else the first one found."""
    models = available_models()
    for wanted in (settings.default_model_name(), "shakespeare.npz"):
        if wanted and wanted in models:
            return wanted
    return models[0] if models else None


def resolve_model_path(model_id: str) -> Path:
    """The path of a listed model; anything not directly inside models_dir() is refused."""
    base = models_dir()
    path = (base / model_id).resolve()
    if path.parent != base or model_id not in available_models():
        raise ValueError(f"unknown model {model_id!r}")
    return path


def _read_model(path: str):
    """The load itself (in a loader thread): the file and read-only weights. The tokenizer
    comes warm: every loader runs tinygpt.tokenizer.warm_up (its regexes built, its speed
    checked) before the weights are read."""
    model, tokenizer = load(path, root=models_dir())  # messages name files relative to it
    for array in model.parameters().values():
        array.flags.writeable = False  # shared by every user: nobody may change it
    return model, tokenizer


class LoadTooSlow(Exception):
    """A model load that did not end within its time budget (or found no free loader)."""


class LoadersBusy(Exception):
    """LOADS_AT_ONCE loads already run: this one is not started (and not held against it)."""


_loaders = threading.BoundedSemaphore(LOADS_AT_ONCE)


def load_within(read, path: str, budget: float):
    """`read(path)` in a thread of its own, waited for at most `budget` seconds (LoadTooSlow
    past it; LoadersBusy at once when LOADS_AT_ONCE loads are already running)."""
    loaders = _loaders  # released in the thread: the very semaphore acquired here
    if not loaders.acquire(blocking=False):
        raise LoadersBusy("other models are being loaded right now; try again in a minute")
    done: Future = Future()

    def run() -> None:
        try:
            done.set_result(read(path))
        except BaseException as err:  # noqa: BLE001 - handed to the page that waits
            done.set_exception(err)
        finally:
            loaders.release()

    threading.Thread(target=run, name="tinygpt-model-load", daemon=True).start()
    try:
        return done.result(timeout=budget)
    except FutureTimeout:
        raise LoadTooSlow(f"loading it took longer than {budget:g} s, the server's limit "
                          "(TINYGPT_MODEL_LOAD_SECONDS)") from None


LOADED_KEPT = 4  # as many as the cache below keeps
_loaded: list[tuple] = []  # the keys of the last loads that ended well, newest last


@st.cache_resource(max_entries=LOADED_KEPT, show_spinner="Loading the model…")
def _load_cached(path: str, mtime: float):
    return load_within(_read_model, path, settings.model_load_seconds())


def load_model(model_id: str):
    """(model, tokenizer) for a listed model: loaded once per server, again if the file changes.

    Models trained in this session (see ``register_session_model``) come from its slot.
    """
    if is_session_model(model_id):
        if model_id not in session_models():
            raise ValueError(f"unknown model {model_id!r}")
        return session_models()[model_id]
    path = resolve_model_path(model_id)
    try:
        key = (str(path), file_version(path))
    except OSError:
        raise ModelLoadError(f"{model_id}: the file cannot be read") from None
    failed = _failures.get(key)
    if failed is not None:
        raise ModelLoadError(failed)
    try:
        if key in _loaded:  # in the cache already (nearly always): no reason to leave the line
            return _load_cached(str(path), path.stat().st_mtime)
        with host().outside_the_line():  # the others' runs go on while this one waits
            loaded = _load_cached(str(path), path.stat().st_mtime)
        _loaded[:] = [*_loaded[-(LOADED_KEPT - 1):], key]
        return loaded
    except Exception as err:  # any failure is remembered, not retried on every page run
        message = str(err) if isinstance(err, CheckpointError) else (
            f"{model_id}: {err}" if isinstance(err, (LoadTooSlow, LoadersBusy)) else
            f"{model_id}: the file cannot be read ({type(err).__name__})")
        if not isinstance(err, LoadersBusy):  # busy loaders are not the file's fault
            _failures.put(key, message)
        raise ModelLoadError(message) from None


def file_version(path: Path) -> tuple:
    """(mtime_ns, size) of a checkpoint; of a GPT-2 folder, those of its files (at most 16):
    what must change before a file that failed is tried again."""
    if not path.is_dir():
        info = path.stat()
        return (info.st_mtime_ns, info.st_size)
    files = sorted(path.iterdir())[:16]
    return tuple((f.name, f.lstat().st_mtime_ns, f.lstat().st_size) for f in files)


def model_version(model_id: str) -> float:
    """Part of every cache key: the file's mtime (a retrained file is a new model); 0 for
    session models, whose ids are unique already."""
    if is_session_model(model_id):
        return 0.0
    return _recently(("version", str(models_dir()), model_id),
                     lambda: resolve_model_path(model_id).stat().st_mtime)


def is_session_model(model_id: str | None) -> bool:
    return bool(model_id) and model_id.startswith(SESSION_PREFIX)


def session_models() -> dict:
    """The models this user trained in this session: id -> (model, tokenizer)."""
    return _session_store.get()


def register_session_model(name: str, model: GPT, tokenizer) -> str:
    """Offer a model trained in this session on every page (for this user only).

    The id carries a random suffix, so cached traces of two models with the same name never
    mix. The parameters become read-only: from now on the model is shared by the caches.
    """
    for array in model.parameters().values():
        array.flags.writeable = False
    model_id = f"{SESSION_PREFIX}{name} #{uuid.uuid4().hex[:6]}"
    models = {**session_models(), model_id: (model, tokenizer)}  # oldest first
    _session_store.set(newest_within(models, MAX_SESSION_MODELS, SESSION_MODEL_BYTES))
    return model_id


def newest_within(models: dict, most: int, max_bytes: int) -> dict:
    """The newest of `models` (id -> (model, tokenizer), oldest first): at most `most`, and
    their weights at most `max_bytes` together (the newest is kept whatever it weighs)."""
    kept, used = {}, 0
    for model_id, (model, tokenizer) in reversed(list(models.items())[-most:]):
        weight = sum(int(a.nbytes) for a in model.parameters().values())
        if kept and used + weight > max_bytes:
            break
        kept[model_id], used = (model, tokenizer), used + weight
    return dict(reversed(list(kept.items())))


def model_label(model_id: str) -> str:
    """How the model selector shows an id."""
    if is_session_model(model_id):
        return f"{model_id.removeprefix(SESSION_PREFIX)} (trained here)"
    return model_id
