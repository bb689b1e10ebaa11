"""What the server computes once and shares between sessions: traces, BPE replays, generations,
sequence logits and singular values. Every cache is bounded, every cached array read-only.

Cache keys are small values (model id, file version, token ids, settings); the model itself is
passed as an underscore argument, so Streamlit never hashes its arrays.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import streamlit as st

from tinygpt.decoding.generation import (
    GenerationResult,
    PromptRead,
    Run,
    continuation_logits,
    read_prompt,
)
from tinygpt.network.model import GPT, Interventions
from tinygpt.readouts import output_singular_values
from tinygpt_app import settings
from tinygpt_app.compute import health
from tinygpt_app.compute.models import model_version
from tinygpt_app.compute.shared_cache import SharedCache, shared
from tinygpt_app.compute.subject import Subject
from tinygpt_app.host import host


class TraceCache(SharedCache):
    """Least-recently-used traces, bounded by their total size in bytes (not by count).

    A trace of the shipped model is a few MB; one of GPT-2 small at 256 tokens is 409 MB as
    a dict of every tensor, 86 MB as a lean tinygpt Trace (the residual stream, the sublayer
    writes and the logits, 49 MB of it) plus up to 22 MB for the one block's detail it computed
    last (measured, 108 MB in all). A count bound alone could not keep a classroom server's
    memory in check. The traces are weighed again at each new one (a lean trace grows by the
    part it computed last). Shared by every session of this server process; entries are
    read-only.
    """

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes, sizeof=lambda entry: trace_nbytes(*entry))

    def keep(self, key, logits: np.ndarray, trace) -> bool:
        """Keep a new (logits, trace) after weighing the others again; False if it alone is
        bigger than the whole budget (the caller still has it, the cache does not)."""
        self.weigh_again()
        return self.put(key, (logits, trace))


def trace_nbytes(logits: np.ndarray, trace) -> int:
    """Bytes a (logits, trace) pair holds now. A lean Trace reports its own (stored arrays and
    the part computed last; reading .values() would compute every block again); a dict of
    arrays is summed, counting an array shared with the logits once."""
    if not isinstance(trace, dict):
        return int(trace.nbytes)
    arrays = {id(a): a for a in (logits, *trace.values())}
    return sum(a.nbytes for a in arrays.values())


TRACE_CACHE = TraceCache(settings.trace_cache_bytes())


def interventions_key(iv: Interventions | None) -> str:
    """A small, stable text key for an Interventions value (used in the trace cache key)."""
    if iv is None or not iv.active:
        return ""
    if iv.edits:  # functions: no small key says what they do
        raise ValueError("runs with edits are not cached here (tinygpt_app.compute.interventions)")
    return repr((sorted(iv.zero_heads), sorted(iv.skip_attn), sorted(iv.skip_ffn),
                 iv.no_layernorm, iv.no_position, iv.no_causal_mask, iv.no_residual))


def _trace_cached(model_id: str, mtime: float, ids: tuple[int, ...], iv_key: str,
                  model: GPT, iv: Interventions | None):
    key = (model_id, mtime, ids, iv_key)
    hit = TRACE_CACHE.get(key)
    if hit is not None:
        return hit
    logits, trace = model.run_with_trace(np.asarray(ids, dtype=np.int64), iv)
    health.note_run(model_id, mtime, logits, trace)  # an overflow: every page will say so
    logits.flags.writeable = False  # cached and shared: read-only
    if isinstance(trace, dict):  # a lean Trace keeps its own arrays read-only
        for array in trace.values():
            array.flags.writeable = False
    TRACE_CACHE.keep(key, logits, trace)
    return logits, trace


def get_trace(state: Subject, interventions: Interventions | None = None):
    """(logits (n, v), trace) for the current prompt: the model's own run_with_trace, cached."""
    mtime = model_version(state.model_id)
    return _trace_cached(state.model_id, mtime, tuple(int(i) for i in state.ids),
                         interventions_key(interventions), state.model, interventions)


