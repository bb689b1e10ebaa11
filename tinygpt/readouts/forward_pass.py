"""Read-outs of one forward pass: the small pieces of math the pages show about it.

Everything here takes a model and/or a trace from `GPT.run_with_trace` and returns NumPy
arrays or small dataclasses; nothing here draws. Shapes: T tokens, C = embedding_dim,
V = vocab_size, L = n_layer, S = number of residual "stages" (the stream before any block,
then after each sublayer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tinygpt.network.functional import largest_k, logsumexp, softmax
from tinygpt.network.model import GPT
from tinygpt.network.norms import LayerNorm
from tinygpt.network.trace import Trace

# ----------------------------------------------------------------------------- top-k


def probabilities(logits: np.ndarray) -> np.ndarray:
    """softmax over the last axis, in float64 so tiny probabilities keep their digits."""
    return softmax(np.asarray(logits, dtype=np.float64), axis=-1)


def top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k highest-probability tokens of each row, best first.

    logits (..., V) -> ids (..., k) int64 and their softmax probabilities (..., k).
    """
    logits = np.asarray(logits)
    ids = largest_k(logits, k)  # (..., k): ranking the logits ranks the probabilities
    # p = exp(z - logsumexp z): the (..., V) probabilities are never formed
    lse = logsumexp(logits.astype(np.float64), axis=-1, overwrite=True)  # (...,)
    top = np.take_along_axis(logits, ids, axis=-1).astype(np.float64)
    return ids, np.exp(top - lse[..., None]).astype(np.float32)


