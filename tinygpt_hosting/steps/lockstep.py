"""Several generations of one prompt in lockstep: one batched step of the model for all of them.

A decoding step of one sequence reads every weight of the model to compute a single row: on
GPT-2 small that is 500 MB of memory for about 0.1 GFLOP, so the memory, not the arithmetic,
sets its time. Greedy, sampling and beam search of the same prompt (the Decoding page shows all
three) can share that read. Their rows go through the model together, one (B, 1) step with
each row's own keys and values in one KV cache, B = 1 + 1 + num_beams.

Each run keeps its own loop, unchanged (tinygpt.decoding.generation, tinygpt.decoding.beam_search):
it runs in a
thread of its own and asks its Seat for the next logits. The Table waits until every run still
going has asked, then does one batched step and hands each run its rows. A run that stops
(EOS, its length) leaves the table, and its rows leave the cache. The numbers are those of
separate runs up to float rounding (the batched matrix products may add in another order);
tests/tinygpt_hosting/steps/test_lockstep.py compares the two.

Tables of different prompts can share their steps too (SharedSteps): a server where many
students generate at once makes one pass of the model for all their tables' rows, each row
attending to its own table's cache only (tinygpt.fast.parts.forward_parts).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from tinygpt.decoding.generation import (
    GenerationResult,
    PromptRead,
    Run,
    _check_generate_args,
    read_prompt,
)
from tinygpt.fast.parts import forward_parts


class _Request:
    """A step waiting in SharedSteps: new tokens (b, t), their cache, and who asks (a member
    table, or None for a one-off such as a prompt read)."""

    def __init__(self, model, ids: np.ndarray, cache, member: object | None) -> None:
        self.model, self.ids, self.cache, self.member = model, ids, cache, member
        self.logits: np.ndarray | None = None
        self.cpu = 0.0  # its share of the pass's CPU seconds, by rows
        self.failure: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.logits is not None or self.failure is not None


class SharedSteps:
    """Steps of different generations (other prompts, other students) made as one pass.

    A generation's table joins as a member while it runs. A pass starts when every member
    (of that model) has asked for its next step; it then takes every request waiting for the
    model, members' steps and one-off requests (a new prompt being read) alike, and runs them
    as one forward_parts (tinygpt.fast.parts). So all the generations under way step
    together, and a generation alone never waits for company: no timer, a pass starts as soon
    as it can. One pass at a time: the thread that makes it works for everyone.

    Each request is charged its share of the pass's CPU time by its rows (`_Request.cpu`), and
    `stepped()` says how much CPU this thread spent making passes, so a server that charges CPU
    time to whoever asked for it can charge each student their share and not the whole pass.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._waiting: list[_Request] = []
        self._members: dict[int, object] = {}  # id(member) -> its model
        self._busy = False
        self._here = threading.local()  # per thread: CPU seconds spent making passes

    def join(self, member: object, model) -> None:
        """`member` will ask for a step of `model` each turn until it leaves."""
        with self._cond:
            self._members[id(member)] = model

    def leave(self, member: object) -> None:
        """The passes no longer wait for `member` (it may leave twice)."""
        with self._cond:
            self._members.pop(id(member), None)
            self._cond.notify_all()

    def step(self, model, new_ids: np.ndarray, cache,
             member: object | None = None) -> tuple[np.ndarray, float]:
        """model.forward_cached(new_ids, cache, last_only=True)[:, -1], made together with the
        other requests: (logits (b, V), this request's share of the pass's CPU seconds)."""
        model.check_cached(new_ids, cache)  # a bad request fails alone, before it joins
        mine = _Request(model, new_ids, cache, member)
        with self._cond:
            self._waiting.append(mine)
            self._cond.notify_all()  # it may be the last one a pass waits for
            while not mine.done and (self._busy or not self._everyone_asked(model)):
                self._cond.wait()
            batch = []
            if not mine.done:  # this thread makes the pass
                self._busy = True
                batch = [r for r in self._waiting if r.model is model]
                self._waiting = [r for r in self._waiting if r.model is not model]
        if batch:
            self._run(model, batch)
        if mine.failure is not None:
            raise RuntimeError("the shared decoding step failed") from mine.failure
        return mine.logits, mine.cpu

    def _everyone_asked(self, model) -> bool:
        asked = {id(r.member) for r in self._waiting if r.member is not None}
        return all(key in asked for key, m in self._members.items() if m is model)

    def _run(self, model, batch: list[_Request]) -> None:
        started = time.thread_time()
        try:
            outs = forward_parts(model, [(r.ids, r.cache) for r in batch])
        except Exception as err:  # noqa: BLE001 - every request of this pass fails with it
            outs = [None] * len(batch)
            for r in batch:
                r.failure = err
        cpu = time.thread_time() - started
        rows = sum(r.ids.size for r in batch)
        with self._cond:
            for r, logits in zip(batch, outs, strict=True):
                r.logits, r.cpu = logits, cpu * r.ids.size / rows
            self._here.stepped = self.stepped() + cpu
            self._busy = False
            self._cond.notify_all()

    def stepped(self) -> float:
        """CPU seconds this thread has spent so far making passes (for itself and others)."""
        return getattr(self._here, "stepped", 0.0)


