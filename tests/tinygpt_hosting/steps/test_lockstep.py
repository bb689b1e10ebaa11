"""Generations in lockstep (tinygpt_hosting.steps.lockstep) against the same generations run one by
one."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tinygpt.decoding.generation import Run, generate, read_prompt
from tinygpt.fast.parts import forward_parts
from tinygpt.network.model import GPT, GPTConfig
from tinygpt_hosting.steps import lockstep
from tinygpt_hosting.steps.lockstep import SharedSteps, generate_together


def heard_pass(model, parts):
    """forward_parts, after the model's `before_pass` when a test's model has one: how a
    test holds a pass, counts passes or slows them down."""
    if hasattr(model, "before_pass"):
        model.before_pass(parts)
    return forward_parts(model, parts)


@pytest.fixture(autouse=True)
def passes_are_heard(monkeypatch):
    monkeypatch.setattr(lockstep, "forward_parts", heard_pass)


def model_of(vocab_size: int = 64, n_ctx: int = 32, seed: int = 0) -> GPT:
    model = GPT(GPTConfig(vocab_size=vocab_size, n_ctx=n_ctx, n_embd=32, n_head=4, n_layer=2),
                seed=seed)
    for value in model.parameters().values():  # bigger weights: peakier distributions
        value *= 6.0
    return model


def one_by_one(model, ids, run: Run):
    return generate(model, ids, run.max_new_tokens, strategy=run.strategy,
                    temperature=run.temperature, top_k=run.top_k, top_p=run.top_p,
                    num_beams=run.num_beams, length_penalty=run.length_penalty,
                    early_stopping=run.early_stopping, eos_token_id=run.eos_token_id,
                    seed=run.seed, record_steps=run.record_steps)


def assert_same(together, alone) -> None:
    np.testing.assert_array_equal(together.all_ids, alone.all_ids)
    assert together.stop_reason == alone.stop_reason
    if alone.score is not None:
        assert together.score == pytest.approx(alone.score, abs=1e-4)
    for a, b in zip(together.steps, alone.steps, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)  # float32 sums, other order
        assert a.u == b.u


RUNS = [Run(12, "greedy"), Run(12, "sample", temperature=0.8, top_p=0.9, seed=3),
        Run(12, "beam", num_beams=3)]


LLAMA_SHAPED = dict(norm="rmsnorm", position="rope", n_kv_head=2, mlp="swiglu", n_inner=48,
                    attn_bias=False, proj_bias=False, mlp_bias=False)


@pytest.mark.parametrize("seed, modern", [(0, False), (1, False), (2, False), (0, True)])
def test_three_strategies_together_give_what_each_gives_alone(seed, modern):
    model = model_of(seed=seed)
    if modern:  # RMSNorm, rotary positions, 4 query heads on 2 key/value heads, SwiGLU
        model = GPT(GPTConfig(vocab_size=64, n_ctx=32, n_embd=32, n_head=4, n_layer=2,
                              **LLAMA_SHAPED), seed=seed)
        for value in model.parameters().values():
            value *= 6.0
    ids = np.random.default_rng(seed).integers(0, 64, size=7)
    together = generate_together(model, ids, RUNS)
    for run, result in zip(RUNS, together, strict=True):
        assert_same(result, one_by_one(model, ids, run))


def test_runs_that_stop_early_leave_the_others_going():
    """An end-of-text token stops the sampled run first; the context stops the rest."""
    model = model_of(n_ctx=16, seed=4)
    ids = np.arange(5)
    greedy = one_by_one(model, ids, Run(30, "greedy"))
    eos = int(greedy.tokens[2])  # greedy meets it at its third token
    runs = [Run(30, "greedy", eos_token_id=eos), Run(30, "sample", seed=1),
            Run(0, "greedy"), Run(30, "beam", num_beams=2, eos_token_id=eos)]
    together = generate_together(model, ids, runs, prompt=read_prompt(model, ids))
    assert together[0].stop_reason == "eos" and together[1].stop_reason == "context_full"
    assert len(together[2].tokens) == 0
    for run, result in zip(runs, together, strict=True):
        assert_same(result, one_by_one(model, ids, run))


def test_a_failing_run_does_not_leave_the_others_waiting():
    model = model_of()
    ids = np.arange(4)
    with pytest.raises(ValueError):
        generate_together(model, ids, [Run(5, "greedy"), Run(5, "sample", seed=0),
                                       Run(5, "greedy", eos_token_id=10_000)])
    with pytest.raises(ValueError):
        generate_together(model, ids, [Run(5, "greedy")], prompt=read_prompt(model, ids[:3]))


def test_the_shared_cache_holds_only_the_longest_run():
    """The rows are copied with room for the prompt and the longest run, not the context."""
    model = model_of(n_ctx=32)
    ids = np.arange(5)
    prompt = read_prompt(model, ids)
    small = prompt.cache.take(np.zeros(3, dtype=np.int64), capacity=9)
    assert small.keys[0].shape[2] == 9 and small.length == 5
    with pytest.raises(ValueError):
        model.forward_cached(np.zeros((3, 5), dtype=np.int64), small)  # 10 > 9 positions
    with pytest.raises(ValueError):
        prompt.cache.take(np.zeros(1, dtype=np.int64), capacity=4)  # less than the prompt
    assert generate_together(model, ids, []) == []


def test_each_runs_thread_reports_the_cpu_it_used():
    """The runs play in threads of their own: the caller learns what they cost (a server
    charges it to the tab that asked), and the sum is about what the same work costs inline."""
    model = model_of(n_ctx=128)
    ids = np.random.default_rng(0).integers(0, 64, size=7)
    runs = [Run(100, "greedy"), Run(100, "sample", seed=1), Run(100, "beam", num_beams=3)]
    reported: list[float] = []
    generate_together(model, ids, runs, on_thread_cpu=reported.append)
    assert len(reported) == len(runs) + 1 and all(s >= 0 for s in reported)  # + the passes
    assert reported[-1] > 0.001  # the model's passes: charged once, by share
    assert sum(reported) > 0.005  # 300 batched steps of work: not nothing


# ----------------------------------------------------------------------------- SharedSteps


class HeldModel(GPT):
    """A real model whose first pass waits for a signal: the requests that come meanwhile
    must all go into the next pass, together."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release, self.passes = threading.Event(), []

    def before_pass(self, parts):
        self.passes.append(len(parts))
        if len(self.passes) == 1:
            assert self.release.wait(10)