@shared(16 * 2**20)  # a prompt's chunks and merges: up to ~3 MB for the longest
def _bpe_replay_cached(model_id: str, mtime: float, prompt: str, _tokenizer):
    return _tokenizer.explain(prompt)


def bpe_replay(state: Subject) -> list:
    """tokenizer.explain(prompt): the chunks and merges that made the tokens (cached)."""
    mtime = model_version(state.model_id)
    return _bpe_replay_cached(state.model_id, mtime, state.prompt, state.tokenizer)


@shared(2**20, spinner="Computing the singular values of W_out…")  # (d,) each
def _singular_values_cached(model_id: str, mtime: float, _model: GPT) -> np.ndarray:
    s = output_singular_values(_model)
    s.flags.writeable = False
    return s


def singular_values(state: Subject) -> np.ndarray:
    """Singular values of the current model's W_out (d,), computed once per model."""
    return _singular_values_cached(state.model_id, model_version(state.model_id), state.model)


# (T, V) float32: GPT-2 at the app's 256 tokens 51 MB, the shipped model's well under 1 MB
@shared(128 * 2**20)
def _sequence_logits_cached(model_id: str, version: float, ids: tuple[int, ...], _model: GPT):
    logits = _model.forward(np.asarray(ids, dtype=np.int64)).astype(np.float32)  # (T, V)
    logits.flags.writeable = False
    return logits


def sequence_logits(state: Subject, ids: Sequence[int]) -> np.ndarray:
    """Logits (T, V) of the current model over any token sequence (cached, read-only)."""
    return _sequence_logits_cached(state.model_id, model_version(state.model_id),
                                   tuple(int(i) for i in ids), state.model)


# A generation's result, with record_steps=False as the pages ask: 20 KB greedy and 1.7 MB for
# 6 beams x 100 tokens (its beam history) on the shipped model (nbytes_of). Room for a class's
# runs: the bound was 128 results before it was in bytes.
GENERATION_BYTES = 64 * 2**20
GENERATIONS = SharedCache(GENERATION_BYTES)


def prompt_read_nbytes(prompt: PromptRead) -> int:
    """The keys and values of every layer, and the logits (V,), of a prompt read."""
    cache = prompt.cache
    return sum(a.nbytes for a in cache.keys + cache.values) + prompt.logits.nbytes


# Prompts read for generations and step views, with their keys and values (GPT-2 small: 75 KB
# a token, a full context 75 MB): the last few students' prompts.
PROMPTS_READ = SharedCache(256 * 2**20, sizeof=prompt_read_nbytes)
# On a class server the students' generations step together (host().steps, the hosting
# wing's tinygpt_hosting.steps.lockstep.SharedSteps): one pass of the model for every generation
# under way in this process. A GPT-2 decoding step is bound by the read of 500 MB of weights,
# not by its few rows: a pass of 16 students' 80 rows costs about what 4 of their steps cost
# alone. For one user, each generation runs alone (host.generate_one_by_one).


class GenerationRoom:
    """At most `most` generations at once in this process, their KV caches at most `max_bytes`
    together (one bigger than that runs alone). Past those, a generation waits its turn."""

    def __init__(self, most: int, max_bytes: int) -> None:
        self.most, self.max_bytes = most, max_bytes
        self._running, self._bytes = 0, 0
        self._cond = threading.Condition()

    @contextmanager
    def hold(self, nbytes: int):
        with self._cond:
            while self._running and (self._running >= self.most
                                     or self._bytes + nbytes > self.max_bytes):
                self._cond.wait()
            self._running, self._bytes = self._running + 1, self._bytes + nbytes
        try:
            yield
        finally:
            with self._cond:
                self._running, self._bytes = self._running - 1, self._bytes - nbytes
                self._cond.notify_all()