class Table:
    """The shared KV cache of all runs' rows, and the rendezvous where they meet each step."""

    def __init__(self, model, prompt: PromptRead, rows: Sequence[int], capacity: int,
                 steps: SharedSteps | None = None,
                 on_step: Callable[[list[np.ndarray]], None] | None = None) -> None:
        self.model = model
        self.on_step = on_step
        # what each seat's rows have written so far (B_seat, n), for a watcher (on_step)
        self.written = [np.zeros((r, 0), dtype=np.int64) for r in rows]
        self.steps = steps if steps is not None else SharedSteps()  # alone unless shared
        self.steps.join(self, model)  # until its last run leaves
        self.cpu = 0.0  # this table's shares of the passes' CPU seconds
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
            kept = self.written[seat] if parents is None else self.written[seat][parents]
            self.written[seat] = np.concatenate([kept, tokens[:, None]], axis=1)
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
            if not self.running:
                self.steps.leave(self)
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
        if self.on_step is not None:  # each seat's leading row so far (a beam's best first):
            # told before the pass, so a watcher shows the tokens chosen while the model runs
            self.on_step([written[0].copy() for written in self.written])
        try:
            self.cache.reorder(np.concatenate(rows))  # finished runs' rows drop out here
            logits, cpu = self.steps.step(self.model, tokens[:, None], self.cache,
                                          member=self)  # (B, V)
            self.cpu += cpu
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
                      steps: SharedSteps | None = None,
                      on_step: Callable[[list[np.ndarray]], None] | None = None,
                      ) -> list[GenerationResult]:
    """generate(model, ids, ...) for each of `runs`, with one batched model step per token
    for all of them. Returns one GenerationResult per run, in order.

    on_thread_cpu: called with the CPU seconds the runs used: by each run's thread as it ends
    (the runs' threads are not the caller's: a server that charges CPU time to whoever asked
    for it adds these), and once more with the model steps' share.
    steps: a SharedSteps, to step together with other generations that use the same one.
    on_step: called at each model step, before its pass, with what each run has written so far
    (tokens (n,), a beam search's best running beam), to show a generation while it runs;
    keep it quick."""
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
    table = Table(model, prompt, [run.rows for run in runs], capacity=longest, steps=steps,
                  on_step=on_step)
    results: list[GenerationResult | None] = [None] * len(runs)
    errors: list[BaseException] = []

    def play(seat: int) -> None:
        started, stepped = time.thread_time(), table.steps.stepped()
        try:
            results[seat] = runs[seat].on(model, ids, Seat(table, seat))
        except BaseException as err:  # noqa: BLE001 - raised again by the caller below
            errors.append(err)
        finally:
            table.leave(seat)
            if on_thread_cpu is not None:  # passes made here are charged by share, below
                made = table.steps.stepped() - stepped
                on_thread_cpu(time.thread_time() - started - made)

    threads = [threading.Thread(target=play, args=(seat,), name=f"lockstep-{seat}")
               for seat in range(len(runs))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        table.steps.leave(table)
    if on_thread_cpu is not None:
        on_thread_cpu(table.cpu)  # this generation's shares of the passes, whoever made them
    if table.failure is not None:
        raise table.failure
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]
