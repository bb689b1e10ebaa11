"""Read-outs of decoding: how one distribution is cut, renormalised and drawn from, and the
tree beam search explores. Shapes: V = vocab_size.

Each works on the records `tinygpt.decoding.generation` keeps (`ProcessedLogits`, `BeamStep`), so
what the
pages show is what the generator did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tinygpt.decoding.generation import ProcessedLogits, pick_token
from tinygpt.network.functional import softmax
from tinygpt.readouts.forward_pass import entropy, uniform_entropy

# ----------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class SortedDistribution:
    """A distribution ranked from the most likely token down (ties: the lowest id first)."""

    order: np.ndarray  # (V,) token ids, most likely first
    probs: np.ndarray  # (V,) their probabilities, in that order
    cumulative: np.ndarray  # (V,) running sum: cumulative[r] = probs[0] + ... + probs[r]


def sorted_distribution(probs: np.ndarray) -> SortedDistribution:
    """Rank a probability vector (V,): what top-p reads, from the top token down."""
    p = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-p, kind="stable")  # stable: equal probabilities keep id order
    ranked = p[order]
    return SortedDistribution(order=order, probs=ranked, cumulative=np.cumsum(ranked))


def rank_of(order: np.ndarray, token: int) -> int | None:
    """Where `token` stands in `order` (0 = first), or None when it is not there."""
    where = np.flatnonzero(np.asarray(order) == token)
    return int(where[0]) if where.size else None


def kept_by_rank(processed: ProcessedLogits, limit: int | None = None) -> np.ndarray:
    """The tokens top-k / top-p kept, highest score first (ties: the lowest id), at most `limit`.

    One row (V,) of `process_logits`. The ranking is by raw score, the same at any T > 0.
    """
    order = np.argsort(-processed.logits, kind="stable")  # (V,)
    return order[processed.kept[order]][:limit]


@dataclass(frozen=True)
class SamplingSummary:
    """What temperature, top-k and top-p did to one distribution (V,). Entropies in bits."""

    n_kept: int  # tokens the draw can still pick
    kept_mass: float  # probability (after temperature) of the kept tokens: the renormaliser
    removed_mass: float  # 1 - kept_mass
    top_k_removed: float  # of the tempered distribution
    top_p_removed: float  # of what top-k left
    nucleus_before: float  # after top-k: the kept tokens but the least likely one hold this ...
    nucleus_held: float  # ... and all the kept tokens this (>= p when top-p cut)
    entropy_model: float  # the model's own distribution (T = 1, nothing cut)
    entropy_tempered: float  # after temperature
    entropy_final: float  # after the cut and renormalising
    entropy_uniform: float  # log2 V: every token equally likely, the most there can be


def sampling_summary(processed: ProcessedLogits) -> SamplingSummary:
    """Masses and entropies of one row (V,) of `process_logits`."""
    if processed.kept.ndim != 1:
        raise ValueError("sampling_summary takes one row of logits (V,), not a batch")
    kept = processed.kept
    kept_mass = float(processed.probs[kept].sum())
    n_kept = int(kept.sum())
    ranked = sorted_distribution(processed.probs_after_top_k)  # what top-p walks down
    return SamplingSummary(
        n_kept=n_kept,
        kept_mass=kept_mass,
        removed_mass=1.0 - kept_mass,
        top_k_removed=float(processed.top_k_removed_mass),
        top_p_removed=float(processed.top_p_removed_mass),
        nucleus_before=float(ranked.cumulative[n_kept - 2]) if n_kept > 1 else 0.0,
        nucleus_held=float(ranked.cumulative[n_kept - 1]),
        entropy_model=float(entropy(softmax(processed.logits))),
        entropy_tempered=float(entropy(processed.probs)),
        entropy_final=float(entropy(processed.final_probs)),
        entropy_uniform=uniform_entropy(kept.size),
    )


# ----------------------------------------------------------------------------- the draw


@dataclass(frozen=True)
class DrawSegments:
    """The cumulative bar [0, 1) that inverse-CDF sampling walks, in token-id order.

    Tokens with at least `min_width` probability get a segment of their own; each run of
    smaller ones between them is merged into one segment (token -1) so the bar stays drawable.
    """

    starts: np.ndarray  # (S,) left edge of each segment
    widths: np.ndarray  # (S,) its probability mass
    tokens: np.ndarray  # (S,) the token id, or -1 for a merged run of small tokens
    counts: np.ndarray  # (S,) how many tokens the segment holds


def draw_segments(probs: np.ndarray, min_width: float = 0.005) -> DrawSegments:
    """Segments of the cumulative bar used by `decoding.pick_token` (zero-probability tokens
    take no room and are left out)."""
    p = np.asarray(probs, dtype=np.float64)
    ids = np.flatnonzero(p > 0)  # (m,) in id order, as pick_token lays them out
    starts, widths, tokens, counts = [], [], [], []
    edge = 0.0
    for i in ids:
        big = p[i] >= min_width
        if not big and tokens and tokens[-1] == -1:  # extend the current run of small tokens
            widths[-1] += p[i]
            counts[-1] += 1
        else:
            starts.append(edge)
            widths.append(p[i])
            tokens.append(int(i) if big else -1)
            counts.append(1)
        edge += p[i]
    return DrawSegments(np.array(starts), np.array(widths), np.array(tokens, dtype=np.int64),
                        np.array(counts, dtype=np.int64))


@dataclass(frozen=True)
class SeededDraw:
    """One seeded draw, as `generate(strategy="sample", seed=seed)` makes its first one."""

    u: float  # the uniform number in [0, 1) the seed gives
    token: int  # the token whose stretch of the bar contains u
    segments: DrawSegments  # the bar, for drawing
    segment: int  # index of the segment u falls in


def seeded_draw(final_probs: np.ndarray, seed: int, min_width: float = 0.005) -> SeededDraw:
    """Draw from `final_probs` (V,) with u from `np.random.default_rng(seed)`, like generate."""
    u = float(np.random.default_rng(seed).random())
    token, _ = pick_token(final_probs, u)
    segments = draw_segments(final_probs, min_width)
    segment = int(np.searchsorted(segments.starts, u, side="right")) - 1
    return SeededDraw(u=u, token=token, segments=segments, segment=max(segment, 0))


# ----------------------------------------------------------------------------- beam tree


@dataclass(frozen=True)
class BeamNode:
    """One candidate of a beam-search step, placed for drawing the beam tree."""

    step: int  # 0 = the first new token
    rank: int  # 0 = best of the 2 * num_beams candidates kept at that step
    token: int
    score: float  # summed log-probability of the generated tokens so far
    status: str  # "running" | "finished" | "finished_discarded" | "dropped"
    parent: int  # index of the parent node in the list, -1 for the prompt
    tokens: tuple[int, ...]  # the generated tokens up to and including this one
    final_score: float | None  # score / length**length_penalty, for finished ones
    on_winning_path: bool  # the returned hypothesis passes through this node


def beam_tree(history: list, winner: list[int] | None = None) -> list[BeamNode]:
    """The beam-search history (decoding.BeamStep list) as a flat list of tree nodes.

    A candidate's parent is the running beam of the previous step in the slot it extends.
    """
    winner_t = tuple(int(t) for t in winner) if winner is not None else None
    nodes: list[BeamNode] = []
    slot_node: dict[int, int] = {}  # running slot of the previous step -> node index
    for step, record in enumerate(history):
        next_slots: dict[int, int] = {}
        for c in record.candidates:
            parent = slot_node.get(c.parent, -1) if step else -1
            prefix = nodes[parent].tokens if parent >= 0 else ()
            tokens = (*prefix, int(c.token))
            on_path = (winner_t is not None and c.status in ("running", "finished")
                       and winner_t[: len(tokens)] == tokens)
            nodes.append(BeamNode(step, c.rank, int(c.token), float(c.score), c.status, parent,
                                  tokens, c.final_score, on_path))
            if c.status == "running":
                next_slots[c.slot] = len(nodes) - 1
        slot_node = next_slots
    return nodes


def beam_tree_window(nodes: list[BeamNode], first_step: int, last_step: int) -> list[BeamNode]:
    """The nodes of steps first_step..last_step, each `parent` an index into the returned list
    (-1 when the parent is the prompt or a step before the window)."""
    keep = [i for i, node in enumerate(nodes) if first_step <= node.step <= last_step]
    new_index = {old: new for new, old in enumerate(keep)}
    return [replace(nodes[i], parent=new_index.get(nodes[i].parent, -1)) for i in keep]


def shared_start(sequences: list[list[int]]) -> int:
    """How many tokens every sequence starts with in common (0 for none or no sequences): the
    beam hypotheses often share a long start and differ only at the end."""
    if not sequences:
        return 0
    shortest = min(len(s) for s in sequences)
    for i in range(shortest):
        if any(s[i] != sequences[0][i] for s in sequences[1:]):
            return i
    return shortest
