"""Hostile input: whatever a student pastes or clicks, and whatever lands in the models folder.

Property-based (hypothesis) with modest example counts, so the suite stays quick:
- the app's tokenizer round-trips any Unicode text (lone surrogates: a clear ValueError);
- temperature / top-k / top-p give a valid distribution for any finite scores, and a clear
  ValueError for settings out of range;
- corrupted or truncated checkpoints and GPT-2 folders (random bytes, cuts, flipped bytes, JSON
  of the wrong types) give CheckpointError, never another exception, a hang or a memory spike;
- pages survive random prompts and random control values in their links.
And plain checks: pasted text is capped, model files are read only inside the models folder,
no pickle is ever loaded, and nothing touches the network (the core and the pages run with
sockets blocked).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import signal
import socket
import tempfile
import tracemalloc
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.apptest_support import NORMAL, PAGES, ROOT, TINY, assert_clean, open_page
from tinygpt.checkpoint.files import CheckpointError, load, save
from tinygpt.decoding.generation import (
    generate,
    process_logits,
    softmax,
    top_k_filter,
    top_p_filter,
)
from tinygpt.network.model import GPT, GPTConfig

QUICK = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@contextmanager
def time_limit(seconds: float):
    """Fail (instead of hanging the suite) when the body runs longer than `seconds`."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ----------------------------------------------------------------------------- tokenizer

_TOKENIZER = []


def app_tokenizer():
    """The tokenizer the app serves in the tests (tests/fixtures/tiny.npz), loaded once."""
    if not _TOKENIZER:
        _TOKENIZER.append(load(TINY)[1])
    return _TOKENIZER[0]


# every plane (emoji, CJK, combining marks, controls, private use), never a lone surrogate
ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)


@QUICK
@given(text=ANY_TEXT | st.sampled_from(["", "\x00", "<|endoftext|>", "<|endoftext", "\r\n\t",
                                         "e\u0301", "👩🏽‍🔬", "\U0010ffff", "\ufeff"]))
def test_app_tokenizer_round_trips_any_unicode_text(text):
    tok = app_tokenizer()
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text


@settings(max_examples=30, deadline=None)
@given(before=ANY_TEXT, surrogate=st.characters(categories=["Cs"]), after=ANY_TEXT)
def test_a_lone_surrogate_is_refused_with_a_clear_error(before, surrogate, after):
    """Documented policy: text with a lone surrogate cannot be UTF-8 encoded -> ValueError."""
    with pytest.raises(ValueError, match="surrogate"):
        app_tokenizer().encode(before + surrogate + after)


# ----------------------------------------------------------------------------- sampling

HUGE = [1e30, -1e30, 1e300, -1e300, np.finfo(np.float64).max, -np.finfo(np.float64).max]
FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
LOGITS = st.one_of(
    st.lists(FINITE, min_size=1, max_size=40),
    st.lists(st.sampled_from(HUGE + [0.0, 1.0, -1.0]), min_size=1, max_size=40),
    st.tuples(FINITE, st.integers(1, 40)).map(lambda vn: [vn[0]] * vn[1]),  # all equal
).map(lambda values: np.array(values, dtype=np.float64))
TEMPERATURE = st.one_of(st.just(0.0), st.floats(1e-6, 1e6), st.sampled_from([1e-300, 0.05, 3.0]))
TOP_K = st.none() | st.integers(1, 100)
TOP_P = st.none() | st.floats(1e-9, 1.0) | st.just(1.0)


def assert_distribution(p: np.ndarray) -> None:
    assert np.all(np.isfinite(p)), p
    assert np.all(p >= 0), p
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    assert np.count_nonzero(p) >= 1


