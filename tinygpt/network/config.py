"""What a model is made of (GPTConfig) and the 'what if' switches of a forward (Interventions).

The embedding width has one name in tinygpt's docs: `embedding_dim`, the number of values in
each token's vector. The same number appears as
    n_embd   the GPTConfig field (GPT-2's config name; checkpoints store it under that key),
    C        in shape comments, e.g. (B, T, C),
    d        on the app's pages and in the formulas they show (n x d).
`GPTConfig.embedding_dim` reads `n_embd`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np


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

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_ctx", "n_embd", "n_head", "n_layer"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})"
            )
        if self.activation not in ("gelu_tanh", "gelu"):
            raise ValueError(f"activation must be 'gelu_tanh' or 'gelu', got {self.activation!r}")
        if not (self.layer_norm_eps > 0):
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")

    @property
    def embedding_dim(self) -> int:
        """The width of every token's vector (the field is called n_embd, as in GPT-2)."""
        return self.n_embd

    @property
    def head_size(self) -> int:
        """hs = embedding_dim / n_head: each head works in a slice of this width."""
        return self.n_embd // self.n_head

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
    no_layernorm: bool = False  # every LayerNorm (ln1, ln2, final) becomes the identity
    no_position: bool = False  # drop the position embeddings
    no_causal_mask: bool = False  # let every token look at future tokens too
    no_residual: bool = False  # x = sublayer(x) instead of x = x + sublayer(x)

    @property
    def active(self) -> bool:
        return self != Interventions()


NO_INTERVENTIONS = Interventions()