def entropy(probs: np.ndarray, axis: int = -1, base: float = 2.0) -> np.ndarray:
    """H(p) = -sum_i p_i log p_i (in bits by default). 0 log 0 counts as 0."""
    p = np.asarray(probs, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return (-terms.sum(axis=axis) / np.log(base)).astype(np.float32)


def uniform_entropy(v: int, base: float = 2.0) -> float:
    """The entropy of a guess spread evenly over v tokens, log v: the most any distribution
    over v tokens has (in bits by default; in nats, ln v, the loss an untrained model starts
    near). The same as entropy(np.full(v, 1 / v)), without making the v numbers."""
    return math.log(v) / math.log(base)


def kl_divergence(p: np.ndarray, q: np.ndarray, axis: int = -1, base: float = 2.0) -> np.ndarray:
    """KL(p || q) = sum_i p_i log(p_i / q_i): how surprised q is by what p expects (bits)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(np.maximum(q, 1e-300))), 0.0)
    return (terms.sum(axis=axis) / np.log(base)).astype(np.float32)


# ----------------------------------------------------------------------------- residual stream


def residual_stages(n_layer: int, sublayers: bool = True) -> list[tuple[str, str]]:
    """(label, trace name) of the residual stream at each stage, in order.

    With sublayers: the embeddings, then after each attention and each FFN (S = 1 + 2L).
    Without: the embeddings, then after each block (S = 1 + L).
    """
    stages = [("embeddings", "embed.sum")]
    for i in range(n_layer):
        if sublayers:
            stages.append((f"block {i} + attn", f"blocks.{i}.resid_attn"))
        stages.append((f"block {i} + ffn" if sublayers else f"block {i}", f"blocks.{i}.resid_ffn"))
    return stages


def residual_norms(trace: Trace, n_layer: int) -> np.ndarray:
    """Length ||x_t|| of each token's residual vector at every stage: (S, T), S = 1 + 2L."""
    stages = residual_stages(n_layer, sublayers=True)
    return np.stack([np.linalg.norm(trace[name], axis=-1) for _, name in stages]).astype(
        np.float32
    )


def sublayer_stages(n_layer: int) -> list[tuple[str, str]]:
    """(label, trace name) of what each sublayer adds to the stream: attn 0, ffn 0, attn 1, ..."""
    stages = []
    for i in range(n_layer):
        stages.append((f"attn {i}", f"blocks.{i}.attn.output"))
        stages.append((f"ffn {i}", f"blocks.{i}.ffn.output"))
    return stages


def sublayer_write_norms(trace: Trace, n_layer: int) -> np.ndarray:
    """||sublayer output_t||, the size of what each sublayer writes for each token: (2L, T)."""
    return np.stack(
        [np.linalg.norm(trace[name], axis=-1) for _, name in sublayer_stages(n_layer)]
    ).astype(np.float32)


# ----------------------------------------------------------------------------- logit lens


@dataclass(frozen=True)
class LogitLens:
    """Top-k next tokens read from the residual at each stage: logits = readout(x_stage)."""

    labels: list[str]  # S stage labels
    ids: np.ndarray  # (S, m, k) token ids, best first (m positions, all T by default)
    probs: np.ndarray  # (S, m, k) their probabilities
    entropy: np.ndarray  # (S, m) entropy of each read-out distribution, bits


LENS_ROWS_PER_PRODUCT = 128  # two (128, V) float32 arrays, 50 MB for GPT-2: the memory bound


def logit_lens(
    model: GPT,
    trace: Trace,
    k: int = 3,
    sublayers: bool = False,
    positions: np.ndarray | list[int] | None = None,
) -> LogitLens:
    """Apply the final LayerNorm (each residual's own mean/variance) and the output layer.

    The last stage is the model's real output, so its top token is the real prediction.
    All stages go through the output layer as one product of (S * m, C) rows (in chunks of
    LENS_ROWS_PER_PRODUCT, so memory stays at (chunk, V)), with one log-softmax per row for
    both the top-k probabilities and the entropy. `positions` (m of them) limits the work to
    the columns shown (LayerNorm treats each token alone, so this changes nothing).
    """
    stages = residual_stages(model.config.n_layer, sublayers)
    cols = slice(None) if positions is None else np.asarray(positions, dtype=np.int64)
    x = np.stack([trace[name][cols] for _, name in stages])  # (S, m, C)
    S, m, C = x.shape
    rows = x.reshape(S * m, C)
    k = max(1, min(int(k), model.config.vocab_size))
    ids = np.empty((S * m, k), dtype=np.int64)
    probs = np.empty((S * m, k), dtype=np.float32)
    ents = np.empty(S * m, dtype=np.float32)
    for a in range(0, S * m, LENS_ROWS_PER_PRODUCT):
        b = min(a + LENS_ROWS_PER_PRODUCT, S * m)
        ids[a:b], probs[a:b], ents[a:b] = _top_and_entropy(model.readout(rows[a:b]), k)
    return LogitLens(
        labels=[label for label, _ in stages],
        ids=ids.reshape(S, m, k),
        probs=probs.reshape(S, m, k),
        entropy=ents.reshape(S, m),
    )


def _top_and_entropy(z: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's k most likely ids, their probabilities and the entropy (bits) of logits z
    (rows, V), overwriting z. Ranking the logits ranks the probabilities; with y = z - max and
    s = sum exp(y): p = exp(y) / s and H = ln s - sum(p y), so the (rows, V) probabilities are
    never formed: a few float32 passes over V, the sums accumulated in float64."""
    ids = largest_k(z, k)  # (rows, k) best first
    top_z = np.take_along_axis(z, ids, axis=-1).astype(np.float64)
    z_max = z.max(axis=-1, keepdims=True)  # (rows, 1)
    y = np.subtract(z, z_max, out=z)  # (rows, V), <= 0
    e = np.exp(y)
    total = e.sum(axis=-1, dtype=np.float64)  # (rows,) s
    ey = np.multiply(e, y, out=e).sum(axis=-1, dtype=np.float64)  # sum exp(y) y
    log_total = np.log(total)
    logp_top = top_z - z_max - log_total[:, None]
    entropy = (log_total - ey / total) / np.log(2.0)
    return ids, np.exp(logp_top), entropy


@dataclass(frozen=True)
class TopTokens:
    """Each row's k most likely tokens and the shift-by-one scores, from one softmax of (T, V):
    all a page needs from the logits except the one row it draws in full."""

    ids: np.ndarray  # (T, k) token ids, best first
    probs: np.ndarray  # (T, k) their probabilities
    shift: ShiftByOne  # row t scored on token t+1 (T-1 rows)


def top_tokens(logits: np.ndarray, tokens: np.ndarray, k: int) -> TopTokens:
    """top_k and shift_by_one of the same logits (T, V), with one float64 log-softmax."""
    tokens = np.asarray(tokens, dtype=np.int64)
    k = max(1, min(int(k), logits.shape[-1]))
    # log p = logit - logsumexp: only the k best and the targets are needed, so the (T, V)
    # log-probabilities are never formed; ranking the logits ranks the probabilities
    lse = logsumexp(logits.astype(np.float64), axis=-1, overwrite=True)  # (T,)
    ids = largest_k(logits, k)  # (T, k) best first
    top_logp = np.take_along_axis(logits, ids, axis=-1).astype(np.float64) - lse[:, None]
    rows = np.arange(len(logits) - 1)
    target_logp = (logits[rows, tokens[1:]].astype(np.float64) - lse[:-1]).astype(np.float32)
    guesses = np.argmax(logits[:-1], axis=-1).astype(np.int64)
    shift = ShiftByOne(targets=tokens[1:], guesses=guesses, logprobs=target_logp,
                       probs=np.exp(target_logp), hits=guesses == tokens[1:])
    return TopTokens(ids=ids, probs=np.exp(top_logp).astype(np.float32), shift=shift)


def top_columns(top_ids: np.ndarray, k: int, max_columns: int | None = None) -> np.ndarray:
    """vocab_columns from each row's ranked top ids (T, K >= k), without the logits again."""
    ids = top_ids[:, :k]
    if max_columns is not None and ids.size > max_columns:
        ranked = ids.T.reshape(-1)  # every position's 1st choice, then every 2nd, ...
        _, first = np.unique(ranked, return_index=True)
        return np.sort(ranked[np.sort(first)][:max_columns])
    return np.unique(ids)


# ----------------------------------------------------------------------------- attention


def attention_with_mask(trace: Trace, layer: int, head: int) -> np.ndarray:
    """One head's weights (T, T) with the masked cells (a later token) as NaN, not 0.

    A weight of 0 because of the mask and a weight that is merely tiny are different things.
    """
    weights = trace[f"blocks.{layer}.attn.weights"][head]
    masked = np.isneginf(trace[f"blocks.{layer}.attn.scores_masked"][head])
    return np.where(masked, np.nan, weights).astype(np.float32)


def visible_keys(trace: Trace, layer: int, head: int, query: int) -> np.ndarray:
    """The key positions `query` may look at in this head (the mask did not hide them).

    With the causal mask that is 0 .. query; with the mask switched off, every position.
    """
    scores = trace[f"blocks.{layer}.attn.scores_masked"][head, query]  # (T,)
    return np.flatnonzero(~np.isneginf(scores)).astype(np.int64)


def position_window(n: int, position: int, size: int) -> list[int]:
    """Up to `size` consecutive positions of 0..n-1 that include `position`, as far left as
    possible: 0..size-1 while `position` fits in them, else the `size` ending at `position`.

    For a view that can show only `size` columns (the logit lens, an attention map).
    """
    if not 0 <= position < n:
        raise ValueError(f"position {position} is outside 0 .. {n - 1}")
    size = max(1, int(size))
    end = max(position + 1, min(n, size))
    return list(range(max(0, end - size), end))


# ----------------------------------------------------------------------------- logits


def next_token_hits(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Shift by one: row t predicts token t+1. hits[t] = (argmax logits[t] == tokens[t+1]).

    logits (T, V), tokens (T,) -> (T-1,) bool (the last row has nothing to check against).
    """
    tokens = np.asarray(tokens)
    return np.argmax(logits[:-1], axis=-1) == tokens[1:]


def target_logprobs(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """log p(token t+1 | tokens 0..t) for each t: (T-1,). Their negative mean is the loss.
    log p = logit - logsumexp(row): the (T-1, V) log-probabilities are never formed."""
    rows = np.arange(len(logits) - 1)
    lse = logsumexp(logits[:-1].astype(np.float64), axis=-1, overwrite=True)  # (T-1,)
    picked = logits[rows, np.asarray(tokens)[1:]].astype(np.float64) - lse
    return picked.astype(np.float32)


@dataclass(frozen=True)
class ShiftByOne:
    """Row t of the logits scored on token t+1, as training scores it. All arrays (T-1,)."""

    targets: np.ndarray  # token t+1: what row t should predict
    guesses: np.ndarray  # argmax of row t, the model's top guess (the lowest id on ties)
    logprobs: np.ndarray  # log p(token t+1 | tokens 0..t), nats
    probs: np.ndarray  # p(token t+1 | tokens 0..t)
    hits: np.ndarray  # bool: guess == target

    @property
    def n_hits(self) -> int:
        return int(self.hits.sum())

    @property
    def loss(self) -> float:
        """Mean surprise -log p over the n-1 predictions, in nats (NaN with one token)."""
        return -float(self.logprobs.mean()) if self.logprobs.size else float("nan")


def shift_by_one(logits: np.ndarray, tokens: np.ndarray) -> ShiftByOne:
    """Every prediction of one sequence next to the token that really came next.

    logits (T, V), tokens (T,) -> ShiftByOne of T-1 rows (the last row has no next token).
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    logprobs = target_logprobs(logits, tokens)
    return ShiftByOne(
        targets=tokens[1:],
        guesses=np.argmax(logits[:-1], axis=-1).astype(np.int64),
        logprobs=logprobs,
        probs=np.exp(logprobs),
        hits=next_token_hits(logits, tokens),
    )


def vocab_columns(logits: np.ndarray, k: int, max_columns: int | None = None) -> np.ndarray:
    """Sorted union of every position's top-k token ids: the columns worth showing when V is big.

    logits (T, V) -> (m,) ids with m <= T * k (and <= max_columns: the best-ranked first).
    """
    ids, _ = top_k(logits, k)  # (T, k)
    if max_columns is not None and ids.size > max_columns:
        ranked = ids.T.reshape(-1)  # every position's 1st choice, then every 2nd, ...
        _, first = np.unique(ranked, return_index=True)
        keep = ranked[np.sort(first)][:max_columns]
        return np.sort(keep)
    return np.unique(ids)


def output_singular_values(model: GPT) -> np.ndarray:
    """Singular values of W_out (C, V), largest first: at most C of them, however big V is.

    So the V logits of a position are V numbers made from only C: the 'rank bottleneck'.
    """
    W = model.output.W_out.astype(np.float64)  # (C, V)
    # eigenvalues of W W^T (C, C) are the squared singular values; cheaper than SVD of (C, V)
    eig = np.linalg.eigvalsh(W @ W.T)
    return np.sqrt(np.clip(eig[::-1], 0.0, None)).astype(np.float32)


def weights_are_tied(model: GPT) -> bool:
    """True when W_out and the embedding matrix are one array in memory (W_out = E^T)."""
    return bool(np.shares_memory(model.output.W_out, model.embedding.embeddings))


@dataclass(frozen=True)
class TyingCheck:
    """logit[t, token] rebuilt by hand: h_t . W_out[:, token] (+ b_out[token])."""

    hidden: np.ndarray  # (C,) ln_f.output[t], the final hidden state
    column: np.ndarray  # (C,) W_out[:, token] (= E[token] when tied)
    products: np.ndarray  # (C,) hidden * column, element by element
    dot: float  # sum of products
    bias: float  # b_out[token], 0 without an output bias
    logit: float  # the model's own logits[t, token] from the trace
    tied: bool
    rebuilt: float  # dot + bias: the logit rebuilt by hand
    difference: float  # rebuilt - logit (float32 rounding, nothing more)


def dot_by_hand(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """a . b summed in float64 term by term: a, b and their products (float32, as shown) and
    the sum, to set beside the model's own float32 number."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)  # (n,)
    products = a64 * b64  # (n,)
    return (a64.astype(np.float32), b64.astype(np.float32), products.astype(np.float32),
            float(products.sum()))


def tying_check(model: GPT, trace: Trace, position: int, token: int) -> TyingCheck:
    # h (C,) . the token's column of W_out (C,)
    h, col, products, dot = dot_by_hand(trace["ln_f.output"][position],
                                        model.output.W_out[:, token])
    b_out = model.output.b_out
    bias = float(b_out[token]) if b_out is not None else 0.0
    logit = float(trace["logits"][position, token])
    return TyingCheck(hidden=h, column=col, products=products, dot=dot, bias=bias, logit=logit,
                      tied=weights_are_tied(model), rebuilt=dot + bias,
                      difference=dot + bias - logit)


# ----------------------------------------------------------------------------- query . key


@dataclass(frozen=True)
class QueryKeyCheck:
    """One attention score rebuilt by hand: q_query . k_key / sqrt(hs)."""

    q: np.ndarray  # (hs,) the query vector of the looking token, this head
    k: np.ndarray  # (hs,) the key vector of the looked-at token
    products: np.ndarray  # (hs,) q * k, element by element
    dot: float  # sum of products
    scaled: float  # dot / sqrt(hs)
    score: float  # the model's own attn.scores[head, query, key] from the trace
    difference: float  # scaled - score (float32 rounding, nothing more)
    weight: float  # attn.weights[head, query, key]: the score after softmax over the row


def query_key_check(trace: Trace, layer: int, head: int, query: int, key: int) -> QueryKeyCheck:
    """With rotary positions the score is made of the rotated q and k (attn.q_rot, k_rot);
    with grouped-query attention query head h reads key head h // (H / KV)."""
    p = f"blocks.{layer}.attn"
    rotated = f"{p}.q_rot" in trace
    queries = trace[f"{p}.q_rot" if rotated else f"{p}.q"]  # (H, T, hs)
    keys = trace[f"{p}.k_rot" if rotated else f"{p}.k"]  # (KV, T, hs)
    q, k, products, dot = dot_by_hand(queries[head, query],  # (hs,) . (hs,)
                                      keys[head // (len(queries) // len(keys)), key])
    scaled = dot / float(np.sqrt(q.shape[0]))
    score = float(trace[f"{p}.scores"][head, query, key])
    return QueryKeyCheck(q=q, k=k, products=products, dot=dot, scaled=scaled, score=score,
                         difference=scaled - score,
                         weight=float(trace[f"{p}.weights"][head, query, key]))


# ----------------------------------------------------------------------------- LayerNorm


def layer_norm_names(n_layer: int) -> list[str]:
    """Every LayerNorm of a model, in the order the data meets them:
    "blocks.0.ln1", "blocks.0.ln2", ..., "blocks.{L-1}.ln2", "ln_f" (2L + 1 of them)."""
    names = [f"blocks.{i}.{which}" for i in range(n_layer) for which in ("ln1", "ln2")]
    return [*names, "ln_f"]


def find_layer_norm(model: GPT, name: str) -> LayerNorm:
    """The LayerNorm called `name` (its trace names start with it), e.g. "blocks.2.ln1"."""
    names = layer_norm_names(model.config.n_layer)
    if name not in names:
        raise ValueError(f"no LayerNorm called {name!r}: this model has {', '.join(names)}")
    return model.submodule(name)


@dataclass(frozen=True)
class LayerNormStatistics:
    """What one LayerNorm computed for every token, from the trace. Arrays (T,) unless noted."""

    name: str
    mean: np.ndarray  # mu of each token's vector x
    var: np.ndarray  # sigma^2 (biased: divided by C, like GPT-2)
    std: np.ndarray  # sigma = sqrt(var): the spread in the units of x
    denominator: np.ndarray  # sqrt(var + eps): what x - mu is divided by
    eps: float
    gamma: np.ndarray  # (C,) the learned scale
    beta: np.ndarray  # (C,) the learned shift


def layer_norm_statistics(model: GPT, trace: Trace, name: str) -> LayerNormStatistics:
    """The statistics of LayerNorm `name` ("blocks.0.ln1", ..., "ln_f") in this trace."""
    norm = find_layer_norm(model, name)
    if not isinstance(norm, LayerNorm):
        raise ValueError(f"{name} is an RMSNorm: it subtracts no mean and keeps no variance; "
                         f"its trace holds {name}.rms")
    var = trace[f"{name}.var"].astype(np.float64)
    return LayerNormStatistics(
        name=name,
        mean=trace[f"{name}.mean"].astype(np.float64),
        var=var,
        std=np.sqrt(var),
        denominator=np.sqrt(var + norm.eps),
        eps=float(norm.eps),
        gamma=norm.gamma,
        beta=norm.beta,
    )


# ----------------------------------------------------------------------------- two runs


@dataclass(frozen=True)
class PredictionChange:
    """One position's next-token distribution in two runs (normal, then with interventions)."""

    tokens: np.ndarray  # (m,) both runs' top-k ids, once each, most likely (before) first
    p_before: np.ndarray  # (m,) their probabilities in the first run
    p_after: np.ndarray  # (m,) ... and in the second
    top_before: int  # each run's most likely token
    top_after: int
    p_top_before: float
    p_top_after: float
    kl_bits: float  # KL(before || after), bits: 0 when the runs agree
    entropy_before: float  # bits
    entropy_after: float

    @property
    def changed(self) -> bool:
        return self.top_before != self.top_after


def prediction_change(before: np.ndarray, after: np.ndarray, k: int) -> PredictionChange:
    """Compare two logit rows (V,) of the same position: top-k union, top token, KL, entropy."""
    p, q = probabilities(before), probabilities(after)  # (V,) each
    union = dict.fromkeys(int(i) for i in (*top_k(before, k)[0], *top_k(after, k)[0]))
    tokens = np.array(sorted(union, key=lambda i: -p[i]), dtype=np.int64)  # stable sort
    top_before, top_after = int(np.argmax(p)), int(np.argmax(q))
    return PredictionChange(
        tokens=tokens,
        p_before=p[tokens],
        p_after=q[tokens],
        top_before=top_before,
        top_after=top_after,
        p_top_before=float(p[top_before]),
        p_top_after=float(q[top_after]),
        kl_bits=float(kl_divergence(p, q)),
        entropy_before=float(entropy(p)),
        entropy_after=float(entropy(q)),
    )
