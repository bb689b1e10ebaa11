"""A GPT-2-style transformer in NumPy, written to be read next to the math.

    ids -> EmbeddingLayer (token + position) -> n_layer x TransformerBlock
        -> final LayerNorm -> OutputLayer -> logits (one row per position)

Each TransformerBlock is pre-LayerNorm:
    x = x + Attention(LayerNorm1(x))
    x = x + FeedForward(LayerNorm2(x))

Shapes in comments: B batch, T tokens, C = n_embd (embedding_dim), H heads,
hs = C / H (head size), V = vocab_size.

Every layer has `forward` and, right beside it, the `backward` that training uses.
A forward keeps what its backward needs only when asked (`keep_cache=True`), so
inference never writes to the model and one model can serve many users at once.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

Trace = dict[str, np.ndarray]


# ----------------------------------------------------------------------------- config


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 4096
    n_ctx: int = 256  # the longest sequence the model can read (number of positions)
    n_embd: int = 256  # embedding_dim, C
    n_head: int = 8
    n_layer: int = 4
    tie_weights: bool = True  # W_out is the token embedding matrix, transposed
    output_bias: bool = False  # whether the output layer has b_out
    layer_norm_eps: float = 1e-5
    activation: str = "gelu_tanh"  # "gelu_tanh" (GPT-2) or "gelu" (exact, with erf)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_ctx", "n_embd", "n_head", "n_layer"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})"
            )
        if self.activation not in ("gelu_tanh", "gelu"):
            raise ValueError(f"activation must be 'gelu_tanh' or 'gelu', got {self.activation!r}")
        if not (self.layer_norm_eps > 0):
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")

    @property
    def head_size(self) -> int:
        return self.n_embd // self.n_head

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> GPTConfig:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown GPTConfig fields: {sorted(unknown)}")
        return cls(**d)


@dataclass(frozen=True)
class Interventions:
    """'What if' switches. All off by default; the trace shows the intervened computation.

    Interventions are for inference only: training always runs the plain model.
    """

    zero_heads: frozenset = field(default_factory=frozenset)  # {(layer, head), ...}
    skip_attn: frozenset = field(default_factory=frozenset)  # {layer, ...}
    skip_ffn: frozenset = field(default_factory=frozenset)  # {layer, ...}
    no_layernorm: bool = False  # every LayerNorm (ln1, ln2, final) becomes the identity
    no_position: bool = False  # drop the position embeddings
    no_causal_mask: bool = False  # let every token look at future tokens too
    no_residual: bool = False  # x = sublayer(x) instead of x = x + sublayer(x)

    @property
    def active(self) -> bool:
        return self != Interventions()


NO_INTERVENTIONS = Interventions()


# ----------------------------------------------------------------------------- functions


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax: subtracting the row max changes nothing but avoids overflow."""
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0)  # a row of all -inf stays all zero, not NaN
    e = np.exp(x - x_max)
    return e / np.sum(e, axis=axis, keepdims=True)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x: np.ndarray, approximate: bool = True) -> np.ndarray:
    """GELU(x) = x * Phi(x). GPT-2 uses the tanh approximation."""
    if approximate:
        # x * x * x, not x**3: NumPy's power is ~300x slower, and PyTorch also multiplies
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))).astype(x.dtype)


def gelu_grad(x: np.ndarray, approximate: bool = True) -> np.ndarray:
    """d GELU(x) / dx."""
    if approximate:
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
        t = np.tanh(inner)
        d_inner = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x**2)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * d_inner
    cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))
    pdf = np.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi)
    return (cdf + x * pdf).astype(x.dtype)


