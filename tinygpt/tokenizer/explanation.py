"""explain()'s records: how each chunk of a text was tokenized, merge step by merge step.

`BPETokenizer.explain` (tinygpt.tokenizer.bpe) returns an `Explanation`: the last chunks of a
text, each a `ChunkExplanation` with its first `MergeStep`s. Plain dataclasses, for the app's
Tokens page and for students (dataclasses.asdict gives dicts).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

__all__ = ["ChunkExplanation", "Explanation", "MergeStep"]


@dataclass
class MergeStep:
    """One merge applied inside a chunk: `pair` became `new_id`, giving `tokens`."""

    pair: tuple[int, int]
    new_id: int
    tokens: list[int]


@dataclass
class ChunkExplanation:
    """How one chunk was tokenized.

    text: the chunk (e.g. " world"); is_special: True for a special-token marker.
    initial: one token per UTF-8 byte (for a special token: its single id).
    steps: the first merges in the order they were applied (at most MAX_REPLAY_STEPS);
    steps_total: how many merges there were in all ("the first len(steps) of steps_total");
    final: the tokens after every merge, kept or not.
    taken_whole: True when the chunk is itself a vocabulary token and the tokenizer ignores
    merges for such chunks (Llama-3's ignore_merges): final is that one token, no steps.
    """

    text: str
    is_special: bool
    initial: list[int]
    steps: list[MergeStep] = field(default_factory=list)
    final: list[int] = None  # type: ignore[assignment]  # default: after the last step
    steps_total: int = None  # type: ignore[assignment]  # default: len(steps)
    taken_whole: bool = False

    def __post_init__(self) -> None:
        if self.final is None:
            self.final = self.steps[-1].tokens if self.steps else self.initial
        if self.steps_total is None:
            self.steps_total = len(self.steps)


class Explanation(list):
    """explain()'s result: a list of ChunkExplanation, the last chunks of the text.

    chunks_total: how many chunks the whole text has; first_chunk: the index (in the whole
    text) of this list's first chunk, so the list is chunks first_chunk .. chunks_total-1.
    """

    def __init__(self, chunks: list[ChunkExplanation], chunks_total: int):
        super().__init__(chunks)
        self.chunks_total = chunks_total
        self.first_chunk = chunks_total - len(chunks)

    @property
    def n_tokens(self) -> int:
        """Tokens these chunks make, all together."""
        return sum(len(chunk.final) for chunk in self)

    @property
    def steps_total(self) -> int:
        """Merges these chunks made, all together."""
        return sum(chunk.steps_total for chunk in self)

    def chunk_of_token(self, index: int) -> int:
        """Which of these chunks (0 .. len-1) made token `index` of their tokens put end to end
        (a negative index counts from the end, as in a list: -1 is the last token)."""
        ends = list(accumulate(len(chunk.final) for chunk in self))  # tokens up to each chunk
        total = ends[-1] if ends else 0
        index = index + total if index < 0 else index
        if not 0 <= index < total:
            raise IndexError(f"token {index} is not among the {total} tokens")
        return bisect_right(ends, index)
