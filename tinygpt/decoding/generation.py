"""From next-token scores to text: greedy, sampling (temperature, top-k, top-p), beam search.

One step of decoding:

    logits (V,) --/temperature--> softmax --top-k--> --top-p--> renormalise --> pick a token

Every stage is recorded (`process_logits` returns a `ProcessedLogits`), and `generate` keeps one
record per new token, so a teacher can show exactly why each token was chosen.

The filters follow Hugging Face transformers' rules exactly (TopKLogitsWarper, TopPLogitsWarper),
and beam search (tinygpt/decoding/beam_search.py) follows transformers' `_beam_search` (scores,
length
penalty, early stopping), so the same model gives the same tokens in both libraries.

Probabilities are computed in float64 whatever the model's dtype: the numbers shown are exact
to the last digit a teacher would read, and ties are broken the same way every time
(the lowest token id wins).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tinygpt.decoding.beam_search import BeamStep, beam_search
from tinygpt.network.functional import log_softmax, softmax
from tinygpt.network.kv_cache import KVCache

STRATEGIES = ("greedy", "sample", "beam")


# ----------------------------------------------------------------------------- validation


def _check_temperature(temperature: float) -> float:
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(f"temperature must be a number >= 0, got {temperature!r}") from None
    if math.isnan(t) or t < 0 or math.isinf(t):
        raise ValueError(
            f"temperature must be a finite number >= 0 (0 means greedy), got {temperature!r}"
        )
    return t


def _check_top_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"top_k must be an integer >= 1 (or None for no top-k), got {k!r}")
    return int(k)


def _check_top_p(p: float) -> float:
    try:
        p_float = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"top_p must be a number in (0, 1], got {p!r}") from None
    if not (0.0 < p_float <= 1.0):  # also rejects NaN
        raise ValueError(f"top_p must be in (0, 1] (1 keeps everything), got {p!r}")
    return p_float


def _as_float_logits(logits) -> np.ndarray:
    x = np.asarray(logits, dtype=np.float64)
    if x.ndim not in (1, 2) or x.shape[-1] == 0:
        raise ValueError(f"logits must have shape (V,) or (B, V) with V >= 1, got {x.shape}")
    return x


# ----------------------------------------------------------------------------- distributions


def softmax_with_temperature(logits, temperature: float = 1.0) -> np.ndarray:
    """Probabilities from scores: softmax(logits / temperature), over the last axis.

    A wrapper of the one softmax (tinygpt.network.functional.softmax) that adds the
    temperature; `tinygpt.softmax` is this function.

    temperature < 1 sharpens the distribution, > 1 flattens it, and 0 is the limit:
    all the probability on the highest score (the first one if several are equal).
    """
    t = _check_temperature(temperature)
    x = _as_float_logits(logits)
    if t == 0.0:
        one_hot = np.zeros_like(x)
        np.put_along_axis(one_hot, np.argmax(x, axis=-1)[..., None], 1.0, axis=-1)
        return one_hot
    return softmax(_divide(x, t), axis=-1)


def _divide(x: np.ndarray, t: float) -> np.ndarray:
    """x / t; if that overflows (huge scores, tiny T), shift each row by its maximum first.

    softmax does not change when a row is shifted, and the shifted scores are <= 0, so the
    result stays finite (a score that falls to -inf just gets probability 0).
    """
    with np.errstate(over="ignore"):
        scaled = x / t
        if np.isfinite(scaled).all():
            return scaled
        return (x - np.max(x, axis=-1, keepdims=True)) / t


def _top_k(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(filtered logits, cutoff): remove every score below the k-th highest (ties all stay)."""
    V = x.shape[-1]
    k = min(k, V)
    kth = np.partition(x, V - k, axis=-1)[..., V - k]  # the k-th highest score per row
    filtered = np.where(x < kth[..., None], -np.inf, x)
    return filtered, kth


def top_k_filter(logits, k: int) -> np.ndarray:
    """Keep the k highest scores (and any score tied with the k-th); the rest become -inf.

    Same rule as transformers' TopKLogitsWarper: remove `logits < (k-th highest)`.
    k >= V keeps everything. Works on (V,) and (B, V).
    """
    return _top_k(_as_float_logits(logits), _check_top_k(k))[0]


