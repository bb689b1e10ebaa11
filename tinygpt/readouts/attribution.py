"""Why did the model say that? One token's logit as an exact sum of parts.

The residual stream at a position is nothing but a sum: what the token embedding, the
position embedding, every attention head, every projection bias and every feed-forward
layer wrote into it. The logit of a token is read from that sum by the final LayerNorm and
the output layer:

    x      = sum of the parts                                     (C,)
    logit  = ((x - mean(x)) / std * gamma + beta) . W_out[:, token] + b_out[token]

Once the position's standard deviation `std` is fixed (we take the one the model computed),
this is linear in x: subtracting the mean is linear too. So each part gets its own share,

    share(part) = ((part - mean(part)) / std * gamma) . W_out[:, token]

and the shares, plus beta . W_out[:, token] ("final LayerNorm shift") and b_out[token]
("output bias"), add up to the logit the model computed: exactly, up to float rounding.

A final RMSNorm (Llama, Qwen2) is linearised the same way: x / rms * gamma with the rms
frozen at the one the model computed; it subtracts no mean and has no beta, so a part's share
is (part / rms * gamma) . W_out[:, token]. Rotary models have no position embedding part
(positions act inside attention), and a bias a model does not have is no part.

Shapes: T tokens, C = embedding_dim, H heads, hs = C / H head size, V = vocab_size, P parts.
Cost: one traced forward (none if you pass the trace you already have) plus O(L * C^2) to
send each head through its slice of W_proj: less than the forward of a single token.
The plain model only (no Interventions): the trace is `model.run_with_trace(ids)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.fast.attention import trace_heads_at
from tinygpt.fast.feed_forward import trace_neurons_at
from tinygpt.network.model import GPT, Trace


@dataclass(frozen=True)
class Attribution:
    """A logit (or a difference of two logits) split into parts that add up to it.

    names[i] says what part i is in words ("block 3 head 1"); keys[i] says it for programs:
    ("token_embedding",), ("position_embedding",), ("head", layer, head),
    ("attention_bias", layer), ("feed_forward", layer), ("final_layernorm_shift",),
    ("output_bias",). values.sum() == total (within float rounding).
    """

    names: list[str]
    keys: list[tuple]
    values: np.ndarray  # (P,) float64, each part's share of the logit
    total: float  # the logit the model computed (or logit[token] - logit[versus])
    position: int  # the position whose next-token prediction is explained
    token: int
    versus: int | None = None  # set for a difference: why `token` rather than `versus`

    def largest(self, k: int) -> np.ndarray:
        """Indices of the k parts with the biggest effect (largest |value|), biggest first."""
        order = np.argsort(-np.abs(self.values), kind="stable")
        return order[: max(0, int(k))]


@dataclass(frozen=True)
class NeuronEffects:
    """The feed-forward neurons of one block at one position, and their direct effects.

    effects[j] = activations[j] * (W2[j] through the final LayerNorm and W_out[:, token]):
    neuron j's share of the logit. effects.sum() + bias_effect == total, which is the
    block's "feed-forward" part in `logit_attribution`.
    """

    layer: int
    position: int
    token: int
    activations: np.ndarray  # (4C,) after GELU
    effects: np.ndarray  # (4C,) float64, each neuron's share of the logit
    bias_effect: float  # b2's share
    total: float  # effects.sum() + bias_effect

    def largest(self, k: int) -> np.ndarray:
        """Indices of the k neurons with the biggest effect (largest |effect|), biggest first."""
        order = np.argsort(-np.abs(self.effects), kind="stable")
        return order[: max(0, int(k))]


# ----------------------------------------------------------------------------- checks


def check_prompt(model: GPT, ids) -> np.ndarray:
    """ids as a (T,) int64 array, or a ValueError that says what is wrong with them."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(f"ids must be a non-empty sequence of token ids (T,), got {ids.shape}")
    if ids.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers, got dtype {ids.dtype}")
    V, n_ctx = model.config.vocab_size, model.config.n_ctx
    if len(ids) > n_ctx:
        raise ValueError(f"{len(ids)} tokens is more than the model's context of {n_ctx}")
    if ids.min() < 0 or ids.max() >= V:
        raise ValueError(f"token ids must be in 0 .. {V - 1} (the vocabulary)")
    return ids.astype(np.int64, copy=False)


def _traced_at(model: GPT, ids, position, trace: Trace | None) -> tuple[Trace, int]:
    """The trace of `ids` (the one given, checked to be of these tokens, or a new forward)
    and `position` checked to be one of its positions."""
    ids = check_prompt(model, ids)
    if trace is None:
        _, trace = model.run_with_trace(ids)
    elif not np.array_equal(trace["tokens"], ids):
        raise ValueError("the trace given is not the trace of these ids")
    return trace, check_index(position, len(ids), "position", "the prompt")