@QUICK
@given(logits=LOGITS, temperature=TEMPERATURE, top_k=TOP_K, top_p=TOP_P)
@example(np.array([1e30, -1e30]), 1e-300, None, 0.5)  # logits / T overflows to inf
@example(np.array([1e308, 1e308]), 0.5, None, None)
@example(np.array([-1e308, 1e308, 0.0]), 1.0, 1, 0.3)
def test_process_logits_always_gives_a_distribution(logits, temperature, top_k, top_p):
    with np.errstate(over="ignore", invalid="ignore"):  # only the result matters here
        pr = process_logits(logits, temperature, top_k, top_p)
    assert_distribution(pr.final_probs)
    assert_distribution(pr.probs)
    assert pr.kept.any()
    assert np.all(pr.final_probs[~pr.kept] == 0)  # nothing cut can be drawn
    if temperature == 0.0:
        assert pr.kept.sum() == 1 and pr.final_probs[np.argmax(logits)] == 1.0


@QUICK
@given(logits=LOGITS, temperature=TEMPERATURE, k=st.integers(1, 100), p=st.floats(1e-9, 1.0))
def test_each_filter_alone_keeps_a_valid_distribution(logits, temperature, k, p):
    with np.errstate(over="ignore", invalid="ignore"):
        assert_distribution(softmax(logits, temperature))
        for filtered in (top_k_filter(logits, k), top_p_filter(logits, p)):
            assert not np.isnan(filtered).any() and not np.isposinf(filtered).any()
            kept = ~np.isneginf(filtered)
            assert kept.any()
            assert np.array_equal(filtered[kept], logits[kept])  # kept scores are untouched


BAD_SETTINGS = st.one_of(
    st.tuples(st.floats(max_value=-1e-12) | st.sampled_from([np.nan, np.inf, -np.inf]),
              st.none(), st.none()),
    st.tuples(st.just(1.0), st.integers(max_value=0) | st.sampled_from([2.5, True, "3"]),
              st.none()),
    st.tuples(st.just(1.0), st.none(),
              st.floats(max_value=0.0) | st.floats(min_value=1.0 + 1e-9) | st.just(np.nan)),
)


@QUICK
@given(logits=LOGITS, bad=BAD_SETTINGS)
def test_settings_out_of_range_give_a_clear_value_error(logits, bad):
    temperature, top_k, top_p = bad
    with pytest.raises(ValueError, match="temperature|top_k|top_p"):
        process_logits(logits, temperature, top_k, top_p)


# ----------------------------------------------------------------------------- checkpoints

_SMALL = []


def small_checkpoint_bytes() -> bytes:
    """A small saved checkpoint (the app's tokenizer, a 1-layer model), built once."""
    if not _SMALL:
        tok = app_tokenizer()
        config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=16, n_embd=8, n_head=2, n_layer=1)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "small.npz"
            save(GPT(config, seed=1), tok, path)
            _SMALL.append(path.read_bytes())
    return _SMALL[0]


def load_bytes_or_checkpoint_error(data: bytes, tmp_path: Path) -> None:
    """load() must either succeed or raise CheckpointError, quickly."""
    path = tmp_path / "hostile.npz"
    path.write_bytes(data)
    with time_limit(10.0):
        try:
            model, tok = load(path)
        except CheckpointError:
            return
    # the damage missed everything that is checked (e.g. a zip timestamp): a usable model
    logits = model.forward(np.array(tok.encode("Hi"), dtype=np.int64))
    assert logits.shape == (len(tok.encode("Hi")), model.config.vocab_size)


@QUICK
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
                      min_size=1, max_size=6))
@example(flips=[(0.708984375, 8)])  # broke a .npy header so numpy's tokenizer raised TokenError
def test_flipped_bytes_give_checkpoint_error(flips, tmp_path):
    data = bytearray(small_checkpoint_bytes())
    for where, mask in flips:
        data[int(where * len(data))] ^= mask
    load_bytes_or_checkpoint_error(bytes(data), tmp_path)


@QUICK
@given(cut=st.floats(0, 1, exclude_max=True), junk=st.binary(max_size=64))
def test_truncated_files_give_checkpoint_error(cut, junk, tmp_path):
    data = small_checkpoint_bytes()
    end = min(int(cut * len(data)), len(data) - 1)  # at least one byte is missing
    path = tmp_path / "cut.npz"
    path.write_bytes(data[:end])
    with time_limit(10.0), pytest.raises(CheckpointError):
        load(path)
    # random bytes after the cut (they may even restore the missing tail: then it loads)
    load_bytes_or_checkpoint_error(data[:end] + junk, tmp_path)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(member=st.integers(0, 100), header=st.binary(min_size=0, max_size=200))
