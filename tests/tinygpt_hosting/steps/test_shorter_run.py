"""tinygpt_hosting.steps.shorter_run: a run of n tokens read off a longer one equals a separate
run of n."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tinygpt.decoding.generation import GenerationResult, Run, generate
from tinygpt.network.model import GPT, GPTConfig
from tinygpt_hosting.steps.shorter_run import same_but_longer, shorter

N_CTX = 24


@pytest.fixture(scope="module")
def model() -> GPT:
    model = GPT(GPTConfig(vocab_size=12, n_ctx=N_CTX, n_embd=16, n_head=2, n_layer=2))
    for p in model.parameters().values():
        p *= 4.0  # peaky enough that EOS is chosen now and then, never exactly tied
    return model


def run_alone(model: GPT, ids, run: Run) -> GenerationResult:
    """The reference: generate() itself, for exactly this run."""
    settings = dataclasses.asdict(run)
    return generate(model, ids, settings.pop("max_new_tokens"), **settings)


def assert_same(got: GenerationResult, want: GenerationResult) -> None:
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.all_ids.tolist() == want.all_ids.tolist()
    assert got.stop_reason == want.stop_reason
    assert [(s.token, s.u) for s in got.steps] == [(s.token, s.u) for s in want.steps]
    if want.score is None:
        assert got.score is None
    else:
        assert got.score == pytest.approx(want.score, abs=1e-9)
    assert (got.beam_history is None) == (want.beam_history is None)
    for a, b in zip(got.beam_history or [], want.beam_history or [], strict=True):
        assert a.position == b.position and a.running == b.running
        assert a.improvement_possible == b.improvement_possible
        assert [(h.tokens, round(h.score, 9)) for h in a.finished] == \
            [(h.tokens, round(h.score, 9)) for h in b.finished]
        assert [(c.rank, c.parent, c.token, c.status, c.slot) for c in a.candidates] == \
            [(c.rank, c.parent, c.token, c.status, c.slot) for c in b.candidates]
        assert [c.final_score for c in a.candidates] == pytest.approx(
            [c.final_score for c in b.candidates], abs=1e-9)


RUNS = [
    Run(12, "greedy"),
    Run(12, "greedy", eos_token_id=3),
    Run(12, "sample", temperature=1.3, top_p=0.9, seed=5),
    Run(12, "sample", top_k=4, seed=11, eos_token_id=3),
    Run(12, "beam", num_beams=3),
    Run(12, "beam", num_beams=3, eos_token_id=3),
    Run(12, "beam", num_beams=2, eos_token_id=5, length_penalty=0.5, early_stopping=True),
    Run(12, "beam", num_beams=4, eos_token_id=7, length_penalty=-1.0, early_stopping="never"),
]


@pytest.mark.parametrize("longer_run", RUNS, ids=lambda r: f"{r.strategy}-{r.eos_token_id}")
@pytest.mark.parametrize("prompt", [[1, 2, 3], [4] * 16], ids=["short", "near the context"])
def test_every_shorter_run_equals_a_run_of_its_own(model: GPT, longer_run: Run, prompt) -> None:
    longer = run_alone(model, prompt, longer_run)
    for n in range(1, longer_run.max_new_tokens):
        run = dataclasses.replace(longer_run, max_new_tokens=n)
        assert_same(shorter(longer, longer_run, run, N_CTX), run_alone(model, prompt, run))


def test_the_eos_cases_are_reached(model: GPT) -> None:
    """The EOS runs above stop early for some n (else they would not test that branch)."""
    reasons = {run_alone(model, [1, 2, 3], r).stop_reason for r in RUNS if r.eos_token_id}
    assert "eos" in reasons


def test_beam_never_with_a_length_penalty_is_not_read_off(model: GPT) -> None:
    """early_stopping="never" with length_penalty > 0 looks at the length limit every step."""
    longer_run = Run(12, "beam", num_beams=3, early_stopping="never")
    longer = run_alone(model, [1, 2], longer_run)
    assert shorter(longer, longer_run, dataclasses.replace(longer_run, max_new_tokens=5),
                   N_CTX) is None


def test_only_the_same_settings_with_more_tokens_count() -> None:
    run = Run(5, "sample", seed=1)
    assert same_but_longer(run, Run(9, "sample", seed=1))
    assert not same_but_longer(run, Run(9, "sample", seed=2))
    assert not same_but_longer(run, Run(5, "sample", seed=1))
    assert not same_but_longer(Run(9, "sample", seed=1), run)


def test_the_result_is_a_copy(model: GPT) -> None:
    longer_run = Run(8, "greedy")
    longer = run_alone(model, [1, 2, 3], longer_run)
    before = longer.tokens.copy()
    got = shorter(longer, longer_run, Run(4, "greedy"), N_CTX)
    got.tokens[:] = 0
    np.testing.assert_array_equal(longer.tokens, before)