def test_requests_that_wait_during_a_pass_go_into_the_next_one_together():
    model = HeldModel(GPTConfig(vocab_size=64, n_ctx=32, n_embd=32, n_head=4, n_layer=2), seed=0)
    steps = SharedSteps()
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 64, size=n) for n in (3, 5, 8)]
    results = {}

    def one(i):
        cache = model.new_cache(1)
        model.forward_cached(prompts[i][None, :-1], cache)
        results[i] = steps.step(model, prompts[i][None, -1:], cache)

    first = threading.Thread(target=one, args=(0,))
    first.start()
    while not model.passes:
        time.sleep(0.001)
    others = [threading.Thread(target=one, args=(i,)) for i in (1, 2)]
    for thread in others:
        thread.start()
    while len(steps._waiting) < 2:  # both wait behind the held pass
        time.sleep(0.001)
    model.release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert model.passes == [1, 2]
    for i, prompt in enumerate(prompts):
        logits, cpu = results[i]
        np.testing.assert_allclose(logits[0], model.forward(prompt)[-1], rtol=1e-4, atol=1e-5)
        assert cpu >= 0


def test_generations_of_other_prompts_share_passes_and_give_what_each_gives_alone():
    """Four students' generations at once, in threads, through one SharedSteps: the same
    tokens as each alone, in fewer passes than their steps added up."""
    model = model_of(n_ctx=64, seed=1)
    steps = SharedSteps()
    calls = []
    model.before_pass = lambda parts: calls.append(len(parts))
    rng = np.random.default_rng(5)
    prompts = [rng.integers(0, 64, size=n) for n in (2, 4, 6, 9)]
    got = {}

    def student(i):
        got[i] = generate_together(model, prompts[i], RUNS, steps=steps)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for i, prompt in enumerate(prompts):
        for run, together in zip(RUNS, got[i], strict=True):
            assert_same(together, one_by_one(model, prompt, run))
    assert sum(calls) == len(prompts) * (RUNS[0].max_new_tokens - 1)  # every table's steps
    assert len(calls) < sum(calls)  # ... in fewer passes: some were shared


