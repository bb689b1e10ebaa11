"""What a model is made of (GPTConfig) and the 'what if' switches and edits of a forward
(Interventions).

The embedding width has one name in tinygpt's docs: `embedding_dim`, the number of values in
each token's vector. The same number appears as
    n_embd   the GPTConfig field (GPT-2's config name; checkpoints store it under that key),
    C        in shape comments, e.g. (B, T, C),
    d        on the app's pages and in the formulas they show (n x d).
`GPTConfig.embedding_dim` reads `n_embd`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from tinygpt.caps import COUNT_CAPS, NORM_EPS_RANGE, ROPE_THETA_RANGE

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope")
MLPS = ("gelu", "swiglu")


def _positive_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1


def _in_range(value, bounds: tuple[float, float]) -> bool:
    """A finite real number above bounds[0], at most bounds[1] (not a bool)."""
    return (isinstance(value, (int, float, np.floating, np.integer))
            and not isinstance(value, bool) and math.isfinite(value)
            and bounds[0] < value <= bounds[1])


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 4096  # V: how many different tokens there are
    n_ctx: int = 256  # the longest sequence the model can read (number of positions)
    n_embd: int = 256  # embedding_dim, C: the width of every token's vector
    n_head: int = 8  # H
    n_layer: int = 4  # L: transformer blocks
    tie_weights: bool = True  # W_out is the token embedding matrix, transposed
    output_bias: bool = False  # whether the output layer has b_out
    layer_norm_eps: float = 1e-5
    activation: str = "gelu_tanh"  # "gelu_tanh" (GPT-2) or "gelu" (exact, with erf)
    # The parts that modern models (Llama, Qwen2, SmolLM) change; the defaults are GPT-2's.
    norm: str = "layernorm"  # "layernorm" (GPT-2) or "rmsnorm" (Llama): layer_norm_eps is its eps
    position: str = "learned"  # "learned" (a table added to the embedding) or "rope" (rotary)
    rope_theta: float = 10000.0  # the rotary base: pair j turns by position * theta^(-2j/hs)
    n_kv_head: int | None = None  # None: one fused W_qkv, as GPT-2; a number: W_q, W_k, W_v
    mlp: str = "gelu"  # "gelu" (W1, GELU, W2) or "swiglu" (down(SiLU(gate(x)) * up(x)))
    n_inner: int | None = None  # the feed-forward width; None means 4 * n_embd
    attn_bias: bool = True  # biases on the query / key / value projections
    proj_bias: bool = True  # a bias on the attention's output projection
    mlp_bias: bool = True  # biases on the feed-forward's projections

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_ctx", "n_embd", "n_head", "n_layer"):
            value = getattr(self, name)
            if not _positive_int(value):
                raise ValueError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
            if value > COUNT_CAPS[name]:
                raise ValueError(f"GPTConfig.{name} is {value:,}; the cap is {COUNT_CAPS[name]:,} "
                                 "(tinygpt.caps)")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})"
            )
        if self.activation not in ("gelu_tanh", "gelu"):
            raise ValueError(f"activation must be 'gelu_tanh' or 'gelu', got {self.activation!r}")
        if not _in_range(self.layer_norm_eps, NORM_EPS_RANGE):
            raise ValueError(f"layer_norm_eps must be a finite number in ({NORM_EPS_RANGE[0]:g}"
                             f", {NORM_EPS_RANGE[1]:g}], got {self.layer_norm_eps!r}")
        for name in ("tie_weights", "output_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"GPTConfig.{name} must be True or False")
        self._check_modern_parts()

    def _check_modern_parts(self) -> None:
        for name, allowed in (("norm", NORMS), ("position", POSITIONS), ("mlp", MLPS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("n_kv_head", "n_inner"):
            value = getattr(self, name)
            if value is not None and (not _positive_int(value) or value > COUNT_CAPS[name]):
                raise ValueError(f"GPTConfig.{name} must be None or an integer in 1 .. "
                                 f"{COUNT_CAPS[name]:,} (tinygpt.caps), got {value!r}")
        if self.n_kv_head is not None and self.n_head % self.n_kv_head:
            raise ValueError(f"n_head ({self.n_head}) must be a multiple of n_kv_head "
                             f"({self.n_kv_head}): each key/value head serves a whole group")
        if self.position == "rope" and self.head_size % 2:
            raise ValueError(f"rotary positions turn pairs of numbers: the head size "
                             f"({self.head_size}) must be even")
        if not _in_range(self.rope_theta, ROPE_THETA_RANGE):
            raise ValueError(f"rope_theta must be a finite number in ({ROPE_THETA_RANGE[0]:g}, "
                             f"{ROPE_THETA_RANGE[1]:g}], got {self.rope_theta!r}")
        for name in ("attn_bias", "proj_bias", "mlp_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"GPTConfig.{name} must be True or False")

    @property
    def embedding_dim(self) -> int:
        """The width of every token's vector (the field is called n_embd, as in GPT-2)."""
        return self.n_embd

    @property
    def head_size(self) -> int:
        """hs = embedding_dim / n_head: each head works in a slice of this width."""
        return self.n_embd // self.n_head

    @property
    def kv_heads(self) -> int:
        """Key/value heads: n_kv_head, or one per query head (n_head) when it is None."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head (1: plain multi-head attention)."""
        return self.n_head // self.kv_heads

    @property
    def inner_dim(self) -> int:
        """The feed-forward width: n_inner, or 4 * embedding_dim as in GPT-2."""
        return 4 * self.n_embd if self.n_inner is None else self.n_inner

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GPTConfig:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown GPTConfig fields: {sorted(unknown)}")
        return cls(**d)


@dataclass(frozen=True)
class Interventions:
    """'What if' switches. All off by default; the trace shows the intervened computation.

    Interventions are for inference only: training always runs the plain model.
    """

    zero_heads: frozenset = field(default_factory=frozenset)  # {(layer, head), ...}
    skip_attn: frozenset = field(default_factory=frozenset)  # {layer, ...}
    skip_ffn: frozenset = field(default_factory=frozenset)  # {layer, ...}
    no_layernorm: bool = False  # every norm (ln1, ln2, final; LayerNorm or RMSNorm) is the identity
    no_position: bool = False  # drop the position embeddings (or, with RoPE, the rotation)
    no_causal_mask: bool = False  # let every token look at future tokens too
    no_residual: bool = False  # x = sublayer(x) instead of x = x + sublayer(x)
    # Edits at named points of the forward (hook points): ((name, f), ...); the forward goes on
    # with f(array) instead of the array. f gets the whole batch and returns a new array.
    # The points, for block i (names as in the trace):
    #   blocks.i.resid_pre    (B, T, C)   the residual stream entering the block
    #   blocks.i.attn.heads   (B, H, T, hs) each head's output, before the output projection
    #   blocks.i.attn.output  (B, T, C)   what attention writes into the residual stream
    #   blocks.i.ffn.post     (B, T, I)   the neurons, the inputs of the down projection
    #   blocks.i.ffn.output   (B, T, C)   what the feed-forward writes
    # With a KV cache an edit sees only the new positions.
    edits: tuple = ()

    @property
    def active(self) -> bool:
        return self != Interventions()

    def edit(self, name: str, x: np.ndarray) -> np.ndarray:
        """x after every edit at the point `name` (x itself when there is none)."""
        for point, f in self.edits:
            if point == name:
                x = f(x)
        return x


NO_INTERVENTIONS = Interventions()
