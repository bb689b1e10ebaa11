"""Read-outs of a forward pass for the app: the small pieces of math the pages show.

Everything here takes a model and/or a trace from `GPT.run_with_trace` and returns NumPy
arrays; nothing here draws. Shapes: T tokens, C = n_embd, V = vocab_size, L = n_layer,
S = number of residual "stages" (the stream before any block, then after each sublayer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.model import GPT, Trace, softmax

# ----------------------------------------------------------------------------- top-k


def probabilities(logits: np.ndarray) -> np.ndarray:
    """softmax over the last axis, in float64 so tiny probabilities keep their digits."""
    return softmax(np.asarray(logits, dtype=np.float64), axis=-1)


def top_k(logits: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k highest-probability tokens of each row, best first.

    logits (..., V) -> ids (..., k) int64 and their softmax probabilities (..., k).
    """
    k = max(1, min(int(k), logits.shape[-1]))
    probs = softmax(logits.astype(np.float64, copy=False), axis=-1)
    # argpartition finds the k largest without sorting all V; then sort just those k
    part = np.argpartition(-probs, k - 1, axis=-1)[..., :k]  # (..., k) unordered
    part_probs = np.take_along_axis(probs, part, axis=-1)
    order = np.argsort(-part_probs, axis=-1, kind="stable")
    ids = np.take_along_axis(part, order, axis=-1).astype(np.int64)
    return ids, np.take_along_axis(part_probs, order, axis=-1).astype(np.float32)


