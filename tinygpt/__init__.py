"""tinygpt: a GPT written from scratch in NumPy that records every step it takes."""

from tinygpt.checkpoint import CheckpointError, load, save
from tinygpt.decoding import (
    GenerationResult,
    generate,
    process_logits,
    softmax,
    top_k_filter,
    top_p_filter,
)
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
from tinygpt.tokenizer import BPETokenizer

__all__ = [
    "BPETokenizer",
    "GenerationResult",
    "generate",
    "process_logits",
    "softmax",
    "top_k_filter",
    "top_p_filter",
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
