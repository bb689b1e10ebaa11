"""tinygpt_app.compute.health: a model's verdict on its numbers, from a bad run seen or a
one-token probe made once, remembered for at most MAX_MODELS models."""

from __future__ import annotations

import numpy as np
import pytest

from tests.apptest_support import TINY
from tinygpt.checkpoint.files import load
from tinygpt.readouts.health import check_run
from tinygpt_app.compute import health
from tinygpt_app.compute.shared_cache import SharedCache, nbytes_of


@pytest.fixture(autouse=True)
def no_verdicts(monkeypatch):
    monkeypatch.setattr(health, "_verdicts", SharedCache(health.VERDICT_BYTES))


class Counting:
    """The tiny model, counting its runs."""

    def __init__(self):
        self.model, self.runs = load(TINY)[0], 0

    def run_with_trace(self, ids):
        self.runs += 1
        return self.model.run_with_trace(ids)


def test_a_good_model_is_probed_once():
    model = Counting()
    first = health.model_health("tiny", 1.0, model)
    assert first.ok and first.first_bad is None
    assert health.model_health("tiny", 1.0, model) is first and model.runs == 1
    health.model_health("tiny", 2.0, model)  # a retrained file is another model
    assert model.runs == 2


def test_a_bad_run_is_the_verdict_and_a_good_one_changes_nothing():
    bad = np.array([[0.0, np.inf]])
    seen = health.note_run("m", 1.0, bad, {"blocks.0.mlp.h": np.array([np.nan])})
    assert not seen.ok and seen.first_bad == "blocks.0.mlp.h"
    health.note_run("m", 1.0, np.zeros((1, 2)), {})  # another prompt runs fine
    assert health.model_health("m", 1.0, Counting()) == seen  # no probe: the bad run stays


def test_verdicts_are_bounded_in_bytes(monkeypatch):
    """The oldest verdicts go first once their bytes pass the budget (three fit here)."""
    one = nbytes_of(check_run(np.array([[np.nan]]), {}))
    monkeypatch.setattr(health, "_verdicts", SharedCache(3 * one + one // 2))
    for i in range(5):
        health.note_run(f"m{i}", 1.0, np.array([[np.nan]]), {})
    assert [key for key, _ in health._verdicts.entries()] == [
        ("m2", 1.0), ("m3", 1.0), ("m4", 1.0)]
