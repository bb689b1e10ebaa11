"""What the Architectures page computes and reads: which models it sets side by side, their
model cards' held-out loss, and each model's next-token guess after the same prompt (one plain
forward per model and prompt, shared between sessions).

Bounded: at most MAX_MODELS models, each reading at most MAX_TOKENS tokens of the prompt, and
the guesses kept in a SharedCache bounded in bytes (each is k ids and k probabilities).
"""

from __future__ import annotations

import numpy as np

from tinygpt.readouts.modern.architecture import NextToken, last_tokens, next_token
from tinygpt_app.compute.model_cards import read_card
from tinygpt_app.compute.models import available_models, model_version
from tinygpt_app.compute.shared_cache import SharedCache

MAX_MODELS = 3  # side by side: each one loaded costs its memory, each prompt one forward
MAX_TOKENS = 64  # the last tokens of the prompt each model reads
TOP_K = 8
SHIPPED = ("shakespeare.npz", "shakespeare_llama.npz")  # the GPT-style and Llama-style models
_guesses = SharedCache(2**20)  # (model id, version, ids) -> NextToken: ~100 bytes each


def default_models(current: str) -> list[str]:
    """The model in use, then the shipped models that are present, at most MAX_MODELS."""
    listed = available_models()
    chosen = [current] + [m for m in SHIPPED if m in listed and m != current]
    return chosen[:MAX_MODELS]


def heldout_loss(model_id: str) -> float | None:
    """The held-out loss (nats per character) the model's card states, or None: no card, or a
    card without a finite number (never an error: the page says "no card")."""
    card = read_card(model_id)
    return None if card is None else card.heldout_nats_per_char


def guess(model_id: str, model, ids) -> NextToken:
    """The model's top TOP_K next tokens after the last MAX_TOKENS of `ids` (cached)."""
    read = last_tokens(ids, MAX_TOKENS)
    key = (model_id, model_version(model_id), tuple(int(i) for i in read))
    hit = _guesses.get(key)
    if hit is None:
        hit = _guesses.setdefault(key, next_token(model, np.asarray(read), TOP_K))
    return hit
