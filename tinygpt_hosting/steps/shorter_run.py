"""A shorter generation read off a longer one of the same prompt and settings, without the model.

Asking for fewer new tokens should not cost a new generation when a longer one is at hand:
  - greedy and sampling make their tokens one by one, and step i never looks at how many
    tokens were asked for (sampling draws one uniform number per step from the same seeded
    generator), so the first n steps of a longer run are the run of n tokens;
  - beam search (tinygpt.decoding.beam_search) is the same for its first n - 1 steps too; only step
  n
    differs, where the length limit stops every candidate. Its candidates are those the longer
    run recorded at that step, so the step is redone from the record, with no model call.
    With early_stopping="never" and a positive length penalty, every step's stopping test
    looks at the length limit, so such runs are not read off (None).

The result equals a separate generate() of n tokens
(tests/tinygpt_hosting/steps/test_shorter_run.py).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from tinygpt.decoding.beam_search import (
    NEG_INF_SCORE,
    BeamStep,
    Hypothesis,
    _continue,
    _finish,
    _Search,
    _update_improvement,
)
from tinygpt.decoding.generation import GenerationResult, Run


def same_but_longer(run: Run, longer: Run) -> bool:
    """True when `longer` is `run` with more new tokens asked for."""
    return (longer.max_new_tokens > run.max_new_tokens
            and dataclasses.replace(longer, max_new_tokens=run.max_new_tokens) == run)


def shorter(longer: GenerationResult, longer_run: Run, run: Run, n_ctx: int
            ) -> GenerationResult | None:
    """`run`'s result on the same prompt, read off `longer` (made by `longer_run`), or None."""
    if not same_but_longer(run, longer_run):
        return None
    n = run.max_new_tokens
    if run.strategy == "beam":
        return _shorter_beam(longer, run, n_ctx)
    if len(longer.tokens) < n:  # it stopped early (EOS, context): so does the shorter run
        return longer
    reason = "eos" if (run.eos_token_id is not None
                       and int(longer.tokens[n - 1]) == run.eos_token_id) else "max_new_tokens"
    prompt_len = len(longer.all_ids) - len(longer.tokens)
    return GenerationResult(longer.tokens[:n].copy(), longer.all_ids[:prompt_len + n].copy(),
                            reason, list(longer.steps[:n]))


def _shorter_beam(longer: GenerationResult, run: Run, n_ctx: int) -> GenerationResult | None:
    if run.early_stopping == "never" and run.length_penalty > 0.0:
        return None
    history = longer.beam_history or []
    prompt = longer.all_ids[: len(longer.all_ids) - len(longer.tokens)]
    max_length = min(len(prompt) + run.max_new_tokens, n_ctx)
    last = max_length - len(prompt) - 1  # index of the step the length limit ends
    if last < 0:
        return None
    if len(history) <= last:  # it stopped before the step: the same run, its own stop reason
        return dataclasses.replace(longer, stop_reason=_beam_reason(longer.tokens, run,
                                                                    prompt, max_length))
    s = _state_before(history, last, prompt, run, max_length)
    candidates = [dataclasses.replace(c, status="dropped", final_score=None, slot=None)
                  for c in history[last].candidates]
    hits = np.ones(len(candidates), dtype=bool)  # the length limit stops them all
    _finish(s, candidates, hits)
    _continue(s, candidates, hits)
    _update_improvement(s)
    step = BeamStep(position=len(prompt) + last, candidates=candidates,
                    running=[row[len(prompt):].tolist() for row in s.running],
                    running_scores=s.running_scores.tolist(),
                    finished=[Hypothesis(list(h.tokens), h.score) for h in s.finished],
                    improvement_possible=s.improvement_possible)
    winner = s.finished[0]
    tokens = np.array(winner.tokens, dtype=np.int64)
    return GenerationResult(tokens, np.concatenate([prompt, tokens]),
                            _beam_reason(tokens, run, prompt, max_length),
                            [], [*history[:last], step], winner.score)


def _beam_reason(tokens: np.ndarray, run: Run, prompt: np.ndarray, max_length: int) -> str:
    """Why beam search stopped, as tinygpt.decoding.generation says it."""
    if run.eos_token_id is not None and len(tokens) and int(tokens[-1]) == run.eos_token_id:
        return "eos"
    return "context_full" if max_length < len(prompt) + run.max_new_tokens else "max_new_tokens"


def _state_before(history: list[BeamStep], last: int, prompt: np.ndarray, run: Run,
                  max_length: int) -> _Search:
    """The search as it stood before step `last`, from the record of step last - 1."""
    beams = run.num_beams
    if last == 0:
        running = np.repeat(prompt[None, :], beams, axis=0)
        scores = np.array([0.0] + [NEG_INF_SCORE] * (beams - 1))
        finished, improvement = [], True
    else:
        before = history[last - 1]
        running = np.array([[*prompt.tolist(), *row] for row in before.running], dtype=np.int64)
        scores = np.array(before.running_scores, dtype=np.float64)
        finished, improvement = copy.deepcopy(before.finished), before.improvement_possible
    return _Search(prompt_len=len(prompt), max_length=max_length, num_beams=beams,
                   length_penalty=float(run.length_penalty), early_stopping=run.early_stopping,
                   eos=run.eos_token_id, running=running, running_scores=scores,
                   finished=finished, improvement_possible=improvement)
