"""Generations in lockstep (tinygpt.lockstep) against the same generations run one by one."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.decoding import Run, generate, read_prompt
from tinygpt.lockstep import generate_together
from tinygpt.model import GPT, GPTConfig


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


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_strategies_together_give_what_each_gives_alone(seed):
    model = model_of(seed=seed)
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
    assert len(reported) == len(runs) and all(s >= 0 for s in reported)
    assert sum(reported) > 0.005  # 300 batched steps of work: not nothing