def test_rewritten_npy_headers_give_checkpoint_error(member, header, tmp_path):
    """A well-formed zip whose member is replaced by random .npy-like bytes (e.g. a header
    promising a huge array, or an object dtype that would need pickle)."""
    src = zipfile.ZipFile(io.BytesIO(small_checkpoint_bytes()))
    names = src.namelist()
    target = names[member % len(names)]
    out = tmp_path / "rewritten.npz"
    with zipfile.ZipFile(out, "w") as dst:
        for name in names:
            dst.writestr(name, b"\x93NUMPY" + header if name == target else src.read(name))
    assume(header)  # an empty body is the same as the truncation test
    load_bytes_or_checkpoint_error(out.read_bytes(), tmp_path)


@pytest.mark.parametrize("descr", ["'|O'", "'<f4'"])
def test_object_arrays_and_huge_shapes_are_refused_before_reading(tmp_path, descr):
    """An .npy header asking for pickled objects, or for 10^12 floats, is refused at once."""
    header = f"{{'descr': {descr}, 'fortran_order': False, 'shape': (1000000, 1000000), }}"
    body = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
    src = zipfile.ZipFile(io.BytesIO(small_checkpoint_bytes()))
    out = tmp_path / "evil.npz"
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, body if name == "embedding.embeddings.npy" else src.read(name))
    with time_limit(5.0), pytest.raises(CheckpointError):
        load(out)


# ----------------------------------------------------------------------------- GPT-2 folders

GPT2_FILES = ("config.json", "vocab.json", "merges.txt", "model.safetensors")
_GPT2 = []


def small_gpt2_files() -> dict[str, bytes]:
    """A small valid GPT-2 folder (tinygpt's tiny test model, Hugging Face names), built once."""
    if not _GPT2:
        pytest.importorskip("safetensors", reason="safetensors writes the weights")
        from tests.tinygpt.checkpoint.test_files import (
            tiny_model,
            tiny_tokenizer,
            write_gpt2_folder,
        )

        with tempfile.TemporaryDirectory() as folder:
            write_gpt2_folder(Path(folder) / "g", tiny_model(), tiny_tokenizer())
            _GPT2.append({name: (Path(folder) / "g" / name).read_bytes() for name in GPT2_FILES})
    return _GPT2[0]


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)