GENERATION_ROOM = GenerationRoom(16, 512 * 2**20)
_MAKING: dict[tuple, threading.Event] = {}  # run key -> set when the session making it is done
_MAKING_LOCK = threading.Lock()
_WRITTEN_SO_FAR: dict[tuple, np.ndarray] = {}  # run key -> its tokens so far, while it is made


def _generation_bytes(state: Subject, ids: tuple[int, ...], runs: list[Run]) -> int:
    """The keys and values a generation of these runs holds at its longest."""
    c = state.config
    positions = min(c.n_ctx, len(ids) + max(run.max_new_tokens for run in runs))
    rows = sum(run.rows for run in runs)
    width = c.kv_heads * c.head_size  # per key (and value): fewer heads for grouped queries
    return rows * positions * c.n_layer * 2 * width * np.dtype(state.model.dtype).itemsize


def _claim_missing(keys: dict[str, tuple], on_written: Written | None = None,
                   ) -> tuple[dict, list[str], threading.Event | None]:
    """(found, missing, event): the cached entries, and the missing ones, now claimed by this
    session (it sets `event` when done). Waits while another session makes one of them, and
    meanwhile tells `on_written` what that run has written so far (a class asking for the same
    run at once sees its words come, not only its end)."""
    while True:
        with _MAKING_LOCK:
            found = {name: GENERATIONS.get(key) for name, key in keys.items()}
            missing = [name for name, hit in found.items() if hit is None]
            others = {_MAKING[keys[name]] for name in missing if keys[name] in _MAKING}
            if not others:
                mine = threading.Event() if missing else None
                for name in missing:
                    _MAKING[keys[name]] = mine
                return found, missing, mine
        with host().outside_the_line():  # another student's same runs: wait for them
            _wait_watching(others, {name: keys[name] for name in missing}, on_written)


def _wait_watching(others: set[threading.Event], keys: dict[str, tuple],
                   on_written: Written | None) -> None:
    shown: dict[str, int] = {}
    while not all(event.wait(0.1) for event in others):
        so_far = {name: _WRITTEN_SO_FAR[key] for name, key in keys.items()
                  if key in _WRITTEN_SO_FAR}
        lengths = {name: len(tokens) for name, tokens in so_far.items()}
        if on_written is not None and so_far and lengths != shown:
            shown = lengths
            on_written(so_far)


Written = Callable[[dict[str, np.ndarray]], None]  # run name -> the tokens it wrote so far


def _generate_missing(state: Subject, ids: tuple[int, ...], runs: dict[str, Run],
                      keys: dict[str, tuple], cost: Any,
                      on_written: Written | None = None,
                      ) -> dict[str, tuple[GenerationResult, float, int]]:
    """Every run's cached entry, after generating the missing ones together. Runs another
    session is making are waited for, not made twice. The generation steps with every other
    generation of this process (host().generate_runs), outside the page line: it is mostly model
    passes, and the other students' clicks go on meanwhile. `cost`: where the runs' threads
    are charged; `on_written`: told after each step what the runs have written so far."""
    found, missing, mine = _claim_missing(keys, on_written)
    if not missing:
        return found
    try:
        todo = [runs[name] for name in missing]

        def on_step(written: list[np.ndarray]) -> None:
            so_far = dict(zip(missing, written, strict=True))
            for name, tokens in so_far.items():  # for the sessions waiting on the same runs
                _WRITTEN_SO_FAR[keys[name]] = tokens
            if on_written is not None:
                on_written(so_far)

        with host().outside_the_line(), GENERATION_ROOM.hold(
                _generation_bytes(state, ids, todo)):
            t0 = time.perf_counter()
            prompt = _prompt_read(state.model_id, keys[missing[0]][1], ids, state.model)
            made = host().generate_runs(state.model, np.asarray(ids, dtype=np.int64), todo,
                                        prompt=prompt, on_thread_cpu=cost.add if cost else None,
                                        on_step=on_step)
            seconds = time.perf_counter() - t0
        for name, result in zip(missing, made, strict=True):
            found[name] = (result, seconds, len(missing))
            GENERATIONS.put(keys[name], found[name])
    finally:
        with _MAKING_LOCK:
            for name in missing:
                _MAKING.pop(keys[name], None)
                _WRITTEN_SO_FAR.pop(keys[name], None)
        mine.set()
    return found


