"""The two normalisations: LayerNorm (GPT-2) and RMSNorm (Llama, Qwen2), forward and backward.

Both act on each token's vector alone, over the last axis (C = embedding_dim). The block asks
`make_norm(config)` for the one its config names; both take the same options.
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.config import GPTConfig
from tinygpt.network.record import Record


class _Norm:
    """What both normalisations share: the scale gamma, the options of forward, the trace.

    A subclass says how a row is normalised (`normalise`) and how the result is scaled
    (`scale`); forward is the same for both.
    """

    def __init__(self, dim: int, eps: float, dtype) -> None:
        self.eps = eps
        self.gamma = np.ones(dim, dtype=dtype)  # scale starts at 1
        self.cache = None

    def forward(self, x: np.ndarray, *, trace: Record | None = None, name: str = "ln",
                identity: bool = False, keep_cache: bool = False) -> np.ndarray:
        """x (B, T, C) -> y (B, T, C). identity=True passes x through ('no normalisation')."""
        x_hat, stats, cache = self.normalise(x)
        if identity:
            y = x
        elif trace is None and not keep_cache:  # x_hat is not kept: scaled in place
            y = self.scale(x_hat, out=x_hat)
        else:
            y = self.scale(x_hat)
        if trace is not None:
            trace[f"{name}.input"] = x
            for stat, value in stats.items():  # (B, T, 1) -> (B, T)
                trace[f"{name}.{stat}"] = value[..., 0]
            trace[f"{name}.normalized"] = x_hat
            trace[f"{name}.output"] = y
        if keep_cache:
            self.cache = cache
        return y

    def normalise(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray], tuple]:
        """x (B, T, C) -> x_hat (B, T, C), the row statistics traced, what backward needs."""
        raise NotImplementedError

    def scale(self, x_hat: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """x_hat scaled (and shifted); into `out` when given (may be x_hat itself)."""
        raise NotImplementedError


class LayerNorm(_Norm):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta, over the last axis (each token alone)."""

    def __init__(self, dim: int, eps: float, dtype) -> None:
        super().__init__(dim, eps, dtype)
        self.beta = np.zeros(dim, dtype=dtype)  # shift starts at 0

    def normalise(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray], tuple]:
        mean = x.mean(axis=-1, keepdims=True)  # (B, T, 1)
        x_hat = x - mean  # (B, T, C), centred; scaled in place below
        var = np.mean(x_hat * x_hat, axis=-1, keepdims=True)  # (B, T, 1), biased like GPT-2
        rstd = 1.0 / np.sqrt(var + self.eps)
        x_hat *= rstd  # (B, T, C) mean 0, variance 1
        return x_hat, {"mean": mean, "var": var}, (x_hat, rstd)

    def scale(self, x_hat: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        y = np.multiply(x_hat, self.gamma, out=out)
        y += self.beta
        return y

    def backward(self, dy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dy (B, T, C) -> dx (B, T, C), and the gradients of gamma and beta (C,)."""
        x_hat, rstd = self.cache
        C = x_hat.shape[-1]
        grads = {
            "gamma": (dy * x_hat).reshape(-1, C).sum(axis=0),
            "beta": dy.reshape(-1, C).sum(axis=0),
        }
        dx_hat = dy * self.gamma  # (B, T, C)
        # x_hat depends on x directly and through the mean and the variance of its row
        dx = rstd * (
            dx_hat
            - dx_hat.mean(axis=-1, keepdims=True)
            - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True)
        )
        return dx, grads


class RMSNorm(_Norm):
    """y = x / sqrt(mean(x^2) + eps) * gamma: LayerNorm without the mean and without beta.

    The row is only rescaled, never shifted: rms = sqrt(mean(x^2) + eps) is its size.
    """

    def __init__(self, dim: int, eps: float, dtype) -> None:
        super().__init__(dim, eps, dtype)
        self.beta = None  # no shift: readouts that add beta add nothing

    def normalise(self, x: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray], tuple]:
        C = x.shape[-1]
        mean_square = np.einsum("...c,...c->...", x, x)[..., None] / C  # (B, T, 1): no x * x
        rms = np.sqrt(mean_square + self.eps)  # (B, T, 1)
        x_hat = x * (1.0 / rms)  # (B, T, C): root mean square 1 (a product: faster than /)
        return x_hat, {"rms": rms}, (x_hat, rms)

    def scale(self, x_hat: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return np.multiply(x_hat, self.gamma, out=out)

    def backward(self, dy: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """dy (B, T, C) -> dx (B, T, C), and the gradient of gamma (C,)."""
        x_hat, rms = self.cache
        C = x_hat.shape[-1]
        grads = {"gamma": (dy * x_hat).reshape(-1, C).sum(axis=0)}
        dx_hat = dy * self.gamma  # (B, T, C)
        # x_hat = x / rms(x): directly, and through the row's rms (d rms / dx = x_hat / C)
        dx = (dx_hat - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True)) / rms
        return dx, grads


def make_norm(config: GPTConfig, dtype) -> LayerNorm | RMSNorm:
    """The normalisation the config names, over embedding_dim, with its eps."""
    kind = RMSNorm if config.norm == "rmsnorm" else LayerNorm
    return kind(config.embedding_dim, config.layer_norm_eps, dtype)
