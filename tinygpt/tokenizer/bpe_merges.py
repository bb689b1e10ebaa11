"""The BPE merge step: shared by training, encoding and explain().

- `merge_pair`: one merge, applied left to right over a token list.
- `MergeRun`: every merge of one chunk, step by step, in O(n log n).
- `PairCounts`: pair counts over a corpus, updated after each merge (training).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from itertools import pairwise

Pair = tuple[int, int]


def merge_pair(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    """Replace every non-overlapping occurrence of `pair` (left to right) with `new_id`."""
    a, b = pair
    out: list[int] = []
    i = 0
    n = len(ids)
    while i < n:
        if i + 1 < n and ids[i] == a and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class MergeRun:
    """The merges of one chunk, step by step, in O(n log n) for n bytes.

    Same steps as the plain loop "find the learned pair of lowest rank; merge its every
    non-overlapping occurrence, left to right (merge_pair); repeat", which costs O(n) per
    step and so O(n^2) for a long chunk. Here the tokens are a linked list and every
    adjacent learned pair waits in a heap ordered by (rank, position); one step pops all
    entries of the lowest rank, left to right, and merges those still valid. Pairs formed
    by a step are pushed only after it, so they wait for the next step, as in the loop.
    """

    def __init__(self, ids: list[int], rank: dict[Pair, int], merged_id: dict[Pair, int]):
        n = len(ids)
        self.rank, self.merged_id = rank, merged_id
        self.tok: list[int | None] = list(ids)  # None: merged into the token on its left
        self.nxt = list(range(1, n + 1))  # n: no next token
        self.prv = list(range(-1, n - 1))
        self.heap = [(rank[p], i, i + 1) for i, p in enumerate(pairwise(ids)) if p in rank]
        heapq.heapify(self.heap)

    def _valid(self, r: int, left: int, right: int) -> bool:
        """Still adjacent, and still the pair of rank r (a token only ever grows)."""
        tok = self.tok
        return (tok[left] is not None and self.nxt[left] == right
                and self.rank.get((tok[left], tok[right])) == r)

    def step(self) -> tuple[Pair, int] | None:
        """Apply the next merge everywhere; (pair, new_id), or None when none is left."""
        heap, tok, nxt, prv = self.heap, self.tok, self.nxt, self.prv
        while heap and not self._valid(*heap[0]):
            heapq.heappop(heap)
        if not heap:
            return None
        r, left, right = heap[0]
        pair = (tok[left], tok[right])
        new_id = self.merged_id[pair]
        merged = []
        while heap and heap[0][0] == r:
            _, left, right = heapq.heappop(heap)
            if self._valid(r, left, right):
                tok[left], tok[right] = new_id, None
                nxt[left] = nxt[right]
                if nxt[left] < len(tok):
                    prv[nxt[left]] = left
                merged.append(left)
        for node in merged:
            for a, b in ((prv[node], node), (node, nxt[node])):
                if a >= 0 and b < len(tok) and tok[a] is not None:
                    r2 = self.rank.get((tok[a], tok[b]))
                    if r2 is not None:
                        heapq.heappush(heap, (r2, a, b))
        return pair, new_id

    def tokens(self) -> list[int]:
        """The tokens now (the first node is never merged away)."""
        out, i = [], 0
        while i < len(self.tok):
            out.append(self.tok[i])
            i = self.nxt[i]
        return out


class PairCounts:
    """Pair counts over the unique chunks of a corpus, updated incrementally after each merge.

    words[i] is chunk i as a list of token ids, freqs[i] how often the chunk occurs.
    A max-heap (stale entries skipped lazily) finds the most frequent pair quickly;
    ties go to the smallest pair of ids, so training is deterministic.
    """

    def __init__(self, words: list[list[int]], freqs: list[int]):
        self.words = words
        self.freqs = freqs
        self.counts: dict[Pair, int] = defaultdict(int)
        self.where: dict[Pair, set[int]] = defaultdict(set)  # pair -> chunks that contain it
        for i, word in enumerate(words):
            for pair in pairwise(word):
                self.counts[pair] += freqs[i]
                self.where[pair].add(i)
        self.heap = [(-count, pair) for pair, count in self.counts.items()]
        heapq.heapify(self.heap)

    def best_pair(self) -> Pair | None:
        """Most frequent pair (smallest ids on ties), or None when no pair is left."""
        while self.heap:
            neg_count, pair = self.heap[0]
            if -neg_count == self.counts.get(pair, 0) and neg_count < 0:
                return pair
            heapq.heappop(self.heap)  # stale entry: the count changed since it was pushed
        return None

    def merge(self, pair: Pair, new_id: int) -> None:
        """Merge `pair` into `new_id` in every chunk that holds it, fixing the counts."""
        touched: set[Pair] = set()
        for i in self.where.pop(pair, ()):
            old, freq = self.words[i], self.freqs[i]
            new = merge_pair(old, pair, new_id)
            for p in pairwise(old):
                self.counts[p] -= freq
                touched.add(p)
            for p in pairwise(new):
                self.counts[p] += freq
                self.where[p].add(i)
                touched.add(p)
            self.words[i] = new
        for p in touched:
            if self.counts[p] > 0:
                heapq.heappush(self.heap, (-self.counts[p], p))
