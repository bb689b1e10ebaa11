"""The trace of one forward pass: every intermediate tensor by name, without storing them all.

A GPT-2-small trace of 256 tokens would hold ~380 MB if every tensor were kept; most of it is
detail inside the blocks (queries, keys, values, T x T attention scores and weights, the 4C
feed-forward activations) that can be computed again, exactly, from the block's input. So a
`Trace` stores only

    tokens, embed.sum, logits, and for each block i: attn.output, resid_attn, ffn.output,
    resid_ffn

(the residual stream and what each sublayer writes into it), and answers any other name by
running that one part of the model again on its stored input with the same interventions:
the embedding layer for "embed.*", block i for "blocks.i.*", the final LayerNorm for "ln_f.*".
The same code on the same numbers gives the same numbers, bit for bit
(tests/tinygpt/network/test_trace.py compares every name with a trace that stores
everything). The part computed last is kept, so reading several names of one layer costs
one block of work (1 / n_layer of a forward). The final LayerNorm's part (T x C, small) is
kept apart from it: a readout that reads a block's neurons and the final LayerNorm's
statistics in turn would otherwise run the block every time.

"blocks.i.attn.scores_masked" is the scores with -inf where the causal mask hides a key: it is
derived from the scores on access, never stored.

The trace holds a reference to the model: do not change the model's weights afterwards.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping

import numpy as np

from tinygpt.network.attention import causal_mask
from tinygpt.network.config import GPTConfig, Interventions

STORED_BLOCK_NAMES = ("attn.output", "resid_attn", "ffn.output", "resid_ffn")
_EMBED = ("embed.token", "embed.position")


def norm_names(config: GPTConfig, name: str) -> tuple[str, ...]:
    """A normalisation's trace names: LayerNorm records its mean and var, RMSNorm its rms."""
    stats = ("rms",) if config.norm == "rmsnorm" else ("mean", "var")
    return tuple(f"{name}.{s}" for s in ("input", *stats, "normalized", "output"))


