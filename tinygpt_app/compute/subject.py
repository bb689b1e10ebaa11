"""What the shared caches compute on: a model and a tokenized prompt, not the page's UI state.

The caches key every result on small values (model id and file version, token ids, position,
settings), never on a page's state object. A page passes its `kit.state.AppState`, which has
these attributes; compute never imports the page kit (arrows: kit -> compute, not back).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from tinygpt.network.model import GPT, GPTConfig


class Subject(Protocol):
    """A model and a prompt as token ids, with the position looked at."""

    model_id: str  # the cache key's model part (with compute.models.model_version)
    model: GPT
    tokenizer: object
    prompt: str
    ids: np.ndarray  # (n,) int64
    position: int  # 0 .. n-1

    @property
    def config(self) -> GPTConfig: ...

    @property
    def n(self) -> int: ...

    @property
    def n_layer(self) -> int: ...
