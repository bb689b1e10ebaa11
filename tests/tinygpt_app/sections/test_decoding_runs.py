"""Which runs the Decoding page writes: the one threshold that makes a model large, its default
number of new tokens, and the runs a session asked for (per model and prompt)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the section reads st.session_state")
from tinygpt.network.config import GPTConfig  # noqa: E402
from tinygpt.network.model import GPT  # noqa: E402
from tinygpt_app.sections import decoding_runs  # noqa: E402

SMALL = GPT(GPTConfig(vocab_size=40, n_ctx=16, n_embd=16, n_head=2, n_layer=1), seed=0)


def test_a_model_is_large_past_the_parameter_count_and_starts_with_fewer_tokens(monkeypatch):
    assert not decoding_runs.writes_on_demand(SMALL)
    assert decoding_runs.default_new_tokens(SMALL) == decoding_runs.DEFAULT_NEW
    monkeypatch.setattr(decoding_runs, "LARGE_MODEL_PARAMETERS", SMALL.num_parameters() - 1)
    assert decoding_runs.writes_on_demand(SMALL)
    assert decoding_runs.default_new_tokens(SMALL) == decoding_runs.DEFAULT_NEW_LARGE
    assert decoding_runs.DEFAULT_NEW_LARGE < decoding_runs.DEFAULT_NEW


def test_gpt2_small_and_smollm2_are_large_and_the_shipped_model_is_not():
    """The counts of GPT-2 small (124,439,808), SmolLM2-135M (134,515,008) and the shipped
    model (4,273,664) against the one threshold."""
    assert 4_273_664 < decoding_runs.LARGE_MODEL_PARAMETERS < 124_439_808 < 134_515_008


class Kept:
    """A session slot's stand-in (kit.slots.Slot: get and set) outside a script run."""

    def __init__(self) -> None:
        self.value = None

    def get(self):
        return self.value

    def set(self, value):
        self.value = value
        return value


def test_the_runs_asked_for_belong_to_one_model_and_prompt():
    store = Kept()
    romeo = decoding_runs.subject_of("gpt2", [1, 2, 3])
    assert decoding_runs.asked_runs(romeo, store) == set()
    decoding_runs.ask(romeo, ["greedy"], store)
    decoding_runs.ask(romeo, ["beam", "greedy"], store)
    assert decoding_runs.asked_runs(romeo, store) == {"greedy", "beam"}
    assert decoding_runs.asked_runs(decoding_runs.subject_of("gpt2", [1, 2]), store) == set()
    assert decoding_runs.asked_runs(romeo, store) == set()  # a new prompt forgot them
    assert decoding_runs.subject_of("gpt2", (1, 2)) != decoding_runs.subject_of("other", (1, 2))


def test_a_long_prompts_subject_fits_the_session_slot():
    """The slot holds at most kit.slots.SLOT_BYTES: a 1,024-token prompt's subject fits (its
    ids did not: the Decoding page failed on GPT-2 at 200 tokens), and another prompt of the
    same length is another subject."""
    from tinygpt_app.compute.shared_cache import nbytes_of
    from tinygpt_app.kit.slots import SLOT_BYTES

    long = list(range(1024))
    subject = decoding_runs.subject_of("gpt2", long)
    assert nbytes_of((subject, {"greedy", "sampled", "beam"})) < SLOT_BYTES
    assert decoding_runs.subject_of("gpt2", [*long[:-1], 7]) != subject
    assert decoding_runs.subject_of("gpt2", long) == subject


def test_asking_for_a_run_hurries_its_turn_on_the_server():
    """The write buttons' callback tells the host the student now waits for words to come
    (on a class server, that run's turn goes first: tinygpt_hosting.serving.turn.hurry)."""
    from tinygpt_app import host

    hurried, before = [], host.host()
    try:
        host.install(host.Host(name="recording", hurry=lambda: hurried.append(True)))
        decoding_runs.ask(decoding_runs.subject_of("gpt2", [1, 2]), ["sample"], Kept())
        host.install(host.ONE_USER)
        decoding_runs.ask(decoding_runs.subject_of("gpt2", [1, 2]), ["sample"], Kept())
    finally:
        host.install(before)  # the wing, when an earlier test plugged it in
    assert hurried == [True]
