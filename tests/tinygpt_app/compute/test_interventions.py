"""tinygpt_app.compute.interventions: each shared entry equals what tinygpt.readouts computes
directly, is made once (a second call is the same object) and is read-only."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute uses streamlit's caches")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt_app.compute import interventions as iv  # noqa: E402
from tinygpt_app.compute.models import SESSION_PREFIX  # noqa: E402

_fresh = itertools.count()


@dataclass
class Subject:
    model_id: str
    model: object
    tokenizer: object
    prompt: str
    ids: np.ndarray
    position: int = 0


@pytest.fixture
def subject() -> Subject:
    model, tok = load(TINY)
    prompt = "ROMEO:\nBut soft, what light"
    ids = np.array(tok.encode(prompt), dtype=np.int64)
    return Subject(f"{SESSION_PREFIX}interventions-test #{next(_fresh)}", model, tok, prompt,
                   ids)


def test_the_grid_is_made_once_and_equals_the_api(subject):
    clean, corrupt = subject.ids, subject.ids[::-1].copy()
    assert iv.patching_cached(subject, clean, corrupt, 5, "attn_out") is None
    calls = []
    grid = iv.patching(subject, clean, corrupt, 5, "attn_out", lambda d, t: calls.append(d))
    assert calls == [1, 2]
    assert iv.patching_cached(subject, clean, corrupt, 5, "attn_out") is grid
    assert iv.patching(subject, clean, corrupt, 5, "attn_out") is grid
    direct = ti.activation_patching(subject.model, clean, corrupt, 5, "attn_out",
                                    max_positions=iv.grid_positions(subject, len(clean)))
    np.testing.assert_array_equal(grid.scores, direct.scores)
    row = iv.patched_row(subject, clean, corrupt, 1, 3, "attn_out")
    assert not row.flags.writeable
    np.testing.assert_array_equal(row, ti.patched_logits(subject.model, clean, corrupt, 1, 3,
                                                         "attn_out"))


def test_ablation_and_steering_equal_the_api(subject):
    model, ids = subject.model, subject.ids
    row = iv.ablated_row(subject, [(1, 2), (0, 1)], [(0, 7)], True)
    assert iv.ablated_row(subject, [(0, 1), (1, 2)], [(0, 7)], True) is row  # same set
    np.testing.assert_array_equal(row, ti.ablated_logits(model, ids, heads=[(0, 1), (1, 2)],
                                                         neurons=[(0, 7)], mean=True))
    a, b = ids[:4], ids[2:9]
    logits, new = iv.steered(subject, a, b, 1, 3.0)
    vector = ti.steering_vector(model, a, b, 1)
    np.testing.assert_array_equal(logits, ti.steered_logits(model, ids, vector, 1, 3.0)[-1])
    steered = generate(model, ids, iv.CONTINUATION_TOKENS,
                       interventions=ti.steering(model, vector, 1, 3.0)).tokens
    np.testing.assert_array_equal(new, steered)
    np.testing.assert_array_equal(iv.continuation(subject),
                                  generate(model, ids, iv.CONTINUATION_TOKENS).tokens)


def test_a_large_model_patches_fewer_positions(subject):
    assert iv.grid_positions(subject, 16) == 16  # the tiny model: all of them
    config = subject.model.config
    block = sum(a.size for n, a in subject.model.parameters().items()
                if n.startswith("blocks.0."))
    per_position = 16 * block * config.n_layer * (config.n_layer + 1) // 2 + (
        config.n_layer * config.n_embd * config.vocab_size)
    assert per_position * 16 <= iv.GRID_MACS
