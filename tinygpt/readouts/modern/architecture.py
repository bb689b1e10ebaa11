"""Read-outs that set models side by side: what each is made of, where its parameters are,
what its KV cache costs a token, what it guesses after the same prompt, and how its tokenizer
cuts the same text.

Everything is read off the config and the model's own forward: a parameter count is the sum
of the shapes `parameter_shapes` lists (the one list of parameter names), so the parts add up
to `GPT.num_parameters()` by construction, and the test checks them against transformers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.network.config import GPTConfig
from tinygpt.network.model import GPT, parameter_shapes
from tinygpt.readouts.forward_pass import top_k
from tinygpt.readouts.parts import parts_of

PARTS = ("token embedding", "position embedding", "attention", "feed-forward",
         "normalisation", "output layer")


def part_of(name: str) -> str:
    """Which part a parameter name belongs to ("blocks.3.attn.W_q" -> "attention")."""
    if name == "embedding.embeddings":
        return "token embedding"
    if name == "embedding.position_embeddings":
        return "position embedding"
    if name.startswith("output."):
        return "output layer"
    if ".attn." in name:
        return "attention"
    if ".ffn." in name:
        return "feed-forward"
    return "normalisation"  # ln1, ln2, ln_f: gamma (and beta)


def parameters_by_part(config: GPTConfig) -> dict[str, int]:
    """Parameters per part (PARTS order, every part listed, 0 when the model has none): a tied
    output layer has 0 of its own, a rotary model no position table."""
    counts = dict.fromkeys(PARTS, 0)
    for name, shape in parameter_shapes(config).items():
        counts[part_of(name)] += int(np.prod(shape))
    return counts


def parameter_table(configs: list[GPTConfig]) -> np.ndarray:
    """(M, P) int64: parameters_by_part of each model, a row per model, PARTS as columns."""
    return np.array([list(parameters_by_part(c).values()) for c in configs], dtype=np.int64)


def kv_bytes_per_token(config: GPTConfig, itemsize: int = 4, *,
                       kv_heads: int | None = None) -> int:
    """Bytes one position adds to the KV cache: a key and a value of kv_heads x head_size
    numbers, in every layer. kv_heads: the config's (None), or another count (n_head: one
    key/value head per query head, as without grouped-query attention)."""
    heads = config.kv_heads if kv_heads is None else kv_heads
    return 2 * heads * config.head_size * config.n_layer * itemsize


def components(config: GPTConfig) -> dict[str, str]:
    """The component table's column for one model: component -> what this model uses."""
    parts = parts_of(config)
    biases = [name for name, on in (("q/k/v", config.attn_bias), ("output projection",
                                                                   config.proj_bias),
                                    ("feed-forward", config.mlp_bias)) if on]
    return {
        "family": parts.family,
        "normalisation": parts.norm,
        "positions": parts.positions,
        "heads": f"{config.n_head} query heads, {config.kv_heads} key/value heads",
        "feed-forward": f"{parts.mlp}, {config.inner_dim} wide",
        "biases": ", ".join(biases) if biases else "none",
        "output layer": "tied to the token embedding" if config.tie_weights else "its own W_out",
        "vocabulary": f"{config.vocab_size:,} tokens",
        "size": f"{config.n_layer} layers, d = {config.n_embd}, context {config.n_ctx:,}",
    }


@dataclass(frozen=True)
class NextToken:
    """A model's guess after its own tokens of a prompt: the top k of the last position."""

    ids: np.ndarray  # (k,) best first
    probs: np.ndarray  # (k,) their softmax probabilities
    tokens_read: int  # how many tokens the model read


def next_token(model: GPT, ids: np.ndarray, k: int) -> NextToken:
    """The model's top k next tokens after `ids` (one plain forward; the last row only)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or len(ids) == 0:
        raise ValueError("next_token needs a non-empty 1-D sequence of ids")
    last = model.forward(ids)[-1]  # (V,)
    top_ids, probs = top_k(last, min(k, model.config.vocab_size))
    return NextToken(ids=top_ids, probs=probs, tokens_read=len(ids))


def last_tokens(ids, most: int) -> np.ndarray:
    """The last `most` ids (a prompt capped for a side-by-side view: the end decides the
    next token)."""
    ids = np.asarray(ids, dtype=np.int64)
    return ids[-most:] if most > 0 else ids[:0]


def same_cuts(pieces: list[list[str]]) -> bool:
    """Do all tokenizers cut the text into the same pieces?"""
    return all(p == pieces[0] for p in pieces[1:])