def cross_entropy(
    logits: np.ndarray, targets: np.ndarray, ignore_index: int = -1
) -> tuple[float, np.ndarray]:
    """Mean negative log-likelihood of the targets, and its gradient w.r.t. the logits.

    logits (B, T, V), targets (B, T); positions whose target is `ignore_index` do not count.
    """
    B, T, V = logits.shape
    flat = logits.reshape(-1, V)  # (N, V)
    tgt = targets.reshape(-1)  # (N,)
    keep = tgt != ignore_index
    n = max(int(keep.sum()), 1)
    safe_tgt = np.where(keep, tgt, 0)
    shifted = flat - flat.max(axis=-1, keepdims=True)
    log_z = np.log(np.exp(shifted).sum(axis=-1))  # (N,)
    logp_target = shifted[np.arange(len(tgt)), safe_tgt] - log_z
    loss = -float(np.sum(logp_target * keep)) / n
    # d loss / d logits = (softmax - onehot) / n, zero on ignored positions
    dlogits = np.exp(shifted - log_z[:, None])
    dlogits[np.arange(len(tgt)), safe_tgt] -= 1.0
    dlogits *= (keep / n)[:, None].astype(dlogits.dtype)
    return loss, dlogits.reshape(B, T, V)


def init_normal(rng: np.random.Generator | None, shape: tuple, std: float, dtype) -> np.ndarray:
    """Weights drawn from N(0, std^2); zeros when rng is None (weights about to be loaded)."""
    if rng is None:
        return np.zeros(shape, dtype=dtype)  # lazily allocated by the OS: costs nothing
    return (rng.standard_normal(shape) * std).astype(dtype)


def _record(trace: Trace | None, name: str, value: np.ndarray) -> None:
    if trace is not None:
        trace[name] = value


# ----------------------------------------------------------------------------- layers


class EmbeddingLayer:
    """Token embedding + learned position embedding: x[t] = E[ids[t]] + P[t]."""

    def __init__(self, vocab_size: int, n_ctx: int, embedding_dim: int, rng, dtype) -> None:
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.embeddings = init_normal(rng, (vocab_size, embedding_dim), 0.02, dtype)
        self.position_embeddings = init_normal(rng, (n_ctx, embedding_dim), 0.01, dtype)
        self.cache = None

    def forward(
        self,
        ids: np.ndarray,
        start: int = 0,
        trace: Trace | None = None,
        no_position: bool = False,
        keep_cache: bool = False,
    ) -> np.ndarray:
        T = ids.shape[1]
        tok = self.embeddings[ids]  # (B, T, C)
        pos = self.position_embeddings[start : start + T]  # (T, C)
        if no_position:
            pos = np.zeros_like(pos)
        x = tok + pos  # (B, T, C)
        _record(trace, "embed.token", tok)
        _record(trace, "embed.position", np.broadcast_to(pos, tok.shape))
        _record(trace, "embed.sum", x)
        if keep_cache:
            self.cache = ids
        return x

    def backward(self, dx: np.ndarray) -> dict[str, np.ndarray]:
        ids = self.cache
        T = ids.shape[1]
        d_emb = np.zeros_like(self.embeddings)
        np.add.at(d_emb, ids.reshape(-1), dx.reshape(-1, dx.shape[-1]))
        d_pos = np.zeros_like(self.position_embeddings)
        d_pos[:T] = dx.sum(axis=0)
        return {"embeddings": d_emb, "position_embeddings": d_pos}


