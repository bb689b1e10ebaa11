"""A GPT-2-style transformer in NumPy, written to be read next to the math.

    ids -> EmbeddingLayer (token + position) -> n_layer x TransformerBlock
        -> final LayerNorm -> OutputLayer -> logits (one row per position)

Each TransformerBlock is pre-LayerNorm:
    x = x + Attention(LayerNorm1(x))
    x = x + FeedForward(LayerNorm2(x))

The same model reads Llama and Qwen2 (the config chooses the parts): RMSNorm for LayerNorm,
rotary positions turning q and k in attention instead of a position table, fewer key/value
heads than query heads, and SwiGLU for the GELU MLP (docs/model_parts.md).

Shapes in comments: B batch, T tokens, C = embedding_dim (`config.n_embd`), V = vocab_size.
The layers, each with its forward and backward, are in tinygpt/network/layers.py; the math functions
in tinygpt/network/functional.py; GPTConfig and Interventions in tinygpt/network/config.py.
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.config import NO_INTERVENTIONS, GPTConfig, Interventions
from tinygpt.network.functional import cross_entropy
from tinygpt.network.kv_cache import KVCache
from tinygpt.network.layers import (
    Attention,
    EmbeddingLayer,
    FeedForward,
    LayerNorm,
    OutputLayer,
    RMSNorm,
    SwiGLU,
    TransformerBlock,
)
from tinygpt.network.norms import make_norm
from tinygpt.network.record import record
from tinygpt.network.trace import Recorder, Trace

__all__ = [
    "GPT",
    "GPTConfig",
    "Interventions",
    "KVCache",
    "Trace",
    "parameter_shapes",
    # the layers, so `from tinygpt.network.model import Attention` keeps working
    "Attention",
    "EmbeddingLayer",
    "FeedForward",
    "LayerNorm",
    "OutputLayer",
    "RMSNorm",
    "SwiGLU",
    "TransformerBlock",
]


# ----------------------------------------------------------------------------- parameter names


def parameter_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """The name and shape of every parameter of a model with this config, in a fixed order.

    The one list of parameter names: `GPT.parameters()`, gradients, AdamW's state and the
    checkpoint format all use these names. A tied W_out is the embedding matrix, so it is
    not listed (nor saved) twice. Parts a config switches off (a bias, RMSNorm's beta, the
    position table of a rotary model) have no name.
    """
    V, C, T = config.vocab_size, config.embedding_dim, config.n_ctx
    shapes: dict[str, tuple[int, ...]] = {"embedding.embeddings": (V, C)}
    if config.position == "learned":
        shapes["embedding.position_embeddings"] = (T, C)
    for i in range(config.n_layer):
        p = f"blocks.{i}"
        shapes.update(_norm_shapes(config, f"{p}.ln1"))
        shapes.update({f"{p}.attn.{k}": v for k, v in _attention_shapes(config).items()})
        shapes.update(_norm_shapes(config, f"{p}.ln2"))
        shapes.update({f"{p}.ffn.{k}": v for k, v in _mlp_shapes(config).items()})
    shapes.update(_norm_shapes(config, "ln_f"))
    if not config.tie_weights:
        shapes["output.W_out"] = (C, V)
    if config.output_bias:
        shapes["output.b_out"] = (V,)
    return shapes


def _norm_shapes(config: GPTConfig, name: str) -> dict[str, tuple[int, ...]]:
    C = config.embedding_dim
    if config.norm == "rmsnorm":
        return {f"{name}.gamma": (C,)}
    return {f"{name}.gamma": (C,), f"{name}.beta": (C,)}


def _attention_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    C, kv = config.embedding_dim, config.kv_heads * config.head_size
    if config.n_kv_head is None:  # GPT-2's fused layout
        shapes = {"W_qkv": (C, 3 * C), "b_qkv": (3 * C,)}
    else:
        shapes = {"W_q": (C, C), "b_q": (C,), "W_k": (C, kv), "b_k": (kv,),
                  "W_v": (C, kv), "b_v": (kv,)}
    if not config.attn_bias:
        shapes = {k: v for k, v in shapes.items() if not k.startswith("b_")}
    shapes["W_proj"] = (C, C)
    if config.proj_bias:
        shapes["b_proj"] = (C,)
    return shapes


def _mlp_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    C, inner = config.embedding_dim, config.inner_dim
    if config.mlp == "swiglu":
        shapes = {"W_gate": (C, inner), "b_gate": (inner,), "W_up": (C, inner),
                  "b_up": (inner,), "W_down": (inner, C), "b_down": (C,)}
    else:
        shapes = {"W1": (C, inner), "b1": (inner,), "W2": (inner, C), "b2": (C,)}
    if not config.mlp_bias:
        shapes = {k: v for k, v in shapes.items() if not k.startswith("b")}
    return shapes


# ----------------------------------------------------------------------------- the model


class GPT:
    def __init__(
        self, config: GPTConfig, seed: int | None = 0, dtype=np.float32, init: bool = True
    ) -> None:
        """A model with random weights from `seed`, or zeros with init=False (to load into).

        `metadata` is a free-form dict about where the weights came from: {} for a fresh
        model, the saved training info for a checkpoint, the source for a GPT-2 folder.
        """
        self.config = config
        self.dtype = np.dtype(dtype)
        self.metadata: dict = {}
        rng = np.random.default_rng(seed) if init else None
        C = config.embedding_dim
        self.embedding = EmbeddingLayer(config.vocab_size, config.n_ctx, C, rng, self.dtype,
                                        learned_positions=config.position == "learned")
        self.blocks = [TransformerBlock(config, rng, self.dtype) for _ in range(config.n_layer)]
        self.ln_f = make_norm(config, self.dtype)
        self.output = OutputLayer(
            self.embedding, config.tie_weights, config.output_bias, rng, self.dtype
        )

    # ---- parameters

    def parameters(self) -> dict[str, np.ndarray]:
        """Every learnable array by name (the live arrays), named by `parameter_shapes`."""
        params = {}
        for name in parameter_shapes(self.config):
            owner, attr = self._locate(name)
            params[name] = getattr(owner, attr)
        return params

    def load_parameters(self, params: dict[str, np.ndarray]) -> None:
        """Replace every parameter by the array of the same name (shapes must match exactly)."""
        expected = parameter_shapes(self.config)
        missing, extra = set(expected) - set(params), set(params) - set(expected)
        if missing or extra:
            raise ValueError(
                f"parameter names do not match: missing {sorted(missing)[:5]}, "
                f"unexpected {sorted(extra)[:5]}"
            )
        for name, shape in expected.items():
            new = np.asarray(params[name])
            if new.shape != shape:
                raise ValueError(f"{name}: expected shape {shape}, got {new.shape}")
            owner, attr = self._locate(name)
            setattr(owner, attr, new.astype(self.dtype, copy=False))

    def submodule(self, name: str):
        """The layer called `name`, e.g. "blocks.2.ln1", "blocks.0.attn", "ln_f", "output"."""
        parts = name.split(".")
        obj = self
        try:
            if parts[0] == "blocks":
                index = int(parts[1])
                if not 0 <= index < len(self.blocks):
                    raise IndexError(index)
                obj, parts = self.blocks[index], parts[2:]
            for part in parts:
                obj = getattr(obj, part)
        except (IndexError, ValueError, AttributeError):
            raise ValueError(f"this model has no layer called {name!r}") from None
        return obj

    def _locate(self, name: str) -> tuple[object, str]:
        """(layer, attribute) holding the parameter `name`, e.g. (blocks[0].ln1, "gamma")."""
        layer, attr = name.rsplit(".", 1)
        return self.submodule(layer), ("_W_out" if attr == "W_out" else attr)

    def num_parameters(self) -> int:
        return int(sum(p.size for p in self.parameters().values()))

    def astype(self, dtype) -> GPT:
        """A copy of this model with every parameter in `dtype` (e.g. float64 for grad checks)."""
        copy = GPT(self.config, dtype=dtype, init=False)
        copy.load_parameters({k: v.astype(dtype) for k, v in self.parameters().items()})
        copy.metadata = dict(self.metadata)
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
        ids: np.ndarray | None,
        *,
        x: np.ndarray | None = None,
        first: int = 0,
        trace: dict | None = None,
        interventions: Interventions = NO_INTERVENTIONS,
        cache: KVCache | None = None,
        keep_cache: bool = False,
        last_only: bool = False,
    ) -> np.ndarray:
        """ids (B, T) -> logits (B, T, V): the embedding, the blocks, the final norm and the
        output layer. With x, the residual stream (B, T, C) entering block `first`, the run
        starts there instead (forward_from)."""
        iv = interventions
        start = cache.length if cache is not None else 0
        if x is None:
            x = self.embedding.forward(ids, start=start, trace=trace, no_position=iv.no_position,
                                       keep_cache=keep_cache)  # (B, T, C)
        for i in range(first, len(self.blocks)):
            kv = (cache.keys[i], cache.values[i], start) if cache is not None else None
            x = self.blocks[i].forward(x, index=i, trace=trace, interventions=iv, kv=kv,
                                       keep_cache=keep_cache)  # (B, T, C)
        h = self.ln_f.forward(x, trace=trace, name="ln_f", identity=iv.no_layernorm,
                              keep_cache=keep_cache)  # (B, T, C)
        if last_only:  # generation reads only the next position: skip T - 1 rows of (C, V)
            h = h[:, -1:]  # (B, 1, C)
        logits = self.output.forward(h, keep_cache=keep_cache)  # (B, T, V)
        record(trace, "logits", logits)
        if cache is not None:
            cache.length = start + x.shape[1]
        return logits

    def forward(self, ids, interventions: Interventions | None = None) -> np.ndarray:
        """ids (T,) or (B, T) -> logits (T, V) or (B, T, V): a next-token score row per position."""
        ids, single = self._check_ids(ids)
        logits = self._forward(ids, interventions=interventions or NO_INTERVENTIONS)
        return logits[0] if single else logits

    __call__ = forward

    def forward_from(self, x: np.ndarray, layer: int,
                     interventions: Interventions | None = None, *,
                     last_only: bool = False) -> np.ndarray:
        """The rest of a forward: x (B, T, C), the residual stream entering block `layer`
        (0-based; positions 0..T-1) -> logits (B, T, V), or (B, 1, V) with last_only.
        forward(ids) is forward_from(the embedding of ids, 0). Runs that share everything
        below `layer` (activation patching) run it once and go on from here."""
        x = np.asarray(x, dtype=self.dtype)
        n_layer, C = self.config.n_layer, self.config.embedding_dim
        if x.ndim != 3 or x.shape[-1] != C or x.shape[1] == 0:
            raise ValueError(f"x must have shape (B, T, {C}), got {x.shape}")
        if x.shape[1] > self.config.n_ctx:
            raise ValueError(f"{x.shape[1]} positions is more than the model's context of "
                             f"{self.config.n_ctx}")
        if not (isinstance(layer, (int, np.integer)) and 0 <= layer < n_layer):
            raise ValueError(f"layer must be 0 .. {n_layer - 1}, got {layer!r}")
        return self._forward(None, x=x, first=int(layer),
                             interventions=interventions or NO_INTERVENTIONS, last_only=last_only)

    def run_with_trace(
        self, ids, interventions: Interventions | None = None
    ) -> tuple[np.ndarray, Trace]:
        """Forward one sequence (T,) and record every intermediate tensor (names in the docs)."""
        ids, single = self._check_ids(ids)
        if not single:
            raise ValueError("run_with_trace takes one sequence of shape (T,)")
        iv = interventions or NO_INTERVENTIONS
        recorder = Recorder()  # keeps what cannot be derived: see tinygpt/network/trace.py
        logits = self._forward(ids, trace=recorder, interventions=iv)
        stored = {name: value[0] for name, value in recorder.items()}  # drop the batch axis
        return logits[0], Trace(self, ids[0], iv, stored)

    def new_cache(self, batch_size: int = 1, capacity: int | None = None) -> KVCache:
        """An empty KV cache with room for `capacity` positions (default: the whole context)."""
        return KVCache(self.config, batch_size, self.dtype, capacity=capacity)

    def forward_cached(self, new_ids, cache: KVCache, *, last_only: bool = False,
                       interventions: Interventions | None = None) -> np.ndarray:
        """Logits for the new tokens only, reusing the keys/values already in `cache`.

        new_ids (B, t_new) -> (B, t_new, V), or (B, 1, V) for the last new token with
        last_only (a prompt read before generating). The cache grows by t_new positions.
        interventions: the same on every step of one cache (a steered generation).
        """
        ids, single = self.check_cached(new_ids, cache)
        logits = self._forward(ids, cache=cache, last_only=last_only,
                               interventions=interventions or NO_INTERVENTIONS)
        return logits[0] if single else logits

    def check_cached(self, new_ids, cache: KVCache) -> tuple[np.ndarray, bool]:
        """The checks of forward_cached: (ids as (B, t) int64, whether they came as (t,))."""
        ids, single = self._check_ids(new_ids, start=cache.length)
        if ids.shape[0] != cache.batch_size:
            raise ValueError(f"batch of {ids.shape[0]} does not match cache of {cache.batch_size}")
        if cache.length + ids.shape[1] > cache.capacity:
            raise ValueError(f"the cache has room for {cache.capacity} positions, not "
                             f"{cache.length + ids.shape[1]}")
        return ids, single

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
        loss, dlogits = cross_entropy(logits, targets, ignore_index)  # (B, T, V)
        return loss, self._backward(dlogits.astype(self.dtype, copy=False))

    def _backward(self, dlogits: np.ndarray) -> dict[str, np.ndarray]:
        """The forward pass in reverse: each layer's backward, from the logits to the ids."""
        grads: dict[str, np.ndarray] = {}
        dh, g = self.output.backward(dlogits)
        dx, g_ln = self.ln_f.backward(dh)
        grads.update({f"ln_f.{k}": v for k, v in g_ln.items()})
        for i in reversed(range(len(self.blocks))):
            dx, g_block = self.blocks[i].backward(dx)
            grads.update({f"blocks.{i}.{k}": v for k, v in g_block.items()})
        g_emb = self.embedding.backward(dx)
        grads["embedding.embeddings"] = g_emb["embeddings"]
        if "position_embeddings" in g_emb:
            grads["embedding.position_embeddings"] = g_emb["position_embeddings"]
        if self.output.tied:  # the one matrix gets both its gradients, summed
            grads["embedding.embeddings"] = grads["embedding.embeddings"] + g["W_out"].T
        else:
            grads["output.W_out"] = g["W_out"]
        if "b_out" in g:
            grads["output.b_out"] = g["b_out"]
        return grads
