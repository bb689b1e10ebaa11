"""tinygpt: a GPT written from scratch in NumPy that records every step it takes.

    tokenizer     byte-level BPE (BPETokenizer)
    config        GPTConfig (the sizes; embedding_dim = n_embd), Interventions (what-if switches)
    functional    softmax, log_softmax, cross_entropy, linear, GELU: the math the others share
    layers        EmbeddingLayer, TransformerBlock, OutputLayer, composing the parts the config
                  names: norms (LayerNorm, RMSNorm), attention (attend, Rotary, Attention with
                  grouped-query heads), mlp (FeedForward, SwiGLU); each forward / backward
    kv_cache      KVCache
    trace         Trace: every tensor of a forward by name, storing only what cannot be derived
    model         GPT: forward, run_with_trace, loss_and_grads; parameter_shapes (the names)
    decoding      softmax_with_temperature (tinygpt.softmax), top-k, top-p, generate
    beam_search   Hugging Face's beam search, step by step
    train         AdamW, the schedule, Trainer; train_cli is its command line
    checkpoint    load and save (.npz checkpoints, GPT-2, Llama and Qwen2 folders)
    corpus        the shipped Shakespeare plays
    readouts      what the app's pages show, computed from a model and a trace
"""

from tinygpt.checkpoint.files import CheckpointError, load, save
from tinygpt.decoding.generation import (
    GenerationResult,
    generate,
    process_logits,
    softmax_with_temperature,
    top_k_filter,
    top_p_filter,
)
from tinygpt.decoding.generation import softmax_with_temperature as softmax
from tinygpt.network.model import (
    GPT,
    Attention,
    EmbeddingLayer,
    FeedForward,
    GPTConfig,
    Interventions,
    KVCache,
    LayerNorm,
    OutputLayer,
    RMSNorm,
    SwiGLU,
    TransformerBlock,
)
from tinygpt.readouts.attribution import (
    Attribution,
    NeuronEffects,
    logit_attribution,
    logit_difference_attribution,
    neuron_effects,
    neuron_token_effects,
)
from tinygpt.readouts.kv_reuse import KVCacheReuse, kv_cache_reuse
from tinygpt.readouts.occlusion import Occlusion, occlusion
from tinygpt.readouts.surprise import surprise
from tinygpt.tokenizer.bpe import BPETokenizer

__all__ = [
    "BPETokenizer",
    "GenerationResult",
    "generate",
    "process_logits",
    "softmax",
    "softmax_with_temperature",
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
    "RMSNorm",
    "SwiGLU",
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
