"""What a KV cache saves: at each generation step, which keys and values are new, which reused.

Generating k tokens after an n-token prompt the way the app does (the prompt read once,
`read_prompt`; then every run's rows in one shared table, `tinygpt_hosting.steps.lockstep`):

    step 0      the prompt goes in: n positions' keys and values computed in every layer, and
                the output layer reads out the last position only (the next token's scores)
    step s >= 1 only the token chosen at step s-1 goes in: 1 position computed per layer,
                the n + s - 1 earlier positions' keys and values read back from the cache

A token is chosen after each step, so k tokens take k steps and the last token chosen is
never fed back: the cache holds n + k - 1 positions at the end. Generation stops when the
sequence fills the context (n + s == n_ctx), as `generate` does.

Without the cache, step s runs the whole sequence of n + s tokens again and reads out every
position (model.forward). The work below is the multiply-adds of the matrix products the
forwards run, counted from the weights' shapes, so it holds for GPT-2 and for Llama/Qwen2-style
models alike. Per layer and token fed (C = embedding_dim, KV key/value heads of hs numbers,
I = the feed-forward width):
    query C^2, key and value C * KV hs each (GPT-2's fused W_qkv: 3 C^2), projection C^2,
    feed-forward 2 C I (GELU: W1, W2) or 3 C I (SwiGLU: gate, up, down);
attention's scores and weighted sum 2 C per (query, key) pair it computes (all T_k keys, or
block by block for long inputs: attention.attend), whatever the number of key/value heads (each
query head still meets every key); the output layer C * V per position it reads out, tied or
not. Elementwise work (norms, GELU/SiLU, the softmax, the rotary turn of q and k) is left out:
it is O(T * C), not O(T * C^2).

Memory: one position's key and value take 2 * KV * hs numbers per layer, so a grouped-query
model (Llama, Qwen2, SmolLM2) holds n_head / KV times less than the same model with one
key/value head per query head (`bytes_per_token_one_kv_per_query`). The prompt read keeps n
positions; the shared table gives each row room for the prompt and the new tokens asked for,
min(n_ctx, n + k) positions (KVCache.take).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.kernels.blocked_attention import QUERY_BLOCK
from tinygpt.network.config import GPTConfig
from tinygpt.network.model import GPT


@dataclass(frozen=True)
class KVCacheReuse:
    """Keys and values computed and reused at each generation step (S steps), one sequence.

    Counts are per layer (every layer does the same); bytes are keys + values of all layers.
    """

    prompt_length: int
    requested_tokens: int  # the tokens asked for; S = len(tokens_in) may be fewer
    stopped_at_context: bool  # True when the context filled up before requested_tokens
    n_layer: int
    kv_heads: int  # key/value heads per layer: n_head, or fewer (grouped-query attention)
    bytes_per_position: int  # keys + values of one position in one layer: 2 KV hs itemsize
    bytes_per_token: int  # keys + values of one position in all layers
    bytes_per_token_one_kv_per_query: int  # the same with n_head key/value heads: 2 C L itemsize
    bytes_prompt_read: int  # the prompt read's buffers: n positions, all layers
    bytes_per_row: int  # one row of the shared table: min(n_ctx, n + k) positions, all layers
    bytes_allocated: int  # one sequence: the prompt read and its row of the table
    tokens_in: np.ndarray  # (S,) tokens fed to the model at each step
    computed: np.ndarray  # (S,) positions whose keys/values are computed, in each layer
    reused: np.ndarray  # (S,) positions whose keys/values are read from the cache, each layer
    cache_length: np.ndarray  # (S,) positions in the cache after the step
    bytes_computed: np.ndarray  # (S,) all layers
    bytes_reused: np.ndarray  # (S,) all layers
    bytes_held: np.ndarray  # (S,) filled part of the cache after the step, all layers
    multiply_adds_cached: np.ndarray  # (S,) the step's work with the cache
    multiply_adds_recompute: np.ndarray  # (S,) the step's work running everything again


def _positive_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def attention_multiply_adds(C: int, new_tokens: int, keys: int) -> int:
    """Multiply-adds of one layer's attention (scores q k^T and weights @ v) for `new_tokens`
    queries, the last of which sees `keys` keys: 2 C per (query, key) pair computed. Up to
    QUERY_BLOCK queries see every key; more go block by block, each block seeing the keys up
    to its last query (the pairs right of the diagonal block are never computed)."""
    if new_tokens <= QUERY_BLOCK:
        return 2 * C * new_tokens * keys
    start, pairs = keys - new_tokens, 0
    for i0 in range(0, new_tokens, QUERY_BLOCK):
        i1 = min(i0 + QUERY_BLOCK, new_tokens)
        pairs += (i1 - i0) * (start + i1)
    return 2 * C * pairs


def layer_multiply_adds_per_token(config: GPTConfig) -> int:
    """Multiply-adds of one layer's matrix products for one token fed, attention's (query,
    key) pairs aside: the q, k, v and output projections and the feed-forward."""
    C, I = config.n_embd, config.inner_dim
    kv_width = config.kv_heads * config.head_size  # the keys' width (and the values')
    qkv = C * C + 2 * C * kv_width  # GPT-2 (KV = n_head): 3 C^2, one fused product
    feed_forward = (3 if config.mlp == "swiglu" else 2) * C * I  # gate, up, down or W1, W2
    return qkv + C * C + feed_forward


def forward_multiply_adds(config: GPTConfig, new_tokens: np.ndarray, keys: np.ndarray,
                          read_out: np.ndarray | None = None) -> np.ndarray:
    """Multiply-adds of forwards, one per entry: `new_tokens` tokens fed, attending to `keys`
    keys, the output layer reading out `read_out` positions (default: every token fed).

    Elementwise work (norms, GELU/SiLU, softmax, rotary turns) is left out: it is O(T * C),
    not O(T * C^2).
    """
    C, L, V = config.n_embd, config.n_layer, config.vocab_size
    t, T_k = new_tokens.astype(np.int64), keys.astype(np.int64)
    rows = t if read_out is None else np.asarray(read_out).astype(np.int64)
    attention = np.vectorize(lambda a, b: attention_multiply_adds(C, int(a), int(b)),
                             otypes=[np.int64])(t, T_k)  # t's shape
    per_layer = t * layer_multiply_adds_per_token(config) + attention  # products, then pairs
    return L * per_layer + rows * C * V


def kv_cache_reuse(model: GPT, prompt_length: int, new_tokens: int,
                   asked: int | None = None) -> KVCacheReuse:
    """The KV cache at each step of generating `new_tokens` after `prompt_length` tokens.

    Numbers for one sequence (greedy or sampling; beam search keeps num_beams such rows).
    `asked`: the new tokens the runs were asked for, which sets the table's room (default
    new_tokens; a run that stopped early, at EOS, made fewer). Cost: O(steps); nothing is run.
    """
    cfg = model.config
    n = _positive_int("prompt_length", prompt_length, 1)
    k = _positive_int("new_tokens", new_tokens, 0)
    if n > cfg.n_ctx:
        raise ValueError(f"prompt_length {n} is more than the model's context of {cfg.n_ctx}")
    steps = min(k, cfg.n_ctx - n)  # generate stops when the sequence fills the context
    s = np.arange(steps, dtype=np.int64)  # (S,)
    tokens_in = np.where(s == 0, n, 1)
    reused = np.where(s == 0, 0, n + s - 1)
    cache_length = n + s
    itemsize = model.dtype.itemsize
    per_position = 2 * cfg.kv_heads * cfg.head_size * itemsize  # one key + one value, one layer
    all_layers = cfg.n_layer * per_position
    room = min(cfg.n_ctx, n + (k if asked is None else _positive_int("asked", asked, k)))
    row = room * all_layers  # the table's room: the prompt and the tokens asked for
    return KVCacheReuse(
        prompt_length=n,
        requested_tokens=k,
        stopped_at_context=steps < k,
        n_layer=cfg.n_layer,
        kv_heads=cfg.kv_heads,
        bytes_per_position=per_position,
        bytes_per_token=all_layers,
        bytes_per_token_one_kv_per_query=2 * cfg.n_embd * cfg.n_layer * itemsize,
        bytes_prompt_read=n * all_layers,
        bytes_per_row=row,
        bytes_allocated=n * all_layers + row,
        tokens_in=tokens_in,
        computed=tokens_in,
        reused=reused,
        cache_length=cache_length,
        bytes_computed=tokens_in * all_layers,
        bytes_reused=reused * all_layers,
        bytes_held=cache_length * all_layers,
        # each cached step reads out one position: the prompt read its last one (last_only)
        multiply_adds_cached=forward_multiply_adds(cfg, tokens_in, cache_length,
                                                   read_out=np.ones_like(tokens_in)),
        multiply_adds_recompute=forward_multiply_adds(cfg, cache_length, cache_length),
    )


@dataclass(frozen=True)
class WorkSaved:
    """The whole generation's multiply-adds with the cache and recomputing, and their ratio."""

    cached: int
    recompute: int
    ratio: float  # recompute / cached: how many times more work without the cache


def work_saved(reuse: KVCacheReuse) -> WorkSaved:
    """Totals over every step of `reuse` (ratio 1.0 when there are no steps)."""
    cached = int(reuse.multiply_adds_cached.sum())
    recompute = int(reuse.multiply_adds_recompute.sum())
    return WorkSaved(cached, recompute, recompute / cached if cached else 1.0)