@shared(64 * 2**20)  # 40 new tokens of GPT-2: 8 MB each
def _continuation_cached(model_id: str, version: float, ids: tuple[int, ...],
                         new_ids: tuple[int, ...], _model: GPT) -> np.ndarray:
    # not in host().steps: a few positions run on a copy of the prompt's keys and values, so a
    # step view does not wait behind other students' generations
    prompt = _prompt_read(model_id, version, ids, _model)
    logits = continuation_logits(_model, prompt, np.asarray(new_ids, dtype=np.int64))
    logits = logits.astype(np.float32)
    logits.flags.writeable = False
    return logits


def continuation(state: Subject, ids: Sequence[int], new_ids: Sequence[int]) -> np.ndarray:
    """The logits (n, V) that chose each of the n tokens `new_ids` generated after `ids`:
    only the new positions are run, with the prompt's keys and values (cached, read-only)."""
    return _continuation_cached(state.model_id, model_version(state.model_id),
                                tuple(int(i) for i in ids), tuple(int(i) for i in new_ids),
                                state.model)


_READING: dict[tuple, threading.Lock] = {}  # prompt key -> held while a session reads it


def _prompt_read(model_id: str, version: float, ids: tuple[int, ...], model: GPT) -> PromptRead:
    """The prompt read once for generations and step views (read-only once made: they copy
    from it), in a pass shared with the other students' steps. A class that opens the Decoding
    page on the teacher's prompt at once reads it once: the others wait for that read."""
    key = (model_id, version, ids)
    prompt = PROMPTS_READ.get(key)
    if prompt is not None:
        return prompt
    with _MAKING_LOCK:
        reading = _READING.setdefault(key, threading.Lock())
    if not reading.acquire(blocking=False):
        with host().outside_the_line():  # another session reads it: no page slot held
            reading.acquire()
    try:
        prompt = PROMPTS_READ.get(key)  # read by the session waited for
        if prompt is None:
            prompt = read_prompt(model, np.asarray(ids, dtype=np.int64), steps=host().steps)
            PROMPTS_READ.put(key, prompt)
    finally:
        reading.release()
        with _MAKING_LOCK:
            if _READING.get(key) is reading:
                del _READING[key]
    return prompt


def _read_off_longer(key: tuple, n_ctx: int) -> tuple[GenerationResult, float, int] | None:
    """A run of fewer tokens read off a cached longer run of the same prompt and settings
    (host().read_off_longer, a class server's: no model call), or None. made_with 0 says it was
    read off."""
    model_id, version, ids, run = key
    for (m, v, i, longer_run), (longer, _, _) in reversed(GENERATIONS.entries()):
        if (m, v, i) == (model_id, version, ids):
            result = host().read_off_longer(longer, longer_run, run, n_ctx)
            if result is not None:
                GENERATIONS.put(key, (result, 0.0, 0))
                return result, 0.0, 0
    return None


def _generation_keys(state: Subject, ids: tuple[int, ...], runs: dict[str, Run]) -> dict:
    version = model_version(state.model_id)
    return {name: (state.model_id, version, ids, run) for name, run in runs.items()}


def _made(keys: dict[str, tuple], n_ctx: int) -> dict:
    return {name: GENERATIONS.get(key) or _read_off_longer(key, n_ctx)
            for name, key in keys.items()}


def made_generations(state: Subject, ids: Sequence[int], runs: dict[str, Run],
                     ) -> dict[str, tuple[GenerationResult, float, int] | None]:
    """name -> what generations() would give for each run if any session of this process made
    it already (or a longer run it can be read off), else None: never a model call."""
    ids = tuple(int(i) for i in ids)
    return _made(_generation_keys(state, ids, runs), state.config.n_ctx)