def test_a_request_that_cannot_run_fails_alone_and_another_model_is_never_mixed_in():
    a, b = model_of(seed=0), model_of(seed=1)
    steps = SharedSteps()
    full = a.new_cache(1, capacity=1)
    a.forward_cached(np.array([[1]]), full)
    with pytest.raises(ValueError, match="room for 1"):
        steps.step(a, np.array([[2]]), full)
    cache = b.new_cache(1)
    logits, _ = steps.step(b, np.array([[3]]), cache)
    np.testing.assert_allclose(logits[0], b.forward(np.array([3]))[-1], rtol=1e-5, atol=1e-6)


def test_a_watcher_is_told_the_tokens_chosen_before_the_pass_that_reads_them():
    """A student sees the words as soon as they are chosen, not a pass later: at each model
    step the watcher hears first, then the pass runs."""
    events: list[str] = []

    class Recorded(GPT):
        def before_pass(self, parts):
            events.append("pass")

    model = Recorded(GPTConfig(vocab_size=64, n_ctx=32, n_embd=32, n_head=4, n_layer=2), seed=1)
    generate_together(model, np.array([3, 1, 4]), RUNS, on_step=lambda w: events.append("told"))
    assert events == ["told", "pass"] * (RUNS[0].max_new_tokens - 1)


def test_a_watcher_sees_each_run_grow_one_token_a_step_along_the_tokens_it_returns():
    model = model_of(n_ctx=64, seed=2)
    ids = np.array([3, 1, 4, 1, 5])
    seen: list[list[np.ndarray]] = []
    results = generate_together(model, ids, RUNS, on_step=seen.append)
    assert len(seen) == RUNS[0].max_new_tokens - 1  # one call per model step
    for n, written in enumerate(seen, start=1):
        assert [len(w) for w in written] == [n] * len(RUNS)
    for run_seen, result in zip(zip(*seen, strict=True), results, strict=True):
        # greedy and sampling: each step's tokens are the start of what the run returned
        if result.score is None:
            np.testing.assert_array_equal(run_seen[-1], result.tokens[:-1])
    best_beam = seen[-1][2]  # beam search: its best running beam, a real path of the tree
    assert len(best_beam) == RUNS[2].max_new_tokens - 1


@pytest.mark.parametrize("prompt_length, new", [(1, 3), (100, 4)])
def test_a_lockstep_run_costs_what_kv_cache_reuse_says(prompt_length, new, monkeypatch):
    """A class server's greedy run (the prompt read, then the shared table) does the work and
    allocates the bytes tinygpt.readouts.kv_reuse counts, as a one-user run does
    (tests/tinygpt/readouts/test_kv_reuse.py)."""
    from tests.tinygpt.readouts.test_kv_reuse import GPT2_SHAPE, Counter
    from tinygpt import kv_cache_reuse
    from tinygpt.readouts.kv_reuse import work_saved

    model = GPT(GPT2_SHAPE, seed=0)
    ids = (np.arange(prompt_length) * 7) % model.config.vocab_size
    r = kv_cache_reuse(model, prompt_length, new)
    with monkeypatch.context() as patch:
        counted = Counter(patch, model.config)
        prompt = read_prompt(model, ids)
        made = generate_together(model, ids, [Run(new, "greedy", record_steps=False)], prompt)[0]
    assert len(made.tokens) == len(r.computed) == new
    assert counted.multiply_adds == work_saved(r).cached
    assert counted.bytes == r.bytes_allocated == r.bytes_prompt_read + r.bytes_per_row
