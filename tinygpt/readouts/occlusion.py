"""Which words mattered? Remove one earlier token at a time and watch the prediction move.

For a prediction at `position` (the next token after ids[0..position]), variant i is the
prompt ids[0..position] with token i removed: one token shorter, so every token after i
moves one position to the left, and the prediction is read at the variant's last position
(position - 1). Tokens after `position` play no part (the model is causal).

All variants have the same length, position, so they go through the model as one batch with
no padding. Only the last position's logits are read out: the full (n, n, V) logits would be
n^2 * V numbers (8 GB for GPT-2 small at n = 200). The batch is run in slices of at most
`max_bytes` of working memory; the work is that of one forward of the n variants.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.network.model import GPT
from tinygpt.readouts import kl_divergence, probabilities
from tinygpt.readouts.attribution import check_index, check_prompt, check_token

MAX_OCCLUDED_TOKENS = 256  # the app inspects at most 256 tokens
SLICE_BYTES = 256 * 2**20  # working memory of one slice of the batch (an estimate, see below)


@dataclass(frozen=True)
class Occlusion:
    """The prediction at `position` with each earlier token removed in turn.

    removed[i] is the position of the token removed in variant i; probs[i] is the probability
    of `token` then, base_prob the probability with the prompt unchanged, change = probs -
    base_prob, kl_bits[i] = KL(unchanged || variant i) of the whole next-token distribution.
    With more than max_tokens candidates only the last max_tokens are removed (the nearest
    ones); the `not_scored` earliest tokens stay in every variant.
    """

    position: int
    token: int  # the token whose probability is watched
    removed: np.ndarray  # (n,) int64 positions, in order
    base_prob: float
    probs: np.ndarray  # (n,) float64
    change: np.ndarray  # (n,) float64, probs - base_prob
    kl_bits: np.ndarray  # (n,) float32, KL divergence in bits
    not_scored: int  # earliest tokens not removed because of max_tokens


def rows_per_slice(config, length: int, itemsize: int, max_bytes: int = SLICE_BYTES) -> int:
    """How many sequences of `length` tokens one slice of a batched forward may hold.

    Per sequence, the biggest arrays alive at once are a few (H, T, T) attention arrays
    (scores, masked, weights, softmax temporaries), a few (T, C) and a few (T, I) feed-forward
    arrays (I = config.inner_dim: 4C in GPT-2, SwiGLU's gate, up and product in Llama).
    """
    H, C, I, T = config.n_head, config.embedding_dim, config.inner_dim, length
    per_row = itemsize * T * (6 * H * T + 8 * C + 8 * I)
    return max(1, int(max_bytes // per_row))


def last_position_logits(model: GPT, ids: np.ndarray, max_bytes: int = SLICE_BYTES) -> np.ndarray:
    """ids (B, T) valid token ids -> logits of each sequence's last position (B, V).

    The layers' own forwards, as GPT.forward runs them, but the output layer reads only the
    last position. Rows go through in slices of `rows_per_slice` sequences.
    """
    B, T = ids.shape
    rows = rows_per_slice(model.config, T, model.dtype.itemsize, max_bytes)
    out = np.empty((B, model.config.vocab_size), dtype=model.dtype)  # (B, V)
    for start in range(0, B, rows):
        x = model.embedding.forward(ids[start : start + rows])  # (b, T, C)
        for i, block in enumerate(model.blocks):
            x = block.forward(x, index=i)  # (b, T, C)
        out[start : start + rows] = model.readout(x[:, -1])  # (b, V)
    return out


def occlusion_variants(prompt: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """prompt (n,), removed (m,) -> (m, n - 1): row i is the prompt without token removed[i]."""
    n = len(prompt)
    cols = np.arange(n - 1)[None, :]  # (1, n-1)
    # column j of row i reads token j before the removed one, token j + 1 from there on
    return prompt[cols + (cols >= removed[:, None])]  # (m, n-1)


def occlusion_cost(model: GPT, position: int, max_tokens: int = MAX_OCCLUDED_TOKENS) -> int:
    """About how many multiply-adds `occlusion` at `position` costs: m shortened prompts of
    `position` tokens each, every token through every parameter once (attention's own T x T
    products are left out: they are small next to the weights until T is in the thousands)."""
    n = position + 1
    m = min(n, max_tokens)
    return m * (n - 1) * model.num_parameters()


def occlusion(
    model: GPT,
    ids,
    position: int,
    token: int | None = None,
    *,
    max_tokens: int = MAX_OCCLUDED_TOKENS,
    max_bytes: int = SLICE_BYTES,
    base_logits: np.ndarray | None = None,
) -> Occlusion:
    """Remove each of the tokens 0..position in turn; the prediction at `position` each time.

    token: the token whose probability is watched; by default the model's top choice at
    `position` for the unchanged prompt. position must be >= 1 (removing the only token
    leaves nothing to read). Cost: one forward of the unchanged prompt's last position plus
    one batched forward of min(position + 1, max_tokens) variants of `position` tokens.
    base_logits: the unchanged prompt's logits at `position` (V,), when a forward of the
    prompt already made them (a trace's row): then that forward is not run again. Near the
    start of a prompt each forward is a few rows that read every weight once, so this halves
    the cost there.
    """
    prompt = check_prompt(model, ids)  # (T,)
    position = check_index(position, len(prompt), "position", "the prompt")
    if position < 1:
        raise ValueError("occlusion needs a position >= 1: one token removed leaves none")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    prompt = prompt[: position + 1]  # (n,) later tokens cannot change this prediction
    n = len(prompt)
    removed = np.arange(max(0, n - max_tokens), n, dtype=np.int64)  # (m,)

    if base_logits is None:
        base_logits = last_position_logits(model, prompt[None], max_bytes)[0]
    elif np.shape(base_logits) != (model.config.vocab_size,):
        raise ValueError(f"base_logits must have shape ({model.config.vocab_size},), got "
                         f"{np.shape(base_logits)}")
    base = probabilities(base_logits)  # (V,)
    token = int(np.argmax(base)) if token is None else check_token(model, token)
    variants = occlusion_variants(prompt, removed)  # (m, n-1)
    logits = last_position_logits(model, variants, max_bytes)  # (m, V)
    watched, kl_bits = _watch(logits, base, token, max_bytes)
    return Occlusion(
        position=position,
        token=token,
        removed=removed,
        base_prob=float(base[token]),
        probs=watched,
        change=watched - base[token],
        kl_bits=kl_bits,
        not_scored=int(removed[0]),
    )


def _watch(logits: np.ndarray, base: np.ndarray, token: int, max_bytes: int):
    """Each variant's probability of `token` and KL(base || variant), a few rows at a time.

    logits (m, V), base (V,) probabilities -> (m,) float64, (m,) float32 bits. In slices,
    because the float64 probabilities and the KL's temporaries are several (m, V) arrays.
    """
    m, V = logits.shape
    rows = max(1, int(max_bytes // (8 * 8 * V)))  # about 8 float64 (rows, V) arrays at once
    watched = np.empty(m, dtype=np.float64)
    kl_bits = np.empty(m, dtype=np.float32)
    for start in range(0, m, rows):
        probs = probabilities(logits[start : start + rows])  # (r, V)
        watched[start : start + rows] = probs[:, token]
        kl_bits[start : start + rows] = kl_divergence(base[None, :], probs)
    return watched, kl_bits