class LayerNorm:
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, over the last axis (each token alone)."""

    def __init__(self, dim: int, eps: float, dtype) -> None:
        self.eps = eps
        self.gamma = np.ones(dim, dtype=dtype)  # scale starts at 1
        self.beta = np.zeros(dim, dtype=dtype)  # shift starts at 0
        self.cache = None

    def forward(
        self,
        x: np.ndarray,
        trace: Trace | None = None,
        name: str = "ln",
        identity: bool = False,
        keep_cache: bool = False,
    ) -> np.ndarray:
        mean = x.mean(axis=-1, keepdims=True)  # (B, T, 1)
        var = x.var(axis=-1, keepdims=True)  # (B, T, 1), biased like GPT-2
        rstd = 1.0 / np.sqrt(var + self.eps)
        x_hat = (x - mean) * rstd  # (B, T, C) mean 0, variance 1
        y = x if identity else x_hat * self.gamma + self.beta
        if trace is not None:
            trace[f"{name}.input"] = x
            trace[f"{name}.mean"] = mean[..., 0]
            trace[f"{name}.var"] = var[..., 0]
            trace[f"{name}.normalized"] = x_hat
            trace[f"{name}.output"] = y
        if keep_cache:
            self.cache = (x_hat, rstd)
        return y

    def backward(self, dy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        x_hat, rstd = self.cache
        C = x_hat.shape[-1]
        grads = {
            "gamma": (dy * x_hat).reshape(-1, C).sum(axis=0),
            "beta": dy.reshape(-1, C).sum(axis=0),
        }
        dx_hat = dy * self.gamma
        dx = rstd * (
            dx_hat
            - dx_hat.mean(axis=-1, keepdims=True)
            - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True)
        )
        return dx, grads


class Attention:
    """Causal multi-head self-attention. With n_head = 1 it is the seeds' single-head attention.

    W_qkv holds W_q, W_k and W_v side by side (as GPT-2 stores them); `W_q`, `W_k`, `W_v`
    are views into it.
    """

    def __init__(self, n_embd: int, n_head: int, n_layer: int, rng, dtype) -> None:
        self.n_head = n_head
        self.head_size = n_embd // n_head
        C = n_embd
        self.W_qkv = init_normal(rng, (C, 3 * C), 0.02, dtype)
        self.b_qkv = np.zeros(3 * C, dtype=dtype)
        # GPT-2 scales the projections that write into the residual by 1/sqrt(2 * n_layer)
        self.W_proj = init_normal(rng, (C, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b_proj = np.zeros(C, dtype=dtype)
        self.cache = None

    @property
    def W_q(self) -> np.ndarray:
        return self.W_qkv[:, : self.n_head * self.head_size]

    @property
    def W_k(self) -> np.ndarray:
        C = self.n_head * self.head_size
        return self.W_qkv[:, C : 2 * C]

    @property
    def W_v(self) -> np.ndarray:
        C = self.n_head * self.head_size
        return self.W_qkv[:, 2 * C :]

    def _split_heads(self, x: np.ndarray) -> np.ndarray:
        B, T, C = x.shape
        return x.reshape(B, T, self.n_head, self.head_size).transpose(0, 2, 1, 3)  # (B,H,T,hs)

    def forward(
        self,
        x: np.ndarray,
        trace: Trace | None = None,
        name: str = "attn",
        causal: bool = True,
        zero_heads: tuple[int, ...] = (),
        kv: tuple[np.ndarray, np.ndarray, int] | None = None,
        keep_cache: bool = False,
    ) -> np.ndarray:
        B, T, C = x.shape
        qkv = x @ self.W_qkv + self.b_qkv  # (B, T, 3C)
        q, k, v = np.split(qkv, 3, axis=-1)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)  # (B,H,T,hs)
        start = 0
        if kv is not None:  # append this step's keys and values to the cache
            k_buf, v_buf, start = kv
            k_buf[:, :, start : start + T] = k
            v_buf[:, :, start : start + T] = v
            k, v = k_buf[:, :, : start + T], v_buf[:, :, : start + T]
        T_k = k.shape[2]

        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(self.head_size)  # (B, H, T, T_k)
        if causal:
            # query at absolute position start+i may look at keys 0 .. start+i
            future = np.arange(T_k)[None, :] > (start + np.arange(T))[:, None]  # (T, T_k)
            masked = np.where(future, -np.inf, scores).astype(scores.dtype)
        else:
            masked = scores
        weights = softmax(masked, axis=-1)  # (B, H, T, T_k), each row sums to 1
        heads = weights @ v  # (B, H, T, hs)
        if zero_heads:
            heads = heads.copy()
            heads[:, list(zero_heads)] = 0.0
        y = heads.transpose(0, 2, 1, 3).reshape(B, T, C)  # heads side by side
        out = y @ self.W_proj + self.b_proj  # (B, T, C)

        if trace is not None:
            trace[f"{name}.q"], trace[f"{name}.k"], trace[f"{name}.v"] = q, k, v
            trace[f"{name}.scores"] = scores
            trace[f"{name}.scores_masked"] = masked
            trace[f"{name}.weights"] = weights
            trace[f"{name}.heads"] = heads
            trace[f"{name}.output"] = out
        if keep_cache:
            self.cache = (x, q, k, v, weights, y)
        return out

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        x, q, k, v, weights, y = self.cache
        B, T, C = x.shape
        grads = {
            "W_proj": y.reshape(-1, C).T @ dout.reshape(-1, C),
            "b_proj": dout.reshape(-1, C).sum(axis=0),
        }
        dy = dout @ self.W_proj.T  # (B, T, C)
        dheads = self._split_heads(dy)  # (B, H, T, hs)
        dweights = dheads @ v.transpose(0, 1, 3, 2)  # (B, H, T, T)
        dv = weights.transpose(0, 1, 3, 2) @ dheads  # (B, H, T, hs)
        # softmax backward; masked entries have weight 0 and so get no gradient
        dscores = weights * (dweights - (dweights * weights).sum(axis=-1, keepdims=True))
        dscores /= math.sqrt(self.head_size)
        dq = dscores @ k  # (B, H, T, hs)
        dk = dscores.transpose(0, 1, 3, 2) @ q  # (B, H, T, hs)

        def merge(t: np.ndarray) -> np.ndarray:
            return t.transpose(0, 2, 1, 3).reshape(B, T, C)

        dqkv = np.concatenate([merge(dq), merge(dk), merge(dv)], axis=-1)  # (B, T, 3C)
        grads["W_qkv"] = x.reshape(-1, C).T @ dqkv.reshape(-1, 3 * C)
        grads["b_qkv"] = dqkv.reshape(-1, 3 * C).sum(axis=0)
        dx = dqkv @ self.W_qkv.T
        return dx, grads


class FeedForward:
    """Position-wise MLP: C -> 4C -> GELU -> C, the same for every token."""

    def __init__(self, n_embd: int, n_layer: int, activation: str, rng, dtype) -> None:
        C = n_embd
        self.approximate = activation == "gelu_tanh"
        self.W1 = init_normal(rng, (C, 4 * C), 0.02, dtype)
        self.b1 = np.zeros(4 * C, dtype=dtype)
        self.W2 = init_normal(rng, (4 * C, C), 0.02 / math.sqrt(2 * n_layer), dtype)
        self.b2 = np.zeros(C, dtype=dtype)
        self.cache = None

    def forward(
        self,
        x: np.ndarray,
        trace: Trace | None = None,
        name: str = "ffn",
        keep_cache: bool = False,
    ) -> np.ndarray:
        pre = x @ self.W1 + self.b1  # (B, T, 4C)
        post = gelu(pre, self.approximate)  # (B, T, 4C)
        out = post @ self.W2 + self.b2  # (B, T, C)
        if trace is not None:
            trace[f"{name}.pre"], trace[f"{name}.post"], trace[f"{name}.output"] = pre, post, out
        if keep_cache:
            self.cache = (x, pre, post)
        return out

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        x, pre, post = self.cache
        C = x.shape[-1]
        grads = {
            "W2": post.reshape(-1, 4 * C).T @ dout.reshape(-1, C),
            "b2": dout.reshape(-1, C).sum(axis=0),
        }
        dpre = (dout @ self.W2.T) * gelu_grad(pre, self.approximate)  # (B, T, 4C)
        grads["W1"] = x.reshape(-1, C).T @ dpre.reshape(-1, 4 * C)
        grads["b1"] = dpre.reshape(-1, 4 * C).sum(axis=0)
        return dpre @ self.W1.T, grads


class TransformerBlock:
    """Pre-LayerNorm block: x = x + Attention(LN1(x)); x = x + FeedForward(LN2(x))."""

    def __init__(self, config: GPTConfig, rng, dtype) -> None:
        C = config.n_embd
        self.ln1 = LayerNorm(C, config.layer_norm_eps, dtype)
        self.attn = Attention(C, config.n_head, config.n_layer, rng, dtype)
        self.ln2 = LayerNorm(C, config.layer_norm_eps, dtype)
        self.ffn = FeedForward(C, config.n_layer, config.activation, rng, dtype)

    def forward(
        self,
        x: np.ndarray,
        index: int,
        trace: Trace | None = None,
        interventions: Interventions = NO_INTERVENTIONS,
        kv: tuple[np.ndarray, np.ndarray, int] | None = None,
        keep_cache: bool = False,
    ) -> np.ndarray:
        iv = interventions
        name = f"blocks.{index}"
        h = self.ln1.forward(x, trace, f"{name}.ln1", iv.no_layernorm, keep_cache)
        zero = tuple(head for (layer, head) in iv.zero_heads if layer == index)
        a = self.attn.forward(h, trace, f"{name}.attn", not iv.no_causal_mask, zero, kv, keep_cache)
        if index in iv.skip_attn:
            a = np.zeros_like(a)
            _record(trace, f"{name}.attn.output", a)
        x = a if iv.no_residual else x + a  # (B, T, C)
        _record(trace, f"{name}.resid_attn", x)

        h = self.ln2.forward(x, trace, f"{name}.ln2", iv.no_layernorm, keep_cache)
        f = self.ffn.forward(h, trace, f"{name}.ffn", keep_cache)
        if index in iv.skip_ffn:
            f = np.zeros_like(f)
            _record(trace, f"{name}.ffn.output", f)
        x = f if iv.no_residual else x + f  # (B, T, C)
        _record(trace, f"{name}.resid_ffn", x)
        return x

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        grads: dict[str, np.ndarray] = {}
        # x_out = x_mid + ffn(ln2(x_mid)): the residual passes dout straight through
        dh, g = self.ffn.backward(dout)
        grads.update({f"ffn.{k}": v for k, v in g.items()})
        dx_ln2, g = self.ln2.backward(dh)
        grads.update({f"ln2.{k}": v for k, v in g.items()})
        d_mid = dout + dx_ln2
        # x_mid = x + attn(ln1(x))
        dh, g = self.attn.backward(d_mid)
        grads.update({f"attn.{k}": v for k, v in g.items()})
        dx_ln1, g = self.ln1.backward(dh)
        grads.update({f"ln1.{k}": v for k, v in g.items()})
        return d_mid + dx_ln1, grads


class OutputLayer:
    """logits = h @ W_out + b_out: one score per vocabulary token for every position.

    With weight tying, W_out *is* the token embedding matrix transposed (a view, same memory),
    so logit_i = h . E[i]: how well the hidden state lines up with token i's embedding.
    """

    def __init__(
        self, embedding_layer: EmbeddingLayer, tie_weights: bool, output_bias: bool, rng, dtype
    ) -> None:
        self.embedding_layer = embedding_layer
        self.embedding_dim = embedding_layer.embedding_dim
        self.vocab_size = embedding_layer.vocab_size
        self.tied = tie_weights
        if not tie_weights:
            self._W_out = init_normal(rng, (self.embedding_dim, self.vocab_size), 0.02, dtype)
        self.b_out = np.zeros(self.vocab_size, dtype=dtype) if output_bias else None
        self.cache = None

    @property
    def W_out(self) -> np.ndarray:
        """(embedding_dim, vocab_size)."""
        return self.embedding_layer.embeddings.T if self.tied else self._W_out

    @W_out.setter
    def W_out(self, value: np.ndarray) -> None:
        if self.tied:
            raise AttributeError("W_out is tied to the embedding matrix; set that instead")
        self._W_out = value

    def forward(self, h: np.ndarray, keep_cache: bool = False) -> np.ndarray:
        logits = h @ self.W_out  # (B, T, V)
        if self.b_out is not None:
            logits = logits + self.b_out
        if keep_cache:
            self.cache = h
        return logits

    def backward(self, dlogits: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        h = self.cache
        C, V = self.embedding_dim, self.vocab_size
        grads = {"W_out": h.reshape(-1, C).T @ dlogits.reshape(-1, V)}  # (C, V)
        if self.b_out is not None:
            grads["b_out"] = dlogits.reshape(-1, V).sum(axis=0)
        return dlogits @ self.W_out.T, grads


# ----------------------------------------------------------------------------- KV cache


class KVCache:
    """Keys and values of the positions already processed, so each new token costs one step.

    Buffers are allocated once at full context length: (B, H, n_ctx, hs) per layer.
    """

    def __init__(self, config: GPTConfig, batch_size: int, dtype) -> None:
        shape = (batch_size, config.n_head, config.n_ctx, config.head_size)
        self.keys = [np.zeros(shape, dtype=dtype) for _ in range(config.n_layer)]
        self.values = [np.zeros(shape, dtype=dtype) for _ in range(config.n_layer)]
        self.length = 0

    @property
    def batch_size(self) -> int:
        return self.keys[0].shape[0]

    def reorder(self, indices: np.ndarray) -> None:
        """Keep/duplicate batch rows (beam search picks which hypotheses continue)."""
        indices = np.asarray(indices)
        if len(indices) != self.batch_size:  # a new batch size: new buffers
            self.keys = [k[indices] for k in self.keys]
            self.values = [v[indices] for v in self.values]
            return
        if np.array_equal(indices, np.arange(self.batch_size)):
            return  # every row stays where it is
        # same batch size: copy only the filled positions, in place
        filled = slice(0, self.length)
        for buffers in (self.keys, self.values):
            for buffer in buffers:
                buffer[:, :, filled] = buffer[indices, :, filled]


# ----------------------------------------------------------------------------- the model


class GPT:
    def __init__(
        self, config: GPTConfig, seed: int | None = 0, dtype=np.float32, init: bool = True
    ) -> None:
        """A model with random weights from `seed`, or zeros with init=False (to load into)."""
        self.config = config
        self.dtype = np.dtype(dtype)
        rng = np.random.default_rng(seed) if init else None
        self.embedding = EmbeddingLayer(
            config.vocab_size, config.n_ctx, config.n_embd, rng, self.dtype
        )
        self.blocks = [TransformerBlock(config, rng, self.dtype) for _ in range(config.n_layer)]
        self.ln_f = LayerNorm(config.n_embd, config.layer_norm_eps, self.dtype)
        self.output = OutputLayer(
            self.embedding, config.tie_weights, config.output_bias, rng, self.dtype
        )

    # ---- parameters

    def parameters(self) -> dict[str, np.ndarray]:
        """Every learnable array by name (the live arrays). A tied W_out is not listed twice."""
        params = {
            "embedding.embeddings": self.embedding.embeddings,
            "embedding.position_embeddings": self.embedding.position_embeddings,
        }
        for i, b in enumerate(self.blocks):
            p = f"blocks.{i}"
            params.update(
                {
                    f"{p}.ln1.gamma": b.ln1.gamma,
                    f"{p}.ln1.beta": b.ln1.beta,
                    f"{p}.attn.W_qkv": b.attn.W_qkv,
                    f"{p}.attn.b_qkv": b.attn.b_qkv,
                    f"{p}.attn.W_proj": b.attn.W_proj,
                    f"{p}.attn.b_proj": b.attn.b_proj,
                    f"{p}.ln2.gamma": b.ln2.gamma,
                    f"{p}.ln2.beta": b.ln2.beta,
                    f"{p}.ffn.W1": b.ffn.W1,
                    f"{p}.ffn.b1": b.ffn.b1,
                    f"{p}.ffn.W2": b.ffn.W2,
                    f"{p}.ffn.b2": b.ffn.b2,
                }
            )
        params["ln_f.gamma"] = self.ln_f.gamma
        params["ln_f.beta"] = self.ln_f.beta
        if not self.output.tied:
            params["output.W_out"] = self.output.W_out
        if self.output.b_out is not None:
            params["output.b_out"] = self.output.b_out
        return params

    def load_parameters(self, params: dict[str, np.ndarray]) -> None:
        """Replace every parameter by the array of the same name (shapes must match exactly)."""
        expected = self.parameters()
        missing, extra = set(expected) - set(params), set(params) - set(expected)
        if missing or extra:
            raise ValueError(
                f"parameter names do not match: missing {sorted(missing)[:5]}, "
                f"unexpected {sorted(extra)[:5]}"
            )
        for name, old in expected.items():
            new = np.asarray(params[name])
            if new.shape != old.shape:
                raise ValueError(f"{name}: expected shape {old.shape}, got {new.shape}")
            owner, attr = self._locate(name)
            setattr(owner, attr, new.astype(self.dtype, copy=False))

    def _locate(self, name: str):
        parts = name.split(".")
        obj = self
        if parts[0] == "blocks":
            obj = self.blocks[int(parts[1])]
            parts = parts[2:]
        for part in parts[:-1]:
            obj = getattr(obj, part)
        attr = parts[-1]
        return obj, ("_W_out" if attr == "W_out" else attr)

    def num_parameters(self) -> int:
        return int(sum(p.size for p in self.parameters().values()))

    def astype(self, dtype) -> GPT:
        """A copy of this model with every parameter in `dtype` (e.g. float64 for grad checks)."""
        copy = GPT(self.config, dtype=dtype, init=False)
        copy.load_parameters({k: v.astype(dtype) for k, v in self.parameters().items()})
        return copy

    # ---- forward

    def _check_ids(self, ids, start: int = 0) -> tuple[np.ndarray, bool]:
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            if ids.size == 0:
                ids = ids.astype(np.int64)
            else:
                raise ValueError(f"token ids must be integers, got dtype {ids.dtype}")
        if ids.ndim not in (1, 2):
            raise ValueError(f"token ids must have shape (T,) or (B, T), got {ids.shape}")
        single = ids.ndim == 1
        ids = ids[None, :] if single else ids
        T = ids.shape[1]
        if T == 0 or ids.shape[0] == 0:
            raise ValueError("empty input: need at least one token")
        if start + T > self.config.n_ctx:
            raise ValueError(
                f"{start + T} tokens is more than the model's context of {self.config.n_ctx}; "
                "truncate the input first"
            )
        bad = (ids < 0) | (ids >= self.config.vocab_size)
        if bad.any():
            raise ValueError(
                f"token id {int(ids[bad][0])} is outside the vocabulary "
                f"(0 .. {self.config.vocab_size - 1})"
            )
        return ids.astype(np.int64, copy=False), single

    def _forward(
        self,
        ids: np.ndarray,
        trace: Trace | None = None,
        interventions: Interventions = NO_INTERVENTIONS,
        cache: KVCache | None = None,
        keep_cache: bool = False,
    ) -> np.ndarray:
        start = cache.length if cache is not None else 0
        x = self.embedding.forward(ids, start, trace, interventions.no_position, keep_cache)
        for i, block in enumerate(self.blocks):
            kv = (cache.keys[i], cache.values[i], start) if cache is not None else None
            x = block.forward(x, i, trace, interventions, kv, keep_cache)  # (B, T, C)
        h = self.ln_f.forward(x, trace, "ln_f", interventions.no_layernorm, keep_cache)
        logits = self.output.forward(h, keep_cache)  # (B, T, V)
        _record(trace, "logits", logits)
        if cache is not None:
            cache.length = start + ids.shape[1]
        return logits

    def forward(self, ids, interventions: Interventions | None = None) -> np.ndarray:
        """ids (T,) or (B, T) -> logits (T, V) or (B, T, V): a next-token score row per position."""
        ids, single = self._check_ids(ids)
        logits = self._forward(ids, interventions=interventions or NO_INTERVENTIONS)
        return logits[0] if single else logits

    __call__ = forward

    def run_with_trace(
        self, ids, interventions: Interventions | None = None
    ) -> tuple[np.ndarray, Trace]:
        """Forward one sequence (T,) and record every intermediate tensor (names in the docs)."""
        ids, single = self._check_ids(ids)
        if not single:
            raise ValueError("run_with_trace takes one sequence of shape (T,)")
        trace: Trace = {"tokens": ids[0]}
        logits = self._forward(ids, trace, interventions or NO_INTERVENTIONS)
        for name, value in trace.items():
            if name != "tokens":
                trace[name] = value[0]  # drop the batch axis
        return logits[0], trace

    def new_cache(self, batch_size: int = 1) -> KVCache:
        return KVCache(self.config, batch_size, self.dtype)

    def forward_cached(self, new_ids, cache: KVCache) -> np.ndarray:
        """Logits for the new tokens only, reusing the keys/values already in `cache`.

        new_ids (B, t_new) -> (B, t_new, V). The cache grows by t_new positions.
        """
        ids, single = self._check_ids(new_ids, start=cache.length)
        if ids.shape[0] != cache.batch_size:
            raise ValueError(f"batch of {ids.shape[0]} does not match cache of {cache.batch_size}")
        logits = self._forward(ids, cache=cache)
        return logits[0] if single else logits

    def readout(self, residual: np.ndarray) -> np.ndarray:
        """Final LayerNorm (with this residual's own statistics) then the output layer.

        Applied to the residual after any block, this is the 'logit lens'.
        """
        return self.output.forward(self.ln_f.forward(residual))

    # ---- training

    def loss_and_grads(
        self, ids, targets, ignore_index: int = -1
    ) -> tuple[float, dict[str, np.ndarray]]:
        """Cross-entropy over all positions and the gradient for every parameter.

        ids, targets (B, T). Writes the layers' forward caches: use a model of your own for
        training, not one that is also serving requests.
        """
        ids, _ = self._check_ids(ids)
        targets = np.asarray(targets).reshape(ids.shape)
        logits = self._forward(ids, keep_cache=True)
        loss, dlogits = cross_entropy(logits, targets, ignore_index)
        return loss, self._backward(dlogits.astype(self.dtype, copy=False))

    def _backward(self, dlogits: np.ndarray) -> dict[str, np.ndarray]:
        grads: dict[str, np.ndarray] = {}
        dh, g = self.output.backward(dlogits)
        dx, g_ln = self.ln_f.backward(dh)
        grads.update({f"ln_f.{k}": v for k, v in g_ln.items()})
        for i in reversed(range(len(self.blocks))):
            dx, g_block = self.blocks[i].backward(dx)
            grads.update({f"blocks.{i}.{k}": v for k, v in g_block.items()})
        g_emb = self.embedding.backward(dx)
        grads["embedding.embeddings"] = g_emb["embeddings"]
        grads["embedding.position_embeddings"] = g_emb["position_embeddings"]
        if self.output.tied:  # the one matrix gets both its gradients, summed
            grads["embedding.embeddings"] = grads["embedding.embeddings"] + g["W_out"].T
        else:
            grads["output.W_out"] = g["W_out"]
        if "b_out" in g:
            grads["output.b_out"] = g["b_out"]
        return grads
