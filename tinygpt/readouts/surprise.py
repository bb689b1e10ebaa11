"""How surprised was the model by each token of a text?

surprise[t] = -log p(ids[t+1] | ids[0..t]), in nats: 0 when the model was sure of the token
that came, large when it gave that token little probability. Their mean over a text is the
cross-entropy loss the trainer reports on it (tinygpt.network.functional.cross_entropy).
"""

from __future__ import annotations

import numpy as np

from tinygpt.network.model import GPT
from tinygpt.readouts import target_logprobs
from tinygpt.readouts.attribution import check_prompt


def surprise(model: GPT, ids, *, logits: np.ndarray | None = None) -> np.ndarray:
    """-log p of each real next token: ids (T,) -> (T-1,) float32 nats (empty when T == 1).

    Entry t is about token t+1, predicted from tokens 0..t (the first token has no
    prediction). Pass `logits` (T, V) from a forward you already ran; otherwise this runs one
    plain forward.
    """
    ids = check_prompt(model, ids)
    if logits is None:
        logits = model.forward(ids)  # (T, V)
    elif logits.shape != (len(ids), model.config.vocab_size):
        raise ValueError(
            f"logits must have shape {(len(ids), model.config.vocab_size)}, got {logits.shape}"
        )
    return -target_logprobs(logits, ids)  # (T-1,)
