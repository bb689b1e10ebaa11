"""tinygpt.tokenizer.bpe_merges against plain loops: MergeRun makes the same merges as "merge
the lowest-ranked learned pair everywhere, repeat"; PairCounts keeps the counts a fresh count
gives after every merge."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np

from tinygpt.tokenizer.bpe_merges import MergeRun, PairCounts, merge_pair


def test_merge_pair_merges_left_to_right_without_overlap():
    assert merge_pair([1, 1, 1, 2, 1, 1], (1, 1), 9) == [9, 1, 2, 9]
    assert merge_pair([1, 2, 3], (3, 4), 9) == [1, 2, 3]  # a pair cut by the end
    assert merge_pair([], (1, 2), 9) == []


def plain_merges(ids: list[int], rank: dict, merged_id: dict) -> tuple[list, list[int]]:
    """The O(n^2) loop MergeRun stands for."""
    steps = []
    while True:
        ranked = [rank[p] for p in pairwise(ids) if p in rank]
        if not ranked:
            return steps, ids
        pair = next(p for p, r in rank.items() if r == min(ranked))
        ids = merge_pair(ids, pair, merged_id[pair])
        steps.append((pair, merged_id[pair]))


def test_merge_run_makes_the_plain_loops_merges():
    rng = np.random.default_rng(0)
    for _ in range(50):
        ids = [int(i) for i in rng.integers(0, 4, size=int(rng.integers(0, 40)))]
        rank: dict = {}
        merged_id: dict = {}
        for new_id in range(4, 14):  # ten learned merges over the symbols seen so far
            pair = (int(rng.integers(0, new_id)), int(rng.integers(0, new_id)))
            if pair not in rank:
                rank[pair], merged_id[pair] = len(rank), new_id
        run = MergeRun(ids, rank, merged_id)
        steps = []
        while (step := run.step()) is not None:
            steps.append(step)
        assert (steps, run.tokens()) == plain_merges(ids, rank, merged_id)


def counted(words: list[list[int]], freqs: list[int]) -> Counter:
    counts: Counter = Counter()
    for word, freq in zip(words, freqs, strict=True):
        for pair in pairwise(word):
            counts[pair] += freq
    return counts


def test_pair_counts_stay_those_of_a_fresh_count():
    words = [[1, 2, 3, 1, 2], [1, 2, 1, 2, 1, 2], [3, 3, 3]]
    freqs = [3, 1, 2]
    pc = PairCounts([list(w) for w in words], list(freqs))
    for new_id in range(10, 14):
        fresh = counted(pc.words, freqs)
        best = pc.best_pair()
        top = max(fresh.values())
        assert best == min(p for p, c in fresh.items() if c == top)  # ties: smallest ids
        pc.merge(best, new_id)
        assert {p: c for p, c in pc.counts.items() if c} == dict(counted(pc.words, freqs))
    # by hand: (1, 2) x 9, then (3, 3) x 4, then (3, 10) before (10, 3) (a tie), then (10, 12)
    assert pc.words == [[13], [10, 10, 10], [11, 3]]
