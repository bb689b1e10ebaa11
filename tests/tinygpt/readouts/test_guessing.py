"""guess_report against a slow, independent reference: ranks counted token by token, the
nucleus built by the textbook rule (keep tokens, most likely first, while the mass above them is
below p), counts summed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.readouts import first_token, guess_options, guess_report
from tinygpt.tokenizer.bpe import BPETokenizer


def reference_rank(p: np.ndarray, token: int) -> int:
    above = sum(1 for j in range(p.size) if p[j] > p[token] or (p[j] == p[token] and j < token))
    return above + 1


def reference_nucleus(p: np.ndarray, top_p: float) -> set[int]:
    order = sorted(range(p.size), key=lambda j: (-p[j], j))
    kept, mass = set(), 0.0
    for j in order:
        if mass < top_p or not kept:
            kept.add(j)
        mass += p[j]
    return kept


@pytest.mark.parametrize("top_p", [0.3, 0.75, 0.9, 1.0])
def test_guess_report_matches_reference(top_p: float) -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=50) * 2
    p = np.exp(logits) / np.exp(logits).sum()
    guesses = [3, 7, 3, 11, 0, 7, 3]
    counts = [2, 1, 1, 4, 1, 1, 1]
    report = guess_report(p, guesses, counts, top_p)
    totals: dict[int, int] = {}
    for g, c in zip(guesses, counts, strict=True):
        totals[g] = totals.get(g, 0) + c
    expected_order = sorted(totals, key=lambda g: (-totals[g], g))
    assert report.token_ids.tolist() == expected_order
    assert report.counts.tolist() == [totals[g] for g in expected_order]
    assert report.answers == sum(counts)
    np.testing.assert_allclose(report.shares, [totals[g] / sum(counts) for g in expected_order])
    assert report.ranks.tolist() == [reference_rank(p, g) for g in expected_order]
    np.testing.assert_allclose(report.probs, p[expected_order])
    nucleus = reference_nucleus(p, top_p)
    assert report.kept.tolist() == [g in nucleus for g in expected_order]
    assert report.share_kept == pytest.approx(
        sum(totals[g] for g in totals if g in nucleus) / sum(counts))
    assert report.class_favourite == expected_order[0]
    assert report.model_favourite == int(np.argmax(p))
    assert report.model_favourite_prob == pytest.approx(p.max())


def test_ties_rank_lowest_id_first_and_no_guesses() -> None:
    p = np.array([0.25, 0.25, 0.25, 0.25])
    report = guess_report(p, [3, 1], [1, 1], 0.5)
    assert report.ranks.tolist() == [2, 4]  # 1 before 3 in the list (equal counts: lowest id)
    assert report.token_ids.tolist() == [1, 3]
    assert report.kept.tolist() == [True, False]  # tokens 0 and 1 make 0.5
    empty = guess_report(p, [], [], 0.9)
    assert empty.answers == 0 and empty.class_favourite is None and empty.share_kept == 0.0


def test_bad_input_is_refused() -> None:
    p = np.array([0.5, 0.5])
    with pytest.raises(ValueError):
        guess_report(p, [2], [1])
    with pytest.raises(ValueError):
        guess_report(p, [0, 1], [1])


def test_first_token_is_the_first_of_the_encoding() -> None:
    tok = BPETokenizer.train("the cat sat on the mat, the end " * 20, vocab_size=300)
    assert first_token(tok, "") is None
    assert first_token(tok, " the cat") == tok.encode(" the cat")[0]


def test_a_tie_names_every_favourite() -> None:
    p = np.full(20, 1 / 20)
    report = guess_report(p, [4, 9, 2], [2, 2, 1])
    assert sorted(report.class_favourites.tolist()) == [4, 9]  # a tie: both
    assert guess_report(p, [4, 9], [3, 1]).class_favourites.tolist() == [4]
    assert guess_report(p, [], []).class_favourites.size == 0


@pytest.mark.parametrize("seed", range(12))
def test_options_mix_likely_tokens_with_others(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    p = rng.dirichlet(np.full(500, 0.3))
    top8 = set(np.argsort(-p, kind="stable")[:8].tolist())
    options = guess_options(p, 8, seed=seed)
    chosen = set(options.tolist())
    assert len(chosen) == 8 and options.tolist() == sorted(chosen)
    assert chosen != top8  # never the model's top 8
    assert 2 <= len(chosen & top8) <= 6  # but some of its likely tokens
    assert np.array_equal(options, guess_options(p, 8, seed=seed))  # the same for everyone
    true_next = int(np.argsort(p)[0])  # the least likely token: still offered when it is true
    assert true_next in guess_options(p, 8, seed=seed, include=true_next)


def test_options_of_a_tiny_vocabulary_are_all_its_tokens() -> None:
    p = np.array([0.5, 0.3, 0.2])
    assert guess_options(p, 8, seed=1).tolist() == [0, 1, 2]
