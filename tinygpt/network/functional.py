"""The math functions the model, the trainer, decoding and the readouts share.

softmax, log-softmax and cross-entropy all start the same way: shift each row by its maximum
(which changes nothing mathematically but keeps exp from overflowing), then exponentiate.
`shifted_exp` is the one place that does it, so there is one log-sum-exp in tinygpt.

GELU comes as a forward / backward pair: the forward returns the tanh (or erf) it computed, so
the backward does not compute it again.
"""

from __future__ import annotations

import math

import numpy as np

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_SQRT_2 = math.sqrt(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_erf = np.frompyfunc(math.erf, 1, 1)


# ----------------------------------------------------------------------------- softmax family


def shifted_exp(
    x: np.ndarray, axis: int, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(max, exp(x - max), sum of exp(x - max)) along `axis`; max and sum keep their axis.
    With `out` (may be x itself), exp(x - max) is written there: no new array.

    log sum_j exp(x_j) = max + log(sum): the log-sum-exp, here and nowhere else.

    -inf scores (masked, or cut by top-k / top-p) get probability exactly 0. Every row needs at
    least one finite score: attention always sees its own position, and decoding keeps at least
    one token.
    """
    x_max = np.max(x, axis=axis, keepdims=True)
    e = np.subtract(x, x_max, out=out)
    np.exp(e, out=e)
    return x_max, e, np.sum(e, axis=axis, keepdims=True)


def softmax(x: np.ndarray, axis: int = -1, *, out: np.ndarray | None = None) -> np.ndarray:
    """p_i = exp(x_i) / sum_j exp(x_j): positive, summing to 1 along `axis`.

    out=x normalizes in place (attention's T x T scores: one array instead of three).
    """
    _, e, total = shifted_exp(x, axis, out)
    e /= total
    return e


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log p_i = x_i - logsumexp(x), without ever forming p (tiny p keep their digits)."""
    x_max, _, total = shifted_exp(x, axis)
    return (x - x_max) - np.log(total)


def logsumexp(x: np.ndarray, axis: int = -1, *, overwrite: bool = False) -> np.ndarray:
    """log sum_j exp(x_j) along `axis` (the axis dropped): log_softmax(x) = x - logsumexp(x).

    overwrite=True uses x as scratch space (a copy made for this call): no new (T, V) array.
    """
    x_max, _, total = shifted_exp(x, axis, x if overwrite else None)
    return np.squeeze(x_max + np.log(total), axis=axis)


TOP_BLOCK = 64  # values per block in largest_k


def largest_k(x: np.ndarray, k: int) -> np.ndarray:
    """Indices (..., k) of the k largest values of each row of x (..., V), largest first.

    Why blocks: the k largest values of a row lie in the k blocks (of TOP_BLOCK values) with
    the largest maxima, since a value in any other block has k block maxima at least as large
    as it. So one max pass over V, then a partition of V / 64 block maxima and one of k * 64
    candidates: for V = 50,257 and k = 5 several times faster than partitioning all of V.
    Ties may pick another of the equal values, as a partition would.
    """
    V = x.shape[-1]
    k = max(1, min(int(k), V))
    rows = x.reshape(-1, V)  # (R, V)
    n_blocks = V // TOP_BLOCK
    if n_blocks <= 4 * k:  # a short row: partition it whole
        part = np.argpartition(rows, V - k, axis=-1)[:, V - k:]
    else:
        body = rows[:, :n_blocks * TOP_BLOCK].reshape(len(rows), n_blocks, TOP_BLOCK)
        best = np.argpartition(body.max(axis=-1), n_blocks - k, axis=-1)[:, n_blocks - k:]
        candidates = (best[:, :, None] * TOP_BLOCK + np.arange(TOP_BLOCK)).reshape(len(rows), -1)
        tail = np.broadcast_to(np.arange(n_blocks * TOP_BLOCK, V), (len(rows), V % TOP_BLOCK))
        candidates = np.concatenate([candidates, tail], axis=1)  # (R, k * 64 + the rest)
        values = np.take_along_axis(rows, candidates, axis=-1)
        pick = np.argpartition(values, values.shape[1] - k, axis=-1)[:, -k:]
        part = np.take_along_axis(candidates, pick, axis=-1)  # (R, k) unordered
    order = np.argsort(-np.take_along_axis(rows, part, axis=-1), axis=-1, kind="stable")
    return np.take_along_axis(part, order, axis=-1).astype(np.int64).reshape(*x.shape[:-1], k)


def cross_entropy(
    logits: np.ndarray, targets: np.ndarray, ignore_index: int = -1
) -> tuple[float, np.ndarray]:
    """Mean negative log-likelihood of the targets, and its gradient w.r.t. the logits.

    logits (B, T, V), targets (B, T); positions whose target is `ignore_index` do not count.
    d loss / d logits = (softmax - onehot) / n: the exponentials are computed once, for both.
    """
    B, T, V = logits.shape
    flat = logits.reshape(-1, V)  # (N, V)
    tgt = targets.reshape(-1)  # (N,)
    keep = tgt != ignore_index
    n = max(int(keep.sum()), 1)
    rows, safe_tgt = np.arange(len(tgt)), np.where(keep, tgt, 0)
    x_max, e, total = shifted_exp(flat, -1)  # (N, 1), (N, V), (N, 1)
    logp_target = (flat[rows, safe_tgt] - x_max[:, 0]) - np.log(total[:, 0])  # (N,)
    loss = -float(np.sum(logp_target * keep)) / n
    dlogits = e  # in place: e is not needed again
    dlogits /= total  # softmax, (N, V)
    dlogits[rows, safe_tgt] -= 1.0
    dlogits *= (keep / n)[:, None].astype(dlogits.dtype)  # ignored positions get 0
    return loss, dlogits.reshape(B, T, V)


def token_nll(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """-log p(target) at every position, in nats, in float64. logits (..., V), targets (...)."""
    logp = log_softmax(np.asarray(logits, dtype=np.float64), axis=-1)
    return -np.take_along_axis(logp, np.asarray(targets)[..., None], axis=-1)[..., 0]


# ----------------------------------------------------------------------------- linear


def linear(x: np.ndarray, W: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """x (..., C_in) @ W (C_in, C_out) + b -> (..., C_out), as one matrix product.

    The leading axes are flattened first: NumPy multiplies a (B, T, C) stack matrix by matrix,
    so B beams of one token each would read all of W B times (matrix-vector products), and a
    training batch would run B small products where one large one uses the cores better.
    """
    rows = x.reshape(-1, x.shape[-1])  # (N, C_in)
    y = rows @ W  # (N, C_out)
    if b is not None:
        y += b
    return y.reshape(*x.shape[:-1], W.shape[-1])


# ----------------------------------------------------------------------------- GELU


def gelu_forward(x: np.ndarray, *, approximate: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(GELU(x), saved): GELU(x) = x * Phi(x); `saved` is what `gelu_backward` reuses.

    approximate=True is GPT-2's tanh form, Phi(x) ~ (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2,
    and saved is that tanh. approximate=False is exact, Phi(x) = (1 + erf(x / sqrt 2)) / 2, and
    saved is Phi(x).
    """
    if approximate:
        # x * x * x, not x**3: NumPy's power is ~300x slower, and PyTorch also multiplies.
        # Written in place, step by step: (B, T, 4C) arrays, so each pass not made counts
        t = x * x
        t *= x
        t *= 0.044715
        t += x
        t *= _SQRT_2_OVER_PI
        np.tanh(t, out=t)  # t = tanh(sqrt(2/pi) (x + 0.044715 x^3))
        y = t + 1.0
        y *= x
        y *= 0.5  # y = x (1 + t) / 2
        return y, t
    cdf = (0.5 * (1.0 + _erf(x / _SQRT_2))).astype(x.dtype)
    return (x * cdf).astype(x.dtype), cdf


def gelu_backward(x: np.ndarray, saved: np.ndarray, *, approximate: bool = True) -> np.ndarray:
    """d GELU(x) / dx = Phi(x) + x * Phi'(x), from the `saved` tanh or Phi of the forward."""
    if approximate:
        t = saved
        d_inner = x * x
        d_inner *= 3 * 0.044715
        d_inner += 1.0
        d_inner *= _SQRT_2_OVER_PI  # d/dx of sqrt(2/pi) (x + 0.044715 x^3)
        grad = t * t
        np.subtract(1.0, grad, out=grad)  # 1 - t^2, tanh's derivative
        grad *= x
        grad *= d_inner
        grad += t
        grad += 1.0
        grad *= 0.5  # (1 + t) / 2 + x (1 - t^2) d_inner / 2
        return grad
    pdf = np.exp(-0.5 * (x * x)) / _SQRT_2PI  # the standard normal density
    return (saved + x * pdf).astype(x.dtype)


def gelu(x: np.ndarray, *, approximate: bool = True) -> np.ndarray:
    """GELU(x) = x * Phi(x): lets positive x through, squashes negative x towards 0."""
    return gelu_forward(x, approximate=approximate)[0]


# ----------------------------------------------------------------------------- SiLU


def sigmoid(x: np.ndarray) -> np.ndarray:
    """sigmoid(x) = (1 + tanh(x / 2)) / 2, in one new array: the same function as
    1 / (1 + exp(-x)), without the overflow of exp(-x) for very negative x."""
    sig = x * np.asarray(0.5, dtype=x.dtype)
    np.tanh(sig, out=sig)
    sig += 1.0
    sig *= 0.5
    return sig


def silu_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(SiLU(x), sigmoid(x)): SiLU(x) = x * sigmoid(x), the gate of SwiGLU."""
    sig = sigmoid(x)
    return x * sig, sig


def silu_gate(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """SiLU(gate) * up, SwiGLU's neurons, in five passes over the (B, T, I) numbers (a sigmoid
    then two products took six): with h = gate / 2, sigmoid(gate) = (1 + tanh(h)) / 2, so
    SiLU(gate) = h (1 + tanh(h)). The same bits as silu_forward(gate)[0] * up: halving is
    exact in floating point, so h (1 + t) and gate ((1 + t) / 2) round alike."""
    h = gate * np.asarray(0.5, dtype=gate.dtype)
    out = np.tanh(h)
    out += 1.0
    out *= h  # SiLU(gate)
    out *= up
    return out


def silu_backward(x: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """d SiLU(x) / dx = sigmoid(x) (1 + x (1 - sigmoid(x))), from the forward's sigmoid."""
    return sig * (1.0 + x * (1.0 - sig))
