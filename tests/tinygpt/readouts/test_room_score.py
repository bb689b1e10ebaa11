"""The room against the model, computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinygpt.readouts import room_score as rs


def test_the_rooms_probability_by_hand():
    # 30 guesses over 4 choices, 12 of them the true token: (12 + 1/2) / (30 + 4/2) = 12.5 / 32
    assert rs.room_probability(12, 30, 4) == 12.5 / 32 == 0.390625
    # nobody guessed it: still (0 + 1/2) / (30 + 2) = 1/64, never 0
    assert rs.room_probability(0, 30, 4) == 1 / 64
    # no guesses at all: the uniform 1/4
    assert rs.room_probability(0, 0, 4) == 0.25
    with pytest.raises(ValueError):
        rs.room_probability(5, 3, 4)


def test_the_smoothed_shares_of_all_choices_sum_to_one():
    counts = [12, 9, 6, 3]
    assert sum(rs.room_probability(c, 30, 4) for c in counts) == pytest.approx(1.0)


def test_a_round_scored_by_hand():
    probs = np.array([0.5, 0.25, 0.125, 0.125])  # (V,)
    counts = {1: 12, 0: 9, 2: 6, 3: 3}
    score = rs.score_round(counts, 1, probs, offered=[0, 1, 2, 3])
    assert score.room_prob == 0.390625 and score.model_prob == 0.25
    assert score.room_bits == pytest.approx(-math.log2(0.390625))  # 1.356 bits
    assert score.model_bits == 2.0
    assert (score.answers, score.n_choices) == (30, 4)


def test_free_guesses_put_the_true_token_among_the_choices():
    probs = np.full(8, 1 / 8)
    # 10 guessed token 3, 5 token 4; the true token 6 nobody guessed: 3 choices
    assert rs.choices_of({3: 10, 4: 5}, 6) == (3, 4, 6)
    score = rs.score_round({3: 10, 4: 5}, 6, probs)
    assert score.room_prob == 0.5 / (15 + 1.5)  # = 1/33
    assert score.model_bits == 3.0


def test_guesses_outside_the_offered_choices_are_not_counted():
    score = rs.score_round({0: 4, 7: 100}, 0, np.full(8, 1 / 8), offered=[0, 1])
    assert score.room_prob == 4.5 / 5 and score.answers == 4


def test_the_running_score_averages_bits_and_names_the_leader():
    first = rs.score_round({1: 12, 0: 18}, 1, np.array([0.5, 0.25]), offered=[0, 1])
    second = rs.score_round({0: 30}, 0, np.array([0.5, 0.25]), offered=[0, 1])
    # room: 12.5/31 then 30.5/31; model: 0.25 then 0.5
    running = rs.running_score([first, second])
    expected_room = (-math.log2(12.5 / 31) - math.log2(30.5 / 31)) / 2
    assert running.rounds == 2
    assert running.room_bits == pytest.approx(expected_room)  # 0.667 bits
    assert running.model_bits == pytest.approx((2.0 + 1.0) / 2)
    assert running.leader == "class"
    assert rs.running_score([]).leader is None


def test_a_students_tally():
    own = {1: 5, 2: 7, 3: None, 4: 9}
    truths = {1: 5, 2: 8, 3: 1}  # round 4 not revealed yet
    assert rs.true_guesses(own, truths) == 1


def test_zero_probability_is_infinitely_many_bits():
    assert rs.bits(0.0) == math.inf and rs.bits(0.5) == 1.0
