"""tinygpt: a GPT written from scratch in NumPy that records every step it takes."""

from tinygpt.checkpoint import CheckpointError, load, save
from tinygpt.model import (
    GPT,
    Attention,
    EmbeddingLayer,
    FeedForward,
    GPTConfig,
    Interventions,
    KVCache,
    LayerNorm,
    OutputLayer,
    TransformerBlock,
)

__all__ = [
    "CheckpointError",
    "load",
    "save",
    "GPT",
    "Attention",
    "EmbeddingLayer",
    "FeedForward",
    "GPTConfig",
    "Interventions",
    "KVCache",
    "LayerNorm",
    "OutputLayer",
    "TransformerBlock",
]