def entropy(probs: np.ndarray, axis: int = -1, base: float = 2.0) -> np.ndarray:
    """H(p) = -sum_i p_i log p_i (in bits by default). 0 log 0 counts as 0."""
    p = np.asarray(probs, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return (-terms.sum(axis=axis) / np.log(base)).astype(np.float32)


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


def logit_lens(
    model: GPT,
    trace: Trace,
    k: int = 3,
    sublayers: bool = False,
    positions: np.ndarray | list[int] | None = None,
) -> LogitLens:
    """Apply the final LayerNorm (each residual's own mean/variance) and the output layer.

    The last stage is the model's real output, so its top token is the real prediction.
    One stage at a time keeps memory at (T, V), not (S, T, V); `positions` (m of them) limits
    the work to the columns shown (LayerNorm treats each token alone, so this changes nothing).
    """
    stages = residual_stages(model.config.n_layer, sublayers)
    cols = slice(None) if positions is None else np.asarray(positions, dtype=np.int64)
    ids, probs, ents = [], [], []
    for _, name in stages:
        logits = model.readout(trace[name][cols])  # (m, V)
        i, p = top_k(logits, k)
        ids.append(i)
        probs.append(p)
        ents.append(entropy(softmax(logits.astype(np.float64), axis=-1)))
    return LogitLens(
        labels=[label for label, _ in stages],
        ids=np.stack(ids),
        probs=np.stack(probs),
        entropy=np.stack(ents),
    )


# ----------------------------------------------------------------------------- attention


def attention_with_mask(trace: Trace, layer: int, head: int) -> np.ndarray:
    """One head's weights (T, T) with the masked cells (a later token) as NaN, not 0.

    A weight of 0 because of the mask and a weight that is merely tiny are different things.
    """
    weights = trace[f"blocks.{layer}.attn.weights"][head]
    masked = np.isneginf(trace[f"blocks.{layer}.attn.scores_masked"][head])
    return np.where(masked, np.nan, weights).astype(np.float32)


# ----------------------------------------------------------------------------- logits


def next_token_hits(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Shift by one: row t predicts token t+1. hits[t] = (argmax logits[t] == tokens[t+1]).

    logits (T, V), tokens (T,) -> (T-1,) bool (the last row has nothing to check against).
    """
    tokens = np.asarray(tokens)
    return np.argmax(logits[:-1], axis=-1) == tokens[1:]


def target_logprobs(logits: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """log p(token t+1 | tokens 0..t) for each t: (T-1,). Their negative mean is the loss."""
    logits = logits[:-1].astype(np.float64)
    m = logits.max(axis=-1, keepdims=True)
    log_z = (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))[:, 0]
    picked = logits[np.arange(len(logits)), np.asarray(tokens)[1:]]
    return (picked - log_z).astype(np.float32)


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


def tying_check(model: GPT, trace: Trace, position: int, token: int) -> TyingCheck:
    h = trace["ln_f.output"][position].astype(np.float64)  # (C,)
    col = model.output.W_out[:, token].astype(np.float64)  # (C,)
    b_out = model.output.b_out
    products = h * col
    return TyingCheck(
        hidden=h.astype(np.float32),
        column=col.astype(np.float32),
        products=products.astype(np.float32),
        dot=float(products.sum()),
        bias=float(b_out[token]) if b_out is not None else 0.0,
        logit=float(trace["logits"][position, token]),
        tied=weights_are_tied(model),
    )


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


def query_key_check(trace: Trace, layer: int, head: int, query: int, key: int) -> QueryKeyCheck:
    p = f"blocks.{layer}.attn"
    q = trace[f"{p}.q"][head, query].astype(np.float64)  # (hs,)
    k = trace[f"{p}.k"][head, key].astype(np.float64)  # (hs,)
    products = q * k
    dot = float(products.sum())
    return QueryKeyCheck(
        q=q.astype(np.float32),
        k=k.astype(np.float32),
        products=products.astype(np.float32),
        dot=dot,
        scaled=dot / float(np.sqrt(q.shape[0])),
        score=float(trace[f"{p}.scores"][head, query, key]),
    )


# ============================================================================================
# Sampling and decoding read-outs (app part 2: pages 6 and 7)
# ============================================================================================


@dataclass(frozen=True)
class SortedDistribution:
    """A distribution ranked from the most likely token down (ties: the lowest id first)."""

    order: np.ndarray  # (V,) token ids, most likely first
    probs: np.ndarray  # (V,) their probabilities, in that order
    cumulative: np.ndarray  # (V,) running sum: cumulative[r] = probs[0] + ... + probs[r]


def sorted_distribution(probs: np.ndarray) -> SortedDistribution:
    """Rank a probability vector (V,): what top-p reads, from the top token down."""
    p = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-p, kind="stable")  # stable: equal probabilities keep id order
    ranked = p[order]
    return SortedDistribution(order=order, probs=ranked, cumulative=np.cumsum(ranked))


@dataclass(frozen=True)
class DrawSegments:
    """The cumulative bar [0, 1) that inverse-CDF sampling walks, in token-id order.

    Tokens with at least `min_width` probability get a segment of their own; each run of
    smaller ones between them is merged into one segment (token -1) so the bar stays drawable.
    """

    starts: np.ndarray  # (S,) left edge of each segment
    widths: np.ndarray  # (S,) its probability mass
    tokens: np.ndarray  # (S,) the token id, or -1 for a merged run of small tokens
    counts: np.ndarray  # (S,) how many tokens the segment holds


def draw_segments(probs: np.ndarray, min_width: float = 0.005) -> DrawSegments:
    """Segments of the cumulative bar used by `decoding.pick_token` (zero-probability tokens
    take no room and are left out)."""
    p = np.asarray(probs, dtype=np.float64)
    ids = np.flatnonzero(p > 0)  # (m,) in id order, as pick_token lays them out
    starts, widths, tokens, counts = [], [], [], []
    edge = 0.0
    for i in ids:
        big = p[i] >= min_width
        if not big and tokens and tokens[-1] == -1:  # extend the current run of small tokens
            widths[-1] += p[i]
            counts[-1] += 1
        else:
            starts.append(edge)
            widths.append(p[i])
            tokens.append(int(i) if big else -1)
            counts.append(1)
        edge += p[i]
    return DrawSegments(np.array(starts), np.array(widths), np.array(tokens, dtype=np.int64),
                        np.array(counts, dtype=np.int64))


@dataclass(frozen=True)
class BeamNode:
    """One candidate of a beam-search step, placed for drawing the beam tree."""

    step: int  # 0 = the first new token
    rank: int  # 0 = best of the 2 * num_beams candidates kept at that step
    token: int
    score: float  # summed log-probability of the generated tokens so far
    status: str  # "running" | "finished" | "finished_discarded" | "dropped"
    parent: int  # index of the parent node in the list, -1 for the prompt
    tokens: tuple[int, ...]  # the generated tokens up to and including this one
    final_score: float | None  # score / length**length_penalty, for finished ones
    on_winning_path: bool  # the returned hypothesis passes through this node


def beam_tree(history: list, winner: list[int] | None = None) -> list[BeamNode]:
    """The beam-search history (decoding.BeamStep list) as a flat list of tree nodes.

    A candidate's parent is the running beam of the previous step in the slot it extends.
    """
    winner_t = tuple(int(t) for t in winner) if winner is not None else None
    nodes: list[BeamNode] = []
    slot_node: dict[int, int] = {}  # running slot of the previous step -> node index
    for step, record in enumerate(history):
        next_slots: dict[int, int] = {}
        for c in record.candidates:
            parent = slot_node.get(c.parent, -1) if step else -1
            prefix = nodes[parent].tokens if parent >= 0 else ()
            tokens = (*prefix, int(c.token))
            on_path = (winner_t is not None and c.status in ("running", "finished")
                       and winner_t[: len(tokens)] == tokens)
            nodes.append(BeamNode(step, c.rank, int(c.token), float(c.score), c.status, parent,
                                  tokens, c.final_score, on_path))
            if c.status == "running":
                next_slots[c.slot] = len(nodes) - 1
        slot_node = next_slots
    return nodes