def check_index(value, size: int, name: str, among: str) -> int:
    """value as an int in 0 .. size-1, or a ValueError naming what it counts ("position")."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must be in 0 .. {size - 1} ({among}), got {value}")
    return int(value)


def check_token(model: GPT, token) -> int:
    """token as an int id in 0 .. V-1, or a ValueError."""
    return check_index(token, model.config.vocab_size, "token id", "the vocabulary")


# ----------------------------------------------------------------------------- the parts


def residual_parts(model: GPT, trace: Trace, position: int) -> tuple[list, list, np.ndarray]:
    """What each component wrote into the residual stream at `position`.

    Returns (names, keys, writes) with writes (P, C) float64; the rows add up to the input
    of the final LayerNorm, trace["ln_f.input"][position]. Attention block i writes
    sum_h heads[h] @ W_proj[h*hs:(h+1)*hs] + b_proj: one row per head, one for the bias.
    """
    cfg = model.config
    H, hs, C = cfg.n_head, cfg.head_size, cfg.embedding_dim
    names, keys = ["token embedding"], [("token_embedding",)]
    rows = [trace["embed.token"][position]]  # (C,)
    if model.embedding.position_embeddings is not None:  # rotary models have no table
        names.append("position embedding")
        keys.append(("position_embedding",))
        rows.append(trace["embed.position"][position])
    for i, block in enumerate(model.blocks):
        heads = trace_heads_at(trace, i, position).astype(np.float64)  # (H, hs)
        W_proj = block.attn.W_proj.astype(np.float64, copy=False).reshape(H, hs, C)  # head h's rows
        rows.extend((heads[:, None, :] @ W_proj)[:, 0])  # H x (C,), each head's write
        names += [f"block {i} head {h}" for h in range(H)]
        keys += [("head", i, h) for h in range(H)]
        if block.attn.b_proj is not None:
            rows.append(block.attn.b_proj)
            names.append(f"block {i} attention bias")
            keys.append(("attention_bias", i))
        rows.append(trace[f"blocks.{i}.ffn.output"][position])  # includes its output bias
        names.append(f"block {i} feed-forward")
        keys.append(("feed_forward", i))
    return names, keys, np.stack(rows).astype(np.float64)  # (P, C)


def final_scale(model: GPT, trace: Trace, position: int) -> tuple[np.float64, bool]:
    """What the final norm divided the residual by at `position`, as the model computed it,
    and whether it subtracted the mean first: LayerNorm's std (True), RMSNorm's rms (False)."""
    if model.config.norm == "rmsnorm":
        return np.float64(trace["ln_f.rms"][position]), False
    return np.sqrt(np.float64(trace["ln_f.var"][position]) + model.ln_f.eps), True


def final_norm(model: GPT, trace: Trace, position: int, v: np.ndarray) -> np.ndarray:
    """The final norm with its scale frozen, without its shift: linear in v (C,)."""
    scale, centred = final_scale(model, trace, position)
    return ((v - v.mean()) if centred else v) / scale * model.ln_f.gamma


def readout_direction(model: GPT, trace: Trace, position: int, w: np.ndarray) -> np.ndarray:
    """u (C,) with  part . u == final_norm(part) . w  for every part.

    The scale (LayerNorm's std, RMSNorm's rms) is the one the model computed at `position`.
    (v - mean(v)) . a == v . (a - mean(a)), so LayerNorm's centering moves onto the direction.
    """
    scale, centred = final_scale(model, trace, position)
    u = model.ln_f.gamma.astype(np.float64) * w / scale  # (C,)
    return u - u.mean() if centred else u


def _output_column(model: GPT, token: int) -> tuple[np.ndarray, float]:
    """W_out[:, token] (C,) as float64, and b_out[token] (0 when there is no b_out)."""
    w = model.output.W_out[:, token].astype(np.float64)
    b_out = model.output.b_out
    return w, (0.0 if b_out is None else float(b_out[token]))


def _attribute(model, trace, position, w, bias, token, versus, total) -> Attribution:
    """Shares of each residual part along `w`, plus the final LayerNorm shift and b_out."""
    names, keys, writes = residual_parts(model, trace, position)  # (P, C)
    u = readout_direction(model, trace, position, w)  # (C,)
    values = list(writes @ u)  # (P,)
    if model.ln_f.beta is not None:  # RMSNorm has no shift
        names.append("final LayerNorm shift")
        keys.append(("final_layernorm_shift",))
        values.append(float(model.ln_f.beta.astype(np.float64) @ w))
    if model.output.b_out is not None:
        names.append("output bias")
        keys.append(("output_bias",))
        values.append(bias)
    return Attribution(names, keys, np.array(values), total, position, token, versus)


# ----------------------------------------------------------------------------- public


def logit_attribution(
    model: GPT, ids, position: int, token: int, *, trace: Trace | None = None
) -> Attribution:
    """The logit of `token` at `position` (ids (T,)) as an exact sum of parts.

    Parts, in order: token embedding, position embedding; for each block, each head (its
    output through its slice of W_proj), the attention bias b_proj, the feed-forward output
    (b2 included); the final LayerNorm shift (beta); the output bias b_out if the model has
    one. values.sum() == total == logits[position, token]. Pass `trace` (from
    model.run_with_trace(ids)) to reuse a forward you already ran.
    """
    trace, position = _traced_at(model, ids, position, trace)
    token = check_token(model, token)
    w, bias = _output_column(model, token)
    total = float(trace["logits"][position, token])
    return _attribute(model, trace, position, w, bias, token, None, total)


def logit_difference_attribution(
    model: GPT, ids, position: int, token_a: int, token_b: int, *, trace: Trace | None = None
) -> Attribution:
    """logit[token_a] - logit[token_b] at `position` as an exact sum of the same parts.

    "Why 'he' rather than 'she'?": each part's share is its share of token_a's logit minus
    its share of token_b's (everything is linear once the LayerNorm's std is fixed).
    """
    trace, position = _traced_at(model, ids, position, trace)
    token_a, token_b = check_token(model, token_a), check_token(model, token_b)
    w_a, bias_a = _output_column(model, token_a)
    w_b, bias_b = _output_column(model, token_b)
    logits = trace["logits"][position]
    total = float(logits[token_a]) - float(logits[token_b])
    return _attribute(model, trace, position, w_a - w_b, bias_a - bias_b, token_a, token_b, total)


def neuron_effects(
    model: GPT, ids, position: int, layer: int, token: int, *, trace: Trace | None = None
) -> NeuronEffects:
    """The FFN neurons of block `layer` at `position`, and each one's direct effect on the logit.

    The block's feed-forward output is post @ W2 + b2 = sum_j post[j] * W2[j] + b2, so
    neuron j's share of the logit is post[j] * (W2[j] . u), with u the final LayerNorm's
    reading direction (fixed std, centered, gamma, W_out[:, token]). Cost: O(4C * C).
    A SwiGLU neuron is one SiLU(gate) * up product; W_down plays W2's part.
    """
    trace, position = _traced_at(model, ids, position, trace)
    layer = check_index(layer, model.config.n_layer, "layer", "the blocks")
    token = check_token(model, token)
    ffn = model.blocks[layer].ffn
    w, _ = _output_column(model, token)
    u = readout_direction(model, trace, position, w)  # (C,)
    activations = trace_neurons_at(trace, layer, position)  # (4C,) as ffn.post holds them
    effects = activations.astype(np.float64) * (ffn.W_down.astype(np.float64) @ u)  # (4C,)
    bias_effect = 0.0 if ffn.b_down is None else float(ffn.b_down.astype(np.float64) @ u)
    total = float(effects.sum()) + bias_effect
    return NeuronEffects(layer, position, token, activations, effects, bias_effect, total)


def neuron_token_effects(
    model: GPT, ids, position: int, layer: int, neuron: int, *, trace: Trace | None = None
) -> np.ndarray:
    """Neuron `neuron`'s direct effect on every token's logit at `position`: (V,) float64.

    activation * (W2[neuron] through the final LayerNorm with this position's std) @ W_out:
    the tokens its output pushes up (positive) and down (negative). Cost: O(C * V).
    """
    trace, position = _traced_at(model, ids, position, trace)
    layer = check_index(layer, model.config.n_layer, "layer", "the blocks")
    W2 = model.blocks[layer].ffn.W_down  # (I, C): row n is what neuron n writes
    neuron = check_index(neuron, W2.shape[0], "neuron", "the feed-forward's 4C")
    activation = float(trace_neurons_at(trace, layer, position)[neuron])
    write = activation * W2[neuron].astype(np.float64)  # (C,) what it adds to the residual
    normalized = final_norm(model, trace, position, write)  # (C,)
    W_out = model.output.W_out  # (C, V); kept in its dtype: a float64 copy would be C * V
    return (normalized.astype(W_out.dtype) @ W_out).astype(np.float64)  # (V,)