@st.composite
def corrupted_gpt2_file(draw) -> tuple[str, bytes]:
    """(file name, new content): random bytes, a cut, flipped bytes, or wrong JSON types."""
    name = draw(st.sampled_from(GPT2_FILES))
    data = small_gpt2_files()[name]
    how = draw(st.sampled_from(["random", "cut", "flip", "json"]))
    if how == "random":
        return name, draw(st.binary(max_size=400))
    if how == "cut":
        return name, data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip":
        out = bytearray(data)
        for where, mask in draw(st.lists(st.tuples(st.floats(0, 1, exclude_max=True),
                                                   st.integers(1, 255)), min_size=1, max_size=4)):
            out[int(where * len(out))] ^= mask
        return name, bytes(out)
    if name == "model.safetensors":  # a field of one tensor's header entry gets a random value
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        tensor = draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))
        header[tensor][draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(JSON_VALUE)
        text = json.dumps(header).encode()
        return name, len(text).to_bytes(8, "little") + text + data[8 + n :]
    if name == "merges.txt":
        return name, draw(st.text(max_size=60)).encode("utf-8", "surrogatepass")
    value = json.loads(data)
    if draw(st.booleans()):
        value = draw(JSON_VALUE)  # the whole file: a list, a number, ...
    else:
        value[draw(st.sampled_from(sorted(value)))] = draw(JSON_VALUE)
    return name, json.dumps(value).encode()


@settings(max_examples=80, deadline=None)
@given(damage=st.lists(corrupted_gpt2_file(), min_size=1, max_size=2))
@example(damage=[("vocab.json", b'["a", "b"]')])
@example(damage=[("config.json", b"[" * 50_000 + b"]" * 50_000)])
@example(damage=[("config.json", b'{"activation_function": ["gelu"]}')])
def test_corrupted_gpt2_folders_give_checkpoint_error(damage):
    """Any damage to any file of a GPT-2 folder: the model, or a CheckpointError that names
    the file without a server path; never another exception, never more than 32 MB."""
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        folder = models / "gpt2"
        folder.mkdir(parents=True)
        for name, data in small_gpt2_files().items():
            (folder / name).write_bytes(data)
        for name, data in damage:
            (folder / name).write_bytes(data)
        tracemalloc.start()
        try:
            with time_limit(10.0):
                model, tok = load(folder, root=models)
        except CheckpointError as err:
            assert tmp not in str(err), str(err)
            return
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < 32 * 2**20, f"{peak / 2**20:.1f} MB"
        ids = np.array(tok.encode("hello there")[: model.config.n_ctx], dtype=np.int64)
        assert np.isfinite(model.forward(ids)).all()


# ----------------------------------------------------------------------------- no pickle

CODE_DIRS = ["tinygpt", "tinygpt_app", "pages", "bench", "scripts", "tests", "deploy"]
CODE_FILES = ["app.py"]


def project_python_files() -> list[Path]:
    files = [ROOT / f for f in CODE_FILES]
    for folder in CODE_DIRS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if f.is_file() and f.resolve() != Path(__file__).resolve()]


def test_no_pickle_is_ever_loaded():
    # the patterns are assembled so that this file does not match itself
    forbidden = re.compile("allow_pickle" + r"\s*=\s*True|" + r"\bpickle\.loads?\b|"
                           r"\bcPickle\b|" + r"\bdill\b|" + r"torch\.load\(")
    files = project_python_files()
    assert len(files) > 10
    hits = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}"
            for f in files for i, line in enumerate(f.read_text().splitlines(), 1)
            if forbidden.search(line)]
    assert not hits, hits


# ----------------------------------------------------------------------------- the app

pytest.importorskip("streamlit", reason="the app tests need streamlit")
from tinygpt_app.compute.models import resolve_model_path  # noqa: E402
from tinygpt_app.kit.state import MAX_PROMPT_CHARS  # noqa: E402

# what a link may carry: numbers in and out of range, words, nothing, very long text
URL_VALUE = st.one_of(
    st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True).map(str),
    st.sampled_from(["", "nan", "inf", "-1", "0", "1e309", "greedy", "beam", "true", "ü"]),
    st.text(max_size=30),
)
CONTROLS = ["pos", "temperature", "top_k", "top_p", "seed", "new", "beams", "strategy", "step",
            "model"]


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(page=st.sampled_from([p for p in PAGES if "Training" not in p]),
       prompt=ANY_TEXT | st.sampled_from(["", "🎭" * 300, "To be " * 200]),
       controls=st.dictionaries(st.sampled_from(CONTROLS), URL_VALUE, max_size=5))
def test_pages_survive_random_prompts_and_control_values(tiny_models, page, prompt, controls):
    at = open_page(page, prompt=prompt, **controls)
    assert_clean(at)
    assert at.sidebar.text_area[0].value == prompt


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(prompt=ANY_TEXT, temperature=st.floats(0.0, 3.0), top_p=st.floats(0.01, 1.0),
       top_k=st.integers(0, 512))
def test_sampling_page_survives_random_control_moves(tiny_models, prompt, temperature, top_p,
                                                      top_k):
    at = open_page("pages/6_Softmax_and_sampling.py", prompt=prompt or "x")
    at.slider(key="sampling.temperature").set_value(round(temperature / 0.05) * 0.05).run()
    at.number_input(key="sampling.top_k").set_value(top_k).run()
    at.slider(key="sampling.top_p").set_value(round(top_p, 2) or 0.01).run()
    assert_clean(at)