def _top_p(x: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """(filtered logits, threshold): the smallest probability that survives, per row."""
    probs = softmax(x, axis=-1)
    if p >= 1.0:
        return x.copy(), np.min(np.where(probs > 0, probs, np.inf), axis=-1)
    # walk up from the least likely token; drop tokens while everything so far adds up to
    # at most 1 - p. The token that crosses the line is kept: the kept mass is >= p.
    # ascending order; among equal scores the highest token id comes first (is dropped first),
    # so ties are settled in favour of the lowest id, as in greedy decoding
    order = np.argsort(-x, axis=-1, kind="stable")[..., ::-1]
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    cumulative = np.cumsum(sorted_probs, axis=-1)
    remove_sorted = cumulative <= 1.0 - p
    remove_sorted[..., -1] = False  # always keep at least one token
    remove = np.empty_like(remove_sorted)
    np.put_along_axis(remove, order, remove_sorted, axis=-1)
    filtered = np.where(remove, -np.inf, x)
    threshold = np.min(np.where(remove, np.inf, probs), axis=-1)
    return filtered, threshold


def top_p_filter(logits, p: float) -> np.ndarray:
    """Nucleus filter: keep the most likely tokens until their probability adds up to p.

    Same rule as transformers' TopPLogitsWarper: a token is kept while the probability of the
    tokens ranked above it is below p, so the token that crosses p is kept. p = 1 keeps all.
    Among tokens with exactly equal scores the lowest id ranks first (transformers' order for
    exact ties depends on torch.sort, which is not stable). Works on (V,) and (B, V).
    """
    return _top_p(_as_float_logits(logits), _check_top_p(p))[0]


@dataclass
class ProcessedLogits:
    """Every stage from raw scores to the distribution we sample from (arrays (V,) or (B, V))."""

    logits: np.ndarray  # raw scores from the model
    temperature: float
    scaled_logits: np.ndarray  # logits / temperature (0: the argmax at 0, the rest -inf)
    probs: np.ndarray  # softmax after temperature
    top_k: int | None
    top_k_cutoff: np.ndarray | None  # the k-th highest scaled score; lower ones are removed
    top_k_removed_mass: np.ndarray  # probability (of `probs`) removed by top-k
    probs_after_top_k: np.ndarray  # renormalised over the top-k survivors (what top-p reads)
    top_p: float | None
    top_p_threshold: np.ndarray | None  # the smallest probability that top-p kept
    top_p_removed_mass: np.ndarray  # probability (of `probs_after_top_k`) removed by top-p
    kept: np.ndarray  # bool: which tokens can still be picked
    final_probs: np.ndarray  # renormalised over the kept tokens: sums to 1


def process_logits(
    logits, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> ProcessedLogits:
    """Temperature, then top-k, then top-p, then renormalise; keep every intermediate result.

    Everything is computed over the full vocabulary, in float64.
    """
    t = _check_temperature(temperature)
    k = None if top_k is None else _check_top_k(top_k)
    p = None if top_p is None else _check_top_p(top_p)
    x = _as_float_logits(logits)

    if t == 0.0:  # greedy: only the first argmax survives
        one_hot = softmax_with_temperature(x, 0.0)
        scaled = np.where(one_hot > 0, 0.0, -np.inf)
    else:
        scaled = _divide(x, t)
    probs = softmax(scaled, axis=-1)

    after_k, k_cutoff = scaled, None
    if k is not None:
        after_k, k_cutoff = _top_k(scaled, k)
    k_removed = np.sum(np.where(np.isneginf(after_k), probs, 0.0), axis=-1)
    probs_k = softmax(after_k, axis=-1)

    after_p, p_threshold = after_k, None
    if p is not None:
        after_p, p_threshold = _top_p(after_k, p)
    p_removed = np.sum(np.where(np.isneginf(after_p), probs_k, 0.0), axis=-1)

    kept = ~np.isneginf(after_p)
    return ProcessedLogits(  # one line a stage: temperature, top-k, top-p, what is left
        logits=x, temperature=t, scaled_logits=scaled, probs=probs,
        top_k=k, top_k_cutoff=k_cutoff, top_k_removed_mass=k_removed, probs_after_top_k=probs_k,
        top_p=p, top_p_threshold=p_threshold, top_p_removed_mass=p_removed,
        kept=kept, final_probs=softmax(after_p, axis=-1),
    )


def pick_token(probs: np.ndarray, u: float) -> tuple[int, np.ndarray]:
    """Inverse-CDF sampling: the first token whose cumulative probability exceeds u in [0, 1).

    Lay the probabilities end to end on [0, 1) in token-id order; u lands inside one token's
    stretch. Returns (token, cumulative) so the bar can be drawn.
    """
    probs = np.asarray(probs, dtype=np.float64)
    cumulative = np.cumsum(probs)  # (V,)
    token = int(np.searchsorted(cumulative, u, side="right"))  # first index with cum > u
    last_possible = int(np.flatnonzero(probs > 0)[-1])
    return min(token, last_possible), cumulative  # rounding can leave cum[-1] a hair below u


# ----------------------------------------------------------------------------- records


@dataclass
class Step:
    """One new token: what was chosen, and (when recorded) the distribution it came from."""

    position: int  # index of the new token in all_ids
    token: int
    prob: float  # its probability in the final (renormalised) distribution
    logprob: float  # its log-probability under the raw model (temperature 1, no filters)
    processed: ProcessedLogits | None = None  # None when record_steps=False
    u: float | None = None  # sampling only: the uniform draw
    cumulative: np.ndarray | None = None  # sampling only: the cumulative bar u fell into


@dataclass
class GenerationResult:
    tokens: np.ndarray  # (n_new,) the new token ids
    all_ids: np.ndarray  # (T + n_new,) prompt followed by the new tokens
    stop_reason: str  # "eos" | "max_new_tokens" | "context_full"
    steps: list[Step] = field(default_factory=list)  # greedy / sample
    beam_history: list[BeamStep] | None = None  # beam search
    score: float | None = None  # beam search: the returned hypothesis's score


# ----------------------------------------------------------------------------- next-token scores


@dataclass(frozen=True)
class PromptRead:
    """A prompt read once with the KV cache: its keys and values, and the logits (V,) for the
    position after it. Several generations of the same prompt (greedy, sample, beam) start
    from copies of it instead of reading the prompt again (`generate(..., prompt=...)`)."""

    ids: np.ndarray  # (T,)
    cache: KVCache  # never written: generations take copies
    logits: np.ndarray  # (V,)


def read_prompt(model, ids, *, steps=None) -> PromptRead:
    """Run the prompt ids (T,) once through the model, keeping its keys and values.
    steps: a tinygpt_hosting.steps.lockstep.SharedSteps, to read it in a pass shared with other
    requests."""
    ids = np.asarray(ids, dtype=np.int64)
    room = min(model.config.n_ctx, max(1, len(ids)))  # generations copy it with more room
    cache = model.new_cache(1, capacity=room)
    if steps is not None:
        logits = steps.step(model, ids[None], cache)[0][0]  # (V,)
    else:
        logits = model.forward_cached(ids[None], cache, last_only=True)[0, -1]  # (V,)
    return PromptRead(ids.copy(), cache, logits)


def continuation_logits(model, prompt: PromptRead, new_ids) -> np.ndarray:
    """The logits (n, V) that chose each of the n tokens `new_ids` written after the prompt:
    row 0 is the prompt's own last row, row i comes from running new token i-1 with the
    prompt's keys and values. The same rows as model.forward(prompt + new_ids) gives for those
    positions, for the cost of n positions instead of all of them."""
    new_ids = np.asarray(new_ids, dtype=np.int64)  # (n,)
    if len(new_ids) == 0:
        return np.zeros((0, len(prompt.logits)), dtype=prompt.logits.dtype)
    cache = prompt.cache.take(np.zeros(1, dtype=np.int64), len(prompt.ids) + len(new_ids) - 1)
    rest = model.forward_cached(new_ids[None, :-1], cache)[0] if len(new_ids) > 1 else (
        np.zeros((0, len(prompt.logits)), dtype=prompt.logits.dtype))  # (n - 1, V)
    return np.concatenate([prompt.logits[None].astype(rest.dtype), rest])


class _NextLogits:
    """Gives the logits for the next position of each sequence, with or without the KV cache.

    Both paths give the same numbers (up to float rounding): the cache only saves work.
    """

    def __init__(self, model, use_cache: bool, prompt: PromptRead | None = None,
                 new_tokens: int | None = None, interventions=None) -> None:
        self.model = model
        self.iv = interventions  # the same on every step (a steered generation), or None
        self.cache = None
        self.use_cache = use_cache
        self.prompt = prompt
        self.new_tokens = new_tokens  # known: each row keeps room for only that many more

    def first(self, sequences: np.ndarray) -> np.ndarray:
        """sequences (B, T) -> (B, V) for position T."""
        if not self.use_cache:
            return self.model.forward(sequences, self.iv)[:, -1]
        rows = np.zeros(len(sequences), dtype=np.int64)
        if self.prompt is not None:  # read already: copy its keys/values to every row
            self.cache = self.prompt.cache.take(rows, self._room(self.prompt.cache.length))
            return np.repeat(self.prompt.logits[None], len(sequences), axis=0)
        # read the prompt once, then copy its keys/values to every row (as the lockstep table).
        # One row goes on in the buffer it was read in, so that one has the row's room; never
        # the whole context: on SmolLM2 (n_ctx 8,192) that is 377 MB a row, mostly unused.
        T = sequences.shape[1]
        read = self.model.new_cache(1, capacity=self._room(T) if len(rows) == 1 else T)
        logits = self.model.forward_cached(sequences[:1], read, last_only=True,
                                           interventions=self.iv)[:, -1]
        self.cache = read if len(rows) == 1 else read.take(rows, self._room(T))
        return np.repeat(logits, len(sequences), axis=0)

    def _room(self, length: int) -> int:
        """Positions a row needs after `length` tokens: those and the new tokens, within the
        context (all of it only when the new tokens are not known)."""
        n_ctx = self.model.config.n_ctx
        if self.new_tokens is None:
            return n_ctx
        return min(n_ctx, length + self.new_tokens)

    def next(self, sequences: np.ndarray, parents: np.ndarray | None = None) -> np.ndarray:
        """sequences (B, T) whose last token is new; parents: which old row each row extends."""
        if not self.use_cache:
            return self.model.forward(sequences, self.iv)[:, -1]
        if parents is not None:
            self.cache.reorder(parents)
        return self.model.forward_cached(sequences[:, -1:], self.cache,
                                         interventions=self.iv)[:, -1]  # (B, V)


# ----------------------------------------------------------------------------- generate


def _check_generate_args(model, ids, max_new_tokens, strategy, num_beams, eos_token_id):
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError(
            f"ids must be a non-empty 1-D sequence of token ids, got shape {ids.shape}"
        )
    if ids.dtype.kind not in "iu":
        raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
    V, n_ctx = model.config.vocab_size, model.config.n_ctx
    if ids.min() < 0 or ids.max() >= V:
        raise ValueError(f"ids must be in 0 .. {V - 1} (the vocabulary)")
    if len(ids) > n_ctx:
        raise ValueError(f"the prompt has {len(ids)} tokens but the model reads at most {n_ctx}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)):
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if isinstance(num_beams, bool) or not isinstance(num_beams, (int, np.integer)) or num_beams < 1:
        raise ValueError(f"num_beams must be an integer >= 1, got {num_beams!r}")
    eos_ok = isinstance(eos_token_id, (int, np.integer)) and not isinstance(eos_token_id, bool)
    if eos_token_id is not None and not (eos_ok and 0 <= eos_token_id < V):
        raise ValueError(f"eos_token_id must be in 0 .. {V - 1} or None, got {eos_token_id!r}")
    return ids.astype(np.int64)


def generate(
    model,
    ids,
    max_new_tokens: int,
    strategy: str = "greedy",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    num_beams: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    eos_token_id: int | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    record_steps: bool = True,
    prompt: PromptRead | None = None,
    interventions=None,
) -> GenerationResult:
    """Continue `ids` (T,) by up to `max_new_tokens` tokens.

    strategy "greedy": the most likely token each time (the first on ties).
    strategy "sample": temperature, top-k, top-p, then a seeded inverse-CDF draw.
    strategy "beam": Hugging Face beam search (num_beams, length_penalty, early_stopping).
    Temperature / top-k / top-p only affect "sample".

    Stops at eos_token_id ("eos"), after max_new_tokens ("max_new_tokens"), or when the
    sequence fills the model's context ("context_full"). record_steps=False keeps only the
    chosen tokens (each full record holds a few arrays of vocabulary size). Beam search always
    keeps its history (2 * num_beams candidates per step: small). `prompt`: the same ids read
    already (`read_prompt`), so the prompt is not run through the model again.
    `interventions`: a tinygpt.network.config.Interventions applied to every step, prompt
    and new tokens alike (a steered generation: tinygpt.readouts.steering).
    """
    ids = _check_generate_args(model, ids, max_new_tokens, strategy, num_beams, eos_token_id)
    if prompt is not None and not (use_cache and np.array_equal(prompt.ids, ids)):
        raise ValueError("prompt must be read_prompt of the same ids, with use_cache=True")
    if prompt is not None and interventions is not None:
        raise ValueError("a prompt read already was read without the interventions")
    run = Run(max_new_tokens, strategy, temperature, top_k, top_p, num_beams, length_penalty,
              early_stopping, eos_token_id, seed, record_steps)
    return run.on(model, ids, _NextLogits(model, use_cache, prompt, max_new_tokens,
                                          interventions))


@dataclass(frozen=True)
class Run:
    """One generation's settings (generate's arguments after the prompt), checked when made."""

    max_new_tokens: int
    strategy: str = "greedy"
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    eos_token_id: int | None = None
    seed: int | None = None
    record_steps: bool = True

    def __post_init__(self) -> None:
        _check_temperature(self.temperature)
        if self.top_k is not None:
            _check_top_k(self.top_k)
        if self.top_p is not None:
            _check_top_p(self.top_p)
        stop = self.early_stopping
        if not (stop is True or stop is False or stop == "never"):
            raise ValueError(f"early_stopping must be True, False or 'never', got {stop!r}")

    @property
    def rows(self) -> int:
        """How many sequences it runs at once: its beams, or one."""
        return self.num_beams if self.strategy == "beam" else 1

    def on(self, model, ids: np.ndarray, source) -> GenerationResult:
        """Generate from checked ids (T,), asking `source` for the next logits (the KV cache,
        a full forward, or a batch shared with other runs: tinygpt_hosting.steps.lockstep)."""
        eos = None if self.eos_token_id is None else int(self.eos_token_id)
        if self.strategy == "beam":
            return _beam(model, ids, self.max_new_tokens, source, num_beams=self.num_beams,
                         length_penalty=float(self.length_penalty),
                         early_stopping=self.early_stopping, eos=eos)
        rng = np.random.default_rng(self.seed) if self.strategy == "sample" else None
        return _decode_one_by_one(model, ids, self.max_new_tokens, rng, self.temperature,
                                  self.top_k, self.top_p, eos, source, self.record_steps)


def _choose(logits, rng, temperature, top_k, top_p, position, record_steps) -> Step:
    """Pick the next token from one row of logits (V,) and say how."""
    logprobs = log_softmax(_as_float_logits(logits))  # (V,) the model's own view, for the record
    if rng is None:  # greedy
        token = int(np.argmax(logits))
        processed = process_logits(logits) if record_steps else None
        prob = float(np.exp(logprobs[token]))
        return Step(position, token, prob, float(logprobs[token]), processed)
    processed = process_logits(logits, temperature, top_k, top_p)
    u = float(rng.random())
    token, cumulative = pick_token(processed.final_probs, u)
    return Step(
        position,
        token,
        float(processed.final_probs[token]),
        float(logprobs[token]),
        processed if record_steps else None,
        u,
        cumulative if record_steps else None,
    )


def _decode_one_by_one(
    model, ids, max_new_tokens, rng, temperature, top_k, top_p, eos, source, record_steps
) -> GenerationResult:
    n_ctx = model.config.n_ctx
    seq = list(ids)
    steps: list[Step] = []
    stop_reason = "max_new_tokens"
    for i in range(max_new_tokens):
        if len(seq) >= n_ctx:  # no position left to predict into
            stop_reason = "context_full"
            break
        current = np.array([seq], dtype=np.int64)  # (1, T)
        logits = source.first(current) if i == 0 else source.next(current)  # (1, V)
        step = _choose(logits[0], rng, temperature, top_k, top_p, len(seq), record_steps)
        steps.append(step)
        seq.append(step.token)
        if eos is not None and step.token == eos:
            stop_reason = "eos"
            break
    all_ids = np.array(seq, dtype=np.int64)
    return GenerationResult(all_ids[len(ids) :], all_ids, stop_reason, steps)


def _beam(model, ids, max_new_tokens, source, **settings) -> GenerationResult:
    """tinygpt.decoding.beam_search for one prompt, within the model's context."""
    max_length = min(len(ids) + max_new_tokens, model.config.n_ctx)
    length_reason = "context_full" if max_length < len(ids) + max_new_tokens else "max_new_tokens"
    if max_length == len(ids):
        return GenerationResult(np.zeros(0, np.int64), ids.copy(), length_reason, [], [], None)
    winner, history = beam_search(source, ids, max_length, **settings)
    tokens = np.array(winner.tokens, dtype=np.int64)
    eos = settings["eos"]
    reason = "eos" if eos is not None and winner.tokens[-1] == eos else length_reason
    all_ids = np.concatenate([ids, tokens])
    return GenerationResult(tokens, all_ids, reason, [], history, winner.score)
