"""tinygpt: a GPT written from scratch in NumPy that records every step it takes."""

from tinygpt.attribution import (
    Attribution,
    NeuronEffects,
    logit_attribution,
    logit_difference_attribution,
    neuron_effects,
    neuron_token_effects,
)
from tinygpt.checkpoint import CheckpointError, load, save
from tinygpt.decoding import (
    GenerationResult,
    generate,
    process_logits,
    softmax,
    top_k_filter,
    top_p_filter,
)
from tinygpt.kv_reuse import KVCacheReuse, kv_cache_reuse
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
from tinygpt.occlusion import Occlusion, occlusion
from tinygpt.surprise import surprise
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
    "Attribution",
    "NeuronEffects",
    "logit_attribution",
    "logit_difference_attribution",
    "neuron_effects",
    "neuron_token_effects",
    "Occlusion",
    "occlusion",
    "surprise",
    "KVCacheReuse",
    "kv_cache_reuse",
]
