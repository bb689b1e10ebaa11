"""The app's trace cache is bounded by bytes, least recently used first out."""

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute.caches uses streamlit's caches")
from tinygpt_app.compute.caches import TraceCache  # noqa: E402


def _entry(mb: int):
    logits = np.zeros(mb * 2**20 // 4, dtype=np.float32)
    return logits, {"logits": logits}  # the array shared with the logits counts once


def test_trace_cache_evicts_least_recently_used_past_its_byte_budget():
    cache = TraceCache(max_bytes=3 * 2**20)
    for key in "abc":
        assert cache.keep(key, *_entry(1))
    assert cache.nbytes == 3 * 2**20
    cache.get("a")  # "a" is now the most recently used
    cache.keep("d", *_entry(1))
    assert cache.get("b") is None  # the oldest unused entry went first
    assert all(cache.get(k) is not None for k in "acd")
    assert cache.nbytes <= cache.max_bytes


def test_trace_larger_than_the_budget_is_not_kept():
    cache = TraceCache(max_bytes=2**20)
    assert not cache.keep("big", *_entry(2))
    assert cache.get("big") is None and cache.nbytes == 0


class _GrowingTrace:
    """A lean trace's stand-in: it holds more after it was cached (a block's detail)."""

    extra = 0

    @property
    def nbytes(self) -> int:
        return 2**20 + self.extra


def test_a_trace_that_grew_is_weighed_again_when_the_next_one_comes():
    cache = TraceCache(max_bytes=3 * 2**20)
    grower = _GrowingTrace()
    cache.keep("grows", np.zeros(1, dtype=np.float32), grower)  # 1 MB as it was put
    cache.keep("b", *_entry(1))
    cache.keep("c", *_entry(1))
    assert cache.get("grows")[1] is grower  # now the most recently used
    grower.extra = 2**20  # it computed a block's detail since: 2 MB now
    cache.keep("d", *_entry(1))
    # weighed as they are now, "grows" and "d" fill the budget; weighed as they were put,
    # "c" would have stayed and the cache would hold 4 MB
    assert cache.get("b") is None and cache.get("c") is None
    assert cache.get("grows")[1] is grower and cache.get("d") is not None
    assert cache.nbytes == 3 * 2**20


# ----------------------------------------------------------------------------- generations

import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from tests.tinygpt_hosting.steps.test_lockstep import heard_pass  # noqa: E402
from tinygpt.decoding.generation import Run, generate  # noqa: E402
from tinygpt.network.model import GPT, GPTConfig  # noqa: E402
from tinygpt_app import host  # noqa: E402
from tinygpt_app.compute import caches  # noqa: E402
from tinygpt_app.compute.caches import GENERATION_BYTES, GenerationRoom  # noqa: E402
from tinygpt_app.compute.models import SESSION_PREFIX  # noqa: E402
from tinygpt_app.compute.shared_cache import SharedCache  # noqa: E402
from tinygpt_hosting import plug, streamlit_internals  # noqa: E402
from tinygpt_hosting.steps import lockstep  # noqa: E402

RUNS = {"greedy": Run(8, "greedy", record_steps=False),
        "sample": Run(8, "sample", temperature=0.9, top_p=0.9, seed=2, record_steps=False),
        "beam": Run(8, "beam", num_beams=3, record_steps=False)}


@pytest.fixture(autouse=True)
def class_server():
    """These tests are of a class server's caches: the hosting wing's host, put back after."""
    before = host.host()
    host.install(plug.CLASS_SERVER)
    yield
    host.install(before)


def _generate_runs(monkeypatch, generate_runs) -> None:
    """The class server with another generate_runs (the test's watch or fault)."""
    monkeypatch.setattr(host, "_host", replace(host.host(), generate_runs=generate_runs))


def _session_state(model_id: str):
    """What caches.generations reads of a session: a session model (version 0, no file)."""
    model = GPT(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=7)
    return SimpleNamespace(model_id=SESSION_PREFIX + model_id, model=model, config=model.config)


def _in_threads(*calls):
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def test_generation_room_holds_at_most_its_count_and_bytes_and_a_big_one_alone():
    room = GenerationRoom(2, max_bytes=100)
    inside, most = [], []

    def generation(nbytes):
        with room.hold(nbytes):
            inside.append(nbytes)
            most.append((len(inside), sum(inside)))
            time.sleep(0.05)
            inside.remove(nbytes)

    _in_threads(*[lambda: generation(10)] * 5)
    assert max(n for n, _ in most) == 2
    most.clear()
    _in_threads(lambda: generation(60), lambda: generation(60), lambda: generation(500))
    assert all(total <= 100 or n == 1 for n, total in most) and len(most) == 3


def test_students_generating_at_once_share_the_work_and_get_what_each_gets_alone(monkeypatch):
    """Two sessions with the same prompt and runs: made once. Sessions with other prompts:
    each gets what tinygpt.generate gives alone."""
    monkeypatch.setattr(caches, "GENERATIONS", SharedCache(GENERATION_BYTES))
    made = []
    real = host.host().generate_runs
    _generate_runs(monkeypatch, lambda *a, **k: made.append(1) or real(*a, **k))
    state = _session_state("shared")
    got = {}
    prompts = {"alice": (1, 2, 3), "bob": (1, 2, 3), "carol": (4, 5), "dan": (6, 7, 8, 9)}

    def student(name):
        got[name] = caches.generations(state, prompts[name], RUNS)

    _in_threads(*[lambda n=name: student(n) for name in prompts])
    assert len(made) == 3  # alice and bob share one generation
    for name, ids in prompts.items():
        for run_name, run in RUNS.items():
            alone = generate(state.model, list(ids), run.max_new_tokens, strategy=run.strategy,
                             temperature=run.temperature, top_p=run.top_p,
                             num_beams=run.num_beams, seed=run.seed)
            np.testing.assert_array_equal(got[name][run_name][0].tokens, alone.tokens)
    assert not caches._MAKING  # every claim was given back


@pytest.fixture(autouse=True)
def passes_are_heard(monkeypatch):
    """A SlowModel's passes wait (tests.tinygpt_hosting.steps.test_lockstep.heard_pass)."""
    monkeypatch.setattr(lockstep, "forward_parts", heard_pass)


class SlowModel(GPT):
    """A real model whose passes take a while, as GPT-2's do in a busy class."""

    def before_pass(self, parts):
        time.sleep(0.03)


def test_a_watched_generation_shows_each_run_growing_then_returns_what_it_made(monkeypatch):
    monkeypatch.setattr(caches, "GENERATIONS", SharedCache(GENERATION_BYTES))
    monkeypatch.setattr(caches, "WATCH_EVERY", 0.02)
    model = SlowModel(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=7)
    state = SimpleNamespace(model_id=SESSION_PREFIX + "slow", model=model, config=model.config)
    seen: list[dict] = []
    got = caches.generations(state, (1, 2, 3), RUNS, watch=seen.append)
    assert len(seen) >= 2 and all(set(w) == set(RUNS) for w in seen)
    grown = [len(w["greedy"]) for w in seen]
    assert grown == sorted(grown) and grown[-1] <= RUNS["greedy"].max_new_tokens - 1
    final = got["greedy"][0].tokens
    np.testing.assert_array_equal(seen[-1]["greedy"], final[:grown[-1]])  # its start so far
    alone = generate(model, [1, 2, 3], 8, strategy="greedy")
    np.testing.assert_array_equal(final, alone.tokens)
    assert caches.generations(state, (1, 2, 3), RUNS, watch=seen.append) == got  # cached now


def test_a_watched_generation_is_drawn_as_its_steps_come_not_at_the_next_look(monkeypatch):
    """Each step wakes the page's thread: with looks 10 s apart, the runs are still drawn as
    they grow, and the page goes on as soon as they are written."""
    monkeypatch.setattr(caches, "GENERATIONS", SharedCache(GENERATION_BYTES))
    monkeypatch.setattr(caches, "WATCH_EVERY", 10.0)
    monkeypatch.setattr(caches, "DRAW_GAP", 0.0)
    model = SlowModel(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=3)
    state = SimpleNamespace(model_id=SESSION_PREFIX + "woken", model=model, config=model.config)
    seen: list[dict] = []
    start = time.perf_counter()
    caches.generations(state, (5, 6, 7), RUNS, watch=seen.append)
    assert time.perf_counter() - start < 5.0  # 7 passes of 0.03 s, not a 10 s look
    assert len(seen) >= 2 and len(seen[0]["greedy"]) <= 2


def test_a_session_waiting_on_the_same_runs_sees_them_grow_then_gets_them(monkeypatch):
    """Bob asks for the runs Alice is making: no second generation, and Bob's page is drawn as
    her runs grow (a class clicking the same run at once), then gets exactly her result."""
    monkeypatch.setattr(caches, "GENERATIONS", SharedCache(GENERATION_BYTES))
    monkeypatch.setattr(caches, "WATCH_EVERY", 0.02)
    monkeypatch.setattr(caches, "DRAW_GAP", 0.0)
    model = SlowModel(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=5)
    state = SimpleNamespace(model_id=SESSION_PREFIX + "same", model=model, config=model.config)
    made, real = [], host.host().generate_runs
    _generate_runs(monkeypatch, lambda *a, **k: made.append(1) or real(*a, **k))
    got, seen = {}, {"alice": [], "bob": []}

    def student(name, delay):
        time.sleep(delay)
        got[name] = caches.generations(state, (2, 4, 6), RUNS, watch=seen[name].append)

    _in_threads(lambda: student("alice", 0.0), lambda: student("bob", 0.05))
    assert len(made) == 1
    assert len(seen["bob"]) >= 2  # drawn while Alice's runs were being written
    grown = [len(w["greedy"]) for w in seen["bob"]]
    assert grown == sorted(grown) and grown[-1] < RUNS["greedy"].max_new_tokens
    final = got["alice"]["greedy"][0].tokens
    np.testing.assert_array_equal(seen["bob"][-1]["greedy"], final[:grown[-1]])
    assert got["bob"] == got["alice"]
    assert not caches._MAKING and not caches._WRITTEN_SO_FAR


def test_a_failed_watched_generation_raises_on_the_page_and_gives_its_claim_back(monkeypatch):
    monkeypatch.setattr(caches, "GENERATIONS", SharedCache(GENERATION_BYTES))

    def broken(*args, **kwargs):
        raise MemoryError("no room")

    _generate_runs(monkeypatch, broken)
    state = _session_state("broken")
    with pytest.raises(MemoryError, match="no room"):
        caches.generations(state, (1, 2), RUNS, watch=lambda written: None)
    assert not caches._MAKING


def test_one_tab_has_one_generation_under_way_at_a_time(monkeypatch):
    """A tab that clicks on while its generation runs (the page run stops, the generation
    does not) waits for it before the next one starts: a tab cannot pile generations up."""
    monkeypatch.setattr(caches, "GENERATIONS", SharedCache(GENERATION_BYTES))
    monkeypatch.setattr(caches, "WATCH_EVERY", 0.01)
    monkeypatch.setattr(streamlit_internals, "session_id", lambda: "one tab")
    spans = []
    real = host.host().generate_runs

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spans.append((start, time.perf_counter()))

    _generate_runs(monkeypatch, timed)
    model = SlowModel(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=7)
    state = SimpleNamespace(model_id=SESSION_PREFIX + "tab", model=model, config=model.config)
    first = threading.Thread(target=lambda: caches.generations(state, (1, 2, 3), RUNS,
                                                                watch=lambda w: None))
    first.start()
    while not caches._UNDER_WAY:
        time.sleep(0.001)
    caches.generations(state, (4, 5), RUNS, watch=lambda w: None)
    first.join(30)
    (a_start, a_end), (b_start, _) = sorted(spans)
    assert b_start >= a_end and not caches._UNDER_WAY


@pytest.mark.parametrize("n_kv_head", [None, 2, 1])
def test_a_generation_is_weighed_as_the_kv_cache_it_allocates(n_kv_head):
    """Grouped queries (n_kv_head < n_head) keep fewer keys: before, every model was weighed
    as if it kept n_embd per position (4x too much here with one key/value head)."""
    config = GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=4, n_layer=2,
                       n_kv_head=n_kv_head)
    model = GPT(config, seed=7)
    state = SimpleNamespace(model=model, config=model.config)
    runs = [Run(8, "greedy", record_steps=False), Run(5, "beam", num_beams=3, record_steps=False)]
    ids = (1, 2, 3, 4)
    cache = model.new_cache(sum(run.rows for run in runs), capacity=len(ids) + 8)
    held = sum(array.nbytes for array in (*cache.keys, *cache.values))  # the reference
    assert caches._generation_bytes(state, ids, runs) == held


def test_a_class_reading_one_new_prompt_at_once_reads_it_once(monkeypatch):
    """Five sessions ask for the same prompt's next-token logits together (a class following
    the teacher onto the Decoding page): one read, and each gets the logits of a plain forward.
    made_generations finds nothing and makes nothing."""
    monkeypatch.setattr(caches, "PROMPTS_READ", SharedCache(2**20))
    state = _session_state("one read")
    reads = []
    real = caches.read_prompt

    def slow_read(*args, **kwargs):
        reads.append(1)
        time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(caches, "read_prompt", slow_read)
    got = []
    _in_threads(*[lambda: got.append(caches.prompt_logits(state, (3, 1, 4, 1)))] * 5)
    assert len(reads) == 1 and len(got) == 5 and not caches._READING
    plain = state.model.forward(np.array([3, 1, 4, 1]))[-1]
    for logits in got:
        np.testing.assert_allclose(logits, plain, rtol=1e-5, atol=1e-5)
    _generate_runs(monkeypatch, None)
    assert caches.made_generations(state, (3, 1, 4, 1), RUNS) == dict.fromkeys(RUNS)
