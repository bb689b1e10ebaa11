"""Several generations of one prompt in lockstep: one batched step of the model for all of them.

A decoding step of one sequence reads every weight of the model to compute a single row: on
GPT-2 small that is 500 MB of memory for about 0.1 GFLOP, so the memory, not the arithmetic,
sets its time. Greedy, sampling and beam search of the same prompt (the Decoding page shows all
three) can share that read. Their rows go through the model together, one (B, 1) step with
each row's own keys and values in one KV cache, B = 1 + 1 + num_beams.

Each run keeps its own loop, unchanged (tinygpt.decoding, tinygpt.beam_search): it runs in a
thread of its own and asks its Seat for the next logits. The Table waits until every run still
going has asked, then does one batched step and hands each run its rows. A run that stops
(EOS, its length) leaves the table, and its rows leave the cache. The numbers are those of
separate runs up to float rounding (the batched matrix products may add in another order);
tests/core/test_lockstep.py compares the two.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from tinygpt.decoding import GenerationResult, PromptRead, Run, _check_generate_args, read_prompt


class Table:
    """The shared KV cache of all runs' rows, and the rendezvous where they meet each step."""

    def __init__(self, model, prompt: PromptRead, rows: Sequence[int], capacity: int) -> None:
        self.model = model
        self.prompt = prompt
        self.rows = list(rows)  # rows of each run (seat), in seat order
        self.in_cache = list(range(len(rows)))  # the seats whose rows the cache holds, in order
        every_row = np.zeros(sum(rows), dtype=np.int64)  # all start from the prompt's one row
        self.cache = prompt.cache.take(every_row, capacity)  # room for the longest run only
        self.running = set(range(len(rows)))
        self.asked: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self.answers: dict[int, np.ndarray] = {}
        self.failure: BaseException | None = None
        self.turn = threading.Condition()

    def ask(self, seat: int, tokens: np.ndarray, parents: np.ndarray | None) -> np.ndarray:
        """A run's new tokens (b,) (and which of its old rows each extends) -> its logits (b, V)."""
        with self.turn:
            self.asked[seat] = (tokens, parents)
            self._step_when_all_asked()
            while seat not in self.answers and self.failure is None:
                self.turn.wait()
            if self.failure is not None:
                raise RuntimeError("the shared decoding step failed") from self.failure
            return self.answers.pop(seat)

    def leave(self, seat: int) -> None:
        """A run is done: the others no longer wait for it."""
        with self.turn:
            self.running.discard(seat)
            self._step_when_all_asked()

    def _step_when_all_asked(self) -> None:
        if not self.running or any(seat not in self.asked for seat in self.running):
            return
        seats = sorted(self.running)
        offsets = np.cumsum([0] + [self.rows[s] for s in self.in_cache])[:-1]
        start = dict(zip(self.in_cache, offsets, strict=True))  # seat -> its first cache row
        rows = []  # for each new cache row, the old cache row it continues
        for seat in seats:
            parents = self.asked[seat][1]
            local = np.arange(self.rows[seat]) if parents is None else np.asarray(parents)
            rows.append(start[seat] + local)
        tokens = np.concatenate([self.asked[seat][0] for seat in seats])  # (B,)
        try:
            self.cache.reorder(np.concatenate(rows))  # finished runs' rows drop out here
            logits = self.model.forward_cached(tokens[:, None], self.cache)[:, -1]  # (B, V)
        except Exception as err:  # noqa: BLE001 - every waiting run wakes up and fails
            self.failure = err
            self.turn.notify_all()
            return
        ends = np.cumsum([self.rows[seat] for seat in seats])
        for seat, part in zip(seats, np.split(logits, ends[:-1]), strict=True):
            self.answers[seat] = part
        self.in_cache, self.asked = seats, {}
        self.turn.notify_all()


class Seat:
    """One run's view of the table: the `first` / `next` that decoding and beam search call."""

    def __init__(self, table: Table, seat: int) -> None:
        self.table, self.seat = table, seat

    def first(self, sequences: np.ndarray) -> np.ndarray:
        """(b, T) -> (b, V): the prompt was read once for everyone."""
        return np.repeat(self.table.prompt.logits[None], len(sequences), axis=0)

    def next(self, sequences: np.ndarray, parents: np.ndarray | None = None) -> np.ndarray:
        """(b, T) whose last tokens are new -> (b, V)."""
        return self.table.ask(self.seat, sequences[:, -1].astype(np.int64), parents)


def generate_together(model, ids, runs: Sequence[Run], prompt: PromptRead | None = None, *,
                      on_thread_cpu: Callable[[float], None] | None = None,
                      ) -> list[GenerationResult]:
    """generate(model, ids, ...) for each of `runs`, with one batched model step per token
    for all of them. Returns one GenerationResult per run, in order.

    on_thread_cpu: called by each run's thread, as it ends, with the CPU seconds it used (the
    runs' threads are not the caller's: a server that charges CPU time to whoever asked for it
    adds these)."""
    if not runs:
        return []
    eos_ids = [r.eos_token_id for r in runs]
    ids = _check_generate_args(model, ids, 0, "greedy", 1, None)
    for run, eos in zip(runs, eos_ids, strict=True):
        _check_generate_args(model, ids, run.max_new_tokens, run.strategy, run.num_beams, eos)
    if prompt is None:
        prompt = read_prompt(model, ids)
    elif not np.array_equal(prompt.ids, ids):
        raise ValueError("prompt must be read_prompt of the same ids")
    longest = min(model.config.n_ctx, len(ids) + max(run.max_new_tokens for run in runs))
    table = Table(model, prompt, [run.rows for run in runs], capacity=longest)
    results: list[GenerationResult | None] = [None] * len(runs)
    errors: list[BaseException] = []

    def play(seat: int) -> None:
        started = time.thread_time()
        try:
            results[seat] = runs[seat].on(model, ids, Seat(table, seat))
        except BaseException as err:  # noqa: BLE001 - raised again by the caller below
            errors.append(err)
        finally:
            table.leave(seat)
            if on_thread_cpu is not None:
                on_thread_cpu(time.thread_time() - started)

    threads = [threading.Thread(target=play, args=(seat,), name=f"lockstep-{seat}")
               for seat in range(len(runs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if table.failure is not None:
        raise table.failure
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]
