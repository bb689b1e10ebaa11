"""Rotary positions' readouts, against rotations written out by hand: a pair turns by
p·θ^(−2j/hs); the score at the real offset is the model's; shifting every position leaves
the scores unchanged, and the same check fails for an absolute position scheme."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tinygpt.readouts.modern_models import GPT2, LLAMA, QWEN2, prompt, random_model
from tinygpt.readouts.modern.rotary import (
    rotary_pair,
    row_without_rotation,
    score_by_offset,
    shift_check,
    shift_difference,
)

IDS = prompt(24)


@pytest.fixture(scope="module", params=[LLAMA, QWEN2], ids=["llama", "qwen2"])
def traced(request):
    model = random_model(request.param, np.float32)
    _, trace = model.run_with_trace(IDS)
    return model, trace


def turn(vector: np.ndarray, angle: float) -> np.ndarray:
    """A 2-D vector turned by `angle` radians, written out."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([c * vector[0] - s * vector[1], s * vector[0] + c * vector[1]])


def test_a_pair_turns_by_its_angle_at_each_position(traced):
    model, trace = traced
    hs, theta = model.config.head_size, model.config.rope_theta
    pair = rotary_pair(model, trace, 1, 3, 1)
    assert pair.dims == (1, 1 + hs // 2)
    assert pair.radians_per_position == pytest.approx(theta ** (-2 * 1 / hs))
    for p in (0, 5, 23):
        np.testing.assert_allclose(pair.q_rot[p], turn(pair.q[p], p * pair.radians_per_position),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(pair.k_rot[p], turn(pair.k[p], p * pair.radians_per_position),
                                   rtol=1e-4, atol=1e-5)
    # a turn keeps the length
    np.testing.assert_allclose(np.linalg.norm(pair.q_rot, axis=1), np.linalg.norm(pair.q, axis=1),
                               rtol=1e-5)
    # head 3 reads key head 1 (two query heads per key/value head)
    np.testing.assert_array_equal(pair.k, trace["blocks.1.attn.k"][1][:, list(pair.dims)])


def test_the_score_at_the_real_offset_is_the_models(traced):
    model, trace = traced
    for query, key in ((20, 3), (10, 10), (23, 0)):
        curve = score_by_offset(model, trace, 0, 2, query, key)
        assert curve.scores[curve.offset] == pytest.approx(curve.score, rel=1e-4, abs=1e-5)
        assert curve.score == pytest.approx(float(trace["blocks.0.attn.scores"][2, query, key]))
    # by hand: every pair turned by the offset's angle, q then dotted with k
    q, k = trace["blocks.0.attn.q"][2, 20], trace["blocks.0.attn.k"][1, 3]
    hs = len(q)
    half, offset = hs // 2, 9
    total = 0.0
    for j in range(half):
        angle = offset * model.config.rope_theta ** (-2 * j / hs)
        total += turn(np.array([q[j], q[j + half]]), angle) @ np.array([k[j], k[j + half]])
    curve = score_by_offset(model, trace, 0, 2, 20, 3)
    assert curve.scores[offset] == pytest.approx(total / np.sqrt(hs), rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("shift", [1, 7, 500])
def test_shifting_every_position_leaves_the_scores_unchanged(traced, shift):
    model, trace = traced
    check = shift_check(model, trace, 1, 0, shift)
    assert check.largest_score > 0.1
    assert check.max_difference < 1e-5 * max(1.0, check.largest_score)
    assert check.holds and check.tolerance < 1e-3 * max(1.0, check.largest_score)
    # the shifted scores are not the same numbers by accident: each q and k did turn
    pair = rotary_pair(model, trace, 1, 0, 0)
    assert not np.allclose(pair.q_rot, pair.q)


def test_the_check_fails_for_absolute_positions():
    """q and k with a position vector added (as GPT-2 adds its table): a shift changes the
    scores, and the same check says so."""
    rng = np.random.default_rng(0)
    T, hs = 12, 8
    q, k = rng.standard_normal((T, hs)), rng.standard_normal((T, hs))
    table = rng.standard_normal((T + 20, hs))  # one vector per absolute position

    def absolute(start: int) -> np.ndarray:
        return (q + table[start:start + T]) @ (k + table[start:start + T]).T / np.sqrt(hs)

    visible = ~np.triu(np.ones((T, T), dtype=bool), k=1)
    _, worst = shift_difference(absolute, absolute(0), visible, 5)
    assert worst > 0.1
    _, same = shift_difference(absolute, absolute(0), visible, 0)
    assert same == 0.0


def test_without_rotation_the_row_is_plain_q_dot_k(traced):
    model, trace = traced
    row = row_without_rotation(model, trace, 0, 1, 15)
    q, k = trace["blocks.0.attn.q"][1, 15], trace["blocks.0.attn.k"][0, :16]
    np.testing.assert_allclose(row.scores_unturned, k @ q / np.sqrt(len(q)), rtol=1e-5)
    assert row.weights_unturned.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(row.scores, trace["blocks.0.attn.scores"][1, 15, :16])
    assert not np.allclose(row.scores, row.scores_unturned)


def test_a_learned_position_model_has_no_rotary_positions():
    model = random_model(GPT2)
    _, trace = model.run_with_trace(IDS)
    for call in (lambda: rotary_pair(model, trace, 0, 0, 0),
                 lambda: shift_check(model, trace, 0, 0, 3),
                 lambda: row_without_rotation(model, trace, 0, 0, 3)):
        with pytest.raises(ValueError, match="no rotary positions"):
            call()