def block_names(config: GPTConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names inside a block a Trace derives (not stored), in forward order: those of the
    attention sublayer (before attn.output) and those of the feed-forward (before ffn.output)."""
    rotated = ("q_rot", "k_rot") if config.position == "rope" else ()
    attn = ("q", "k", "v", *rotated, "scores", "scores_masked", "weights", "heads")
    ffn = ("gate", "up", "post") if config.mlp == "swiglu" else ("pre", "post")
    return ((*norm_names(config, "ln1"), *(f"attn.{s}" for s in attn)),
            (*norm_names(config, "ln2"), *(f"ffn.{s}" for s in ffn)))
_BLOCK_NAME = re.compile(r"blocks\.(\d+)\.(.+)")


class Recorder(dict):
    """What a traced forward writes into: only the names a Trace stores (see `keeps`)."""

    def keeps(self, name: str) -> bool:
        match = _BLOCK_NAME.fullmatch(name)
        if match is not None:
            return match[2] in STORED_BLOCK_NAMES
        return name in ("embed.sum", "logits")

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        if self.keeps(name):
            super().__setitem__(name, value)


class Trace(Mapping):
    """name -> array (no batch axis) for one forward of one sequence. See the module docstring."""

    def __init__(self, model, tokens: np.ndarray, interventions: Interventions,
                 stored: dict[str, np.ndarray]) -> None:
        self._model = model
        self._iv = interventions
        self._stored = {"tokens": tokens, **stored}
        for array in self._stored.values():
            array.flags.writeable = False  # shared by everyone who reads this trace
        config = model.config
        attn_detail, ffn_detail = block_names(config)
        self._block_detail = frozenset(attn_detail + ffn_detail)
        self._ln_f = norm_names(config, "ln_f")
        self._names = ["tokens", *_EMBED, "embed.sum"]
        for i in range(config.n_layer):
            self._names += [f"blocks.{i}.{s}" for s in attn_detail]
            self._names += [f"blocks.{i}.attn.output", f"blocks.{i}.resid_attn"]
            self._names += [f"blocks.{i}.{s}" for s in ffn_detail]
            self._names += [f"blocks.{i}.ffn.output", f"blocks.{i}.resid_ffn"]
        self._names += [*self._ln_f, "logits"]
        self._name_set = set(self._names)
        self._lock = threading.Lock()
        self._part: tuple[str, dict[str, np.ndarray]] | None = None  # the part computed last
        self._final: tuple[str, dict[str, np.ndarray]] | None = None  # ln_f, kept apart
        self._extra: dict[tuple, tuple[np.ndarray, ...]] = {}  # kept by keep()

    def stored(self) -> dict[str, np.ndarray]:
        """The arrays this trace keeps (the residual stream after every sublayer, each
        sublayer's output, the embedding sum, the logits): read without computing anything."""
        return dict(self._stored)

    # ---- the mapping

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._name_set

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._stored:
            return self._stored[name]
        if name.endswith(".attn.scores_masked") and name in self:
            return self._scores_masked(name[: -len(".scores_masked")])
        part = self._part_of(name)
        if part is None:
            raise KeyError(name)
        return self._computed(part)[name]

    @property
    def model(self):
        """The model this trace ran (do not change its weights)."""
        return self._model

    @property
    def interventions(self) -> Interventions:
        return self._iv

    def block_input(self, layer: int) -> np.ndarray:
        """(T, C): what block `layer` reads, the residual stream before it (stored)."""
        return self._stored["embed.sum" if layer == 0 else f"blocks.{layer - 1}.resid_ffn"]

    def kept_part(self, part: str) -> dict[str, np.ndarray] | None:
        """Every tensor of `part` ("blocks.i", ...) if it is the part computed last, else None:
        read without computing anything."""
        kept = self._part
        return kept[1] if kept is not None and kept[0] == part else None

    def keep(self, key: tuple, make) -> tuple[np.ndarray, ...]:
        """The arrays make() returns, made once per key and kept with this trace (read-only,
        counted in nbytes): a shortcut's per-layer arrays (tinygpt.fast.trace_reads)."""
        with self._lock:
            kept = self._extra.get(key)
        if kept is None:
            made = tuple(make())
            for array in made:
                array.flags.writeable = False
            with self._lock:
                kept = self._extra.setdefault(key, made)
        return kept

    def hidden_keys(self, layer: int) -> np.ndarray:
        """(T, T) bool, True where the causal mask hid a key from a query in this layer (where
        blocks.<layer>.attn.scores_masked is -inf): none when the mask is switched off."""
        T = len(self._stored["tokens"])
        return causal_mask(T, T) & (not self._iv.no_causal_mask)

    @property
    def nbytes(self) -> int:
        """Bytes this trace holds now: the stored arrays and the parts computed last."""
        extra = sum(a.nbytes for kept in (self._part, self._final) if kept is not None
                    for a in kept[1].values())
        extra += sum(a.nbytes for kept in list(self._extra.values()) for a in kept)
        return sum(a.nbytes for a in self._stored.values()) + extra

    # ---- derived on access

    def _part_of(self, name: str) -> str | None:
        if name in _EMBED:
            return "embed"
        if name in self._ln_f:
            return "ln_f"
        match = _BLOCK_NAME.fullmatch(name)
        if match and int(match[1]) < self._model.config.n_layer and match[2] in self._block_detail:
            return f"blocks.{match[1]}"
        return None

    def _computed(self, part: str) -> dict[str, np.ndarray]:
        """Every tensor of one part (embed, blocks.i or ln_f), computed again; the last one kept."""
        slot = "_final" if part == "ln_f" else "_part"
        with self._lock:
            kept = getattr(self, slot)
            if kept is not None and kept[0] == part:
                return kept[1]
            record: dict[str, np.ndarray] = {}
            self._run(part, record)
            record = {name: value[0] for name, value in record.items()}  # drop the batch axis
            record.pop(f"{part}.attn.scores_masked", None)
            for array in record.values():
                array.flags.writeable = False
            setattr(self, slot, (part, record))
            return record

    def _run(self, part: str, record: dict[str, np.ndarray]) -> None:
        """The part's own forward, on its stored input, with the trace's interventions."""
        model, iv = self._model, self._iv
        if part == "embed":
            model.embedding.forward(self._stored["tokens"][None], trace=record,
                                    no_position=iv.no_position)
        elif part == "ln_f":
            x = self._stored[f"blocks.{model.config.n_layer - 1}.resid_ffn"]
            model.ln_f.forward(x[None], trace=record, name="ln_f", identity=iv.no_layernorm)
        else:
            i = int(part.split(".")[1])
            x = self.block_input(i)
            model.blocks[i].forward(x[None], index=i, trace=record, interventions=iv)

    def _scores_masked(self, prefix: str) -> np.ndarray:
        """(H, T, T) the scores with -inf at the keys the causal mask hides (none without it)."""
        scores = self[f"{prefix}.scores"]
        if self._iv.no_causal_mask:
            return scores
        T = scores.shape[-1]
        return np.where(causal_mask(T, T), -np.inf, scores).astype(scores.dtype)