def test_pasted_text_is_capped_with_a_note(tiny_models):
    at = open_page("pages/1_Tokens_and_embeddings.py", prompt="short")
    at.sidebar.text_area[0].set_value("All the world's a stage. " * 4000).run()  # 100k chars
    assert_clean(at)
    assert len(at.session_state["prompt"]) == MAX_PROMPT_CHARS
    assert any("cut to its first" in w.value for w in at.warning)


def test_a_long_link_prompt_is_capped_too(tiny_models):
    at = open_page("app.py", prompt="x" * (MAX_PROMPT_CHARS * 3))
    assert_clean(at)
    assert len(at.session_state["prompt"]) == MAX_PROMPT_CHARS


# ----------------------------------------------------------------------------- models folder


def test_a_symlinked_folder_out_of_the_models_folder_is_refused(tmp_path, monkeypatch):
    """(A symlinked *file* is refused in test_models.py; a folder is the GPT-2 case.)"""
    outside = tmp_path / "elsewhere" / "gpt2"
    outside.mkdir(parents=True)
    (outside / "config.json").write_text("{}")
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, inside / "tiny.npz")
    (inside / "gpt2").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    with pytest.raises(ValueError):
        resolve_model_path("gpt2")


def test_a_model_named_in_the_link_must_be_listed(tmp_path, monkeypatch):
    inside = tmp_path / "models"
    inside.mkdir()
    shutil.copy(TINY, inside / "tiny.npz")
    shutil.copy(TINY, tmp_path / "secret.npz")
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(inside))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    for sneaky in ("../secret.npz", str(tmp_path / "secret.npz"), "tiny.npz/../../secret.npz",
                   "tiny.npz\x00", "%2e%2e/secret.npz", "session:../secret.npz"):
        at = open_page("app.py", prompt="Hello", model=sneaky)
        assert_clean(at)
        assert at.sidebar.selectbox[0].value == "tiny.npz"


# ----------------------------------------------------------------------------- no network


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


def test_core_runs_offline(no_network):
    model, tok = load(TINY)
    ids = np.array(tok.encode("ROMEO:\nBut soft"), dtype=np.int64)
    logits, trace = model.run_with_trace(ids)
    assert np.isfinite(logits).all() and "logits" in trace
    for strategy in ("greedy", "sample", "beam"):
        result = generate(model, ids, max_new_tokens=5, strategy=strategy, seed=0)
        assert result is not None


@pytest.mark.parametrize("page", PAGES)
def test_pages_run_offline(no_network, tiny_models, page):
    at = open_page(page, prompt=NORMAL)
    assert_clean(at)


# ----------------------------------------------------------------------------- link parameters

# every control a link can set, per page, and what a valid value in the URL looks like
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?(e[+-]?[0-9]+)?")
PAGE_CONTROLS = {
    "pages/6_Softmax_and_sampling.py": ["temperature", "top_k", "top_p", "seed"],
    "pages/7_Decoding.py": ["new", "temperature", "top_k", "top_p", "seed", "beams", "strategy",
                            "step"],
}
ANY_LINK_VALUE = st.text(max_size=40) | URL_VALUE | st.sampled_from(
    ["inf", "-inf", "1e309", "NaN", "٣", "1_0", "9" * 400, "[x](https://evil.example)"])


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(page=st.sampled_from(sorted(PAGE_CONTROLS)), data=st.data())
def test_any_string_for_any_control_gives_a_valid_value_in_the_link(tiny_models, page, data):
    names = PAGE_CONTROLS[page]
    values = data.draw(st.dictionaries(st.sampled_from([*names, "pos"]), ANY_LINK_VALUE,
                                       min_size=1))
    at = open_page(page, prompt="Hello there", **values)
    assert_clean(at)
    for name in [*names, "pos"]:
        if name not in at.query_params:  # e.g. the step of a run that made no tokens
            continue
        value = at.query_params[name]
        value = value[0] if isinstance(value, list) else value
        if name == "strategy":
            assert value in {"greedy", "sample"}, value
        else:
            assert NUMBER.fullmatch(value), (name, value)
