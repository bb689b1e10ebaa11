"""Readouts that put an attribution into words and into a chart a student can read.

`logit_attribution` gives one share per part of the model (2 + L * (H + 2) + 2 of them: 172
for GPT-2 small). A page shows the few that matter: the largest, named in words ("block 3
head 1 adds +2.40"), and the rest added up into one bar, so the bars still sum exactly to
the logit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.fast.attention import trace_attention_weights
from tinygpt.readouts.attribution import Attribution


@dataclass(frozen=True)
class Contributor:
    """One part of an attribution: its name, its key (see Attribution.keys), its share."""

    name: str
    key: tuple
    value: float

    @property
    def sentence(self) -> str:
        """"block 3 head 1 adds +2.40" or "block 0 feed-forward takes away 1.10"."""
        if self.value >= 0:
            return f"{self.name} adds {self.value:+.2f}"
        return f"{self.name} takes away {-self.value:.2f}"

    @property
    def head(self) -> tuple[int, int] | None:
        """(layer, head) when this part is an attention head, else None."""
        return (int(self.key[1]), int(self.key[2])) if self.key[0] == "head" else None


def top_contributors(attribution: Attribution, k: int) -> list[Contributor]:
    """The k parts with the largest |share|, biggest first."""
    return [Contributor(attribution.names[i], attribution.keys[i], float(attribution.values[i]))
            for i in attribution.largest(k)]


def top_heads(attribution: Attribution, k: int) -> list[Contributor]:
    """The k attention heads with the largest |share|, biggest first."""
    heads = [i for i, key in enumerate(attribution.keys) if key[0] == "head"]
    order = sorted(heads, key=lambda i: -abs(float(attribution.values[i])))[: max(0, int(k))]
    return [Contributor(attribution.names[i], attribution.keys[i], float(attribution.values[i]))
            for i in order]


@dataclass(frozen=True)
class Waterfall:
    """The bars of a waterfall: names[i] adds values[i]; values.sum() == total.

    The parts are kept in the model's order (embeddings, block 0, ..., output), the `rest`
    smallest ones merged into the bar named "the other N parts" (placed before the last two).
    """

    names: list[str]
    values: np.ndarray  # (B,) float64
    total: float
    rest: int  # how many parts the "other" bar holds (0: none merged)


def waterfall(attribution: Attribution, k: int) -> Waterfall:
    """The k largest parts, in the model's order, plus one bar for all the others."""
    P = len(attribution.values)
    keep = np.sort(attribution.largest(k))  # (k,) model order
    names = [attribution.names[i] for i in keep]
    values = [float(attribution.values[i]) for i in keep]
    rest = P - len(keep)
    if rest:
        mask = np.ones(P, dtype=bool)
        mask[keep] = False
        names.append(f"the other {rest} parts")
        values.append(float(attribution.values[mask].sum()))
    return Waterfall(names, np.array(values, dtype=np.float64), attribution.total, rest)


def head_grid(attribution: Attribution, n_layer: int, n_head: int) -> np.ndarray:
    """Each head's share as a (L, H) grid (rows: blocks)."""
    grid = np.zeros((n_layer, n_head), dtype=np.float64)
    for key, value in zip(attribution.keys, attribution.values, strict=True):
        if key[0] == "head":
            grid[key[1], key[2]] = value
    return grid


def parts_difference(a: Attribution, b: Attribution) -> np.ndarray:
    """values of `a` minus values of `b`, part by part (two prompts, same model): (P,)."""
    if a.keys != b.keys:
        raise ValueError("the two attributions do not have the same parts (another model?)")
    return a.values - b.values


@dataclass(frozen=True)
class SurpriseSummary:
    """The surprise of a text in one sentence: its mean (the loss) and its biggest moment."""

    mean: float  # nats: the cross-entropy loss of the model on this text
    worst: int  # index into the surprise array (entry t is about token t + 1)
    worst_value: float
    worst_prob: float  # exp(-worst_value): the probability the model gave that token


def surprise_summary(nats: np.ndarray) -> SurpriseSummary | None:
    """Mean and largest of a surprise array (T-1,); None for a one-token text (no entry)."""
    if len(nats) == 0:
        return None
    worst = int(np.argmax(nats))
    value = float(nats[worst])
    return SurpriseSummary(float(np.mean(nats, dtype=np.float64)), worst, value,
                           float(np.exp(-value)))


@dataclass(frozen=True)
class HeadsAtAGlance:
    """Every head's attention for small multiples: full maps, or one query row per head.

    maps (L, H, R, K) float32 with masked cells NaN; rows are the query positions drawn
    (all n, or only the inspected one when the full maps would not fit the cell budget).
    """

    maps: np.ndarray
    rows: list[int]
    keys: list[int]

    @property
    def full(self) -> bool:
        return len(self.rows) > 1


def attention_maps(trace, n_layer: int) -> np.ndarray:
    """Every head's attention weights (L, H, n, n), float32, masked cells NaN."""
    maps = []
    for i in range(n_layer):
        weights = trace_attention_weights(trace, i)  # (H, n, n): the scores alone
        masked = trace.hidden_keys(i)  # (n, n)
        maps.append(np.where(masked, np.nan, weights).astype(np.float32))
    return np.stack(maps)


def glance_from_maps(maps: np.ndarray, position: int, max_cells: int) -> HeadsAtAGlance:
    """Every head at a glance, from every head's full maps (L, H, n, n) (attention_maps,
    computed once per trace elsewhere): all L x H maps if L * H * n * n <= max_cells, else the
    row of `position` in each (keys 0..n-1, the masked ones NaN)."""
    L, H, n, _ = maps.shape
    if L * H * n * n <= max_cells:
        return HeadsAtAGlance(maps, list(range(n)), list(range(n)))
    return HeadsAtAGlance(maps[:, :, position:position + 1], [position], list(range(n)))


def difference_waterfall(a: Attribution, b: Attribution, k: int) -> Waterfall:
    """Part by part, a's share minus b's (the same token after two prompts): the k largest
    differences in the model's order, the rest in one bar; values.sum() == a.total - b.total."""
    diff = parts_difference(a, b)  # (P,)
    keep = np.sort(np.argsort(-np.abs(diff), kind="stable")[: max(0, int(k))])
    names = [a.names[i] for i in keep]
    values = [float(diff[i]) for i in keep]
    rest = len(diff) - len(keep)
    if rest:
        mask = np.ones(len(diff), dtype=bool)
        mask[keep] = False
        names.append(f"the other {rest} parts")
        values.append(float(diff[mask].sum()))
    return Waterfall(names, np.array(values, dtype=np.float64), a.total - b.total, rest)


@dataclass(frozen=True)
class PredictionSnapshot:
    """What a model in training predicts after one prompt, at one step: its top-k tokens."""

    step: int
    loss: float  # the training loss of that step's batch
    tokens: np.ndarray  # (k,) ids, most likely first
    probs: np.ndarray  # (k,) float32


def prediction_snapshot(model, ids: np.ndarray, step: int, loss: float,
                        k: int = 5) -> PredictionSnapshot:
    """The model's top-k next tokens after ids (T,) now: one forward of T tokens."""
    from tinygpt.readouts import top_k  # here: readouts imports the model, kept out of the top

    tokens, probs = top_k(model.forward(ids)[-1], k)
    return PredictionSnapshot(int(step), float(loss), tokens, probs.astype(np.float32))