def prompt_logits(state: Subject, ids: Sequence[int]) -> np.ndarray:
    """The next-token logits (V,) after `ids`: the prompt read every generation of `ids` starts
    from (cached with its keys and values, so a run asked for next does not read it again)."""
    return _prompt_read(state.model_id, model_version(state.model_id),
                        tuple(int(i) for i in ids), state.model).logits


def generations(state: Subject, ids: Sequence[int], runs: dict[str, Run], *,
                watch: Written | None = None,
                ) -> dict[str, tuple[GenerationResult, float, int]]:
    """name -> (result, seconds, made_with) of tinygpt.decoding.generation.generate on `ids` for
    each run,
    cached per (model, ids, run). The runs not cached yet are generated together, one batched
    model step for all of them on a class server (host().generate_runs); `seconds` is the time
    of that whole batch and `made_with` how many runs it made (0: read off a longer cached run,
    no model call).
    watch: shown, every WATCH_EVERY seconds while the runs are made, what they wrote so far
    (it runs on this, the page's, thread, so it may draw)."""
    ids = tuple(int(i) for i in ids)
    keys = _generation_keys(state, ids, runs)
    found = _made(keys, state.config.n_ctx)
    if all(hit is not None for hit in found.values()):
        return found
    if watch is not None:
        return _generate_watched(state, ids, runs, keys, watch)
    with st.spinner("Generating…"):
        return _generate_missing(state, ids, runs, keys, host().run_cost())


WATCH_EVERY = 0.3  # seconds: the longest wait between two looks at a generation under way
DRAW_GAP = 0.1  # seconds: the shortest gap between two drawings of it (a fast model's steps
#                 are not each sent to the browser)
_UNDER_WAY: dict[str, threading.Event] = {}  # session id -> set when its generation ends


def _generate_watched(state: Subject, ids: tuple[int, ...], runs: dict[str, Run],
                      keys: dict[str, tuple], watch: Written,
                      ) -> dict[str, tuple[GenerationResult, float, int]]:
    """_generate_missing in a helper thread, while this thread shows what the runs have written
    so far. If the page run stops (the student clicked elsewhere), the runs still finish and
    are cached for the next look."""
    cost = host().run_cost()
    latest: list[dict[str, np.ndarray]] = [{}]  # replaced whole by the runs' steps
    outcome: dict = {}
    done = threading.Event()
    news = threading.Event()  # set by each step: the watcher draws at once, not at its next look

    def written(tokens: dict[str, np.ndarray]) -> None:
        latest[0] = tokens
        news.set()

    tab = host().streamlit.session_id()
    earlier = _UNDER_WAY.get(tab) if tab else None
    if earlier is not None:  # one generation under way per tab: clicking on does not pile
        with host().outside_the_line():  # them up (its page run stopped, it did not)
            earlier.wait()
    if tab:
        _UNDER_WAY[tab] = done

    def make() -> None:
        started = time.thread_time()
        try:
            outcome["found"] = _generate_missing(state, ids, runs, keys, cost,
                                                 on_written=written)
        except BaseException as err:  # noqa: BLE001 - raised again on the page's thread
            outcome["error"] = err
        finally:
            if cost is not None:
                cost.add(time.thread_time() - started)
            if tab and _UNDER_WAY.get(tab) is done:
                del _UNDER_WAY[tab]
            done.set()
            news.set()

    threading.Thread(target=make, name="generation", daemon=True).start()
    shown = latest[0]
    with host().outside_the_line():  # waiting and drawing a few lines: no page slot
        while not done.is_set():
            news.wait(WATCH_EVERY)
            news.clear()
            if latest[0] is not shown and not done.is_set():  # only when the runs wrote more
                shown = latest[0]
                watch(shown)
                done.wait(DRAW_GAP)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["found"]
