"""What the caches compute on (tinygpt_app.compute.subject.Subject): the page's AppState has
every attribute the protocol names, with the same values the caches key on."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tinygpt_app.compute.models import load_model  # noqa: E402
from tinygpt_app.compute.subject import Subject  # noqa: E402
from tinygpt_app.kit.state import AppState  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


def protocol_names() -> set[str]:
    properties = {name for name, member in inspect.getmembers(Subject)
                  if isinstance(member, property)}
    return set(Subject.__annotations__) | properties


def test_the_page_state_is_a_subject():
    model, tokenizer = load_model("tiny.npz")
    ids = np.asarray(tokenizer.encode("to be or not"), dtype=np.int64)
    state = AppState("tiny.npz", model, tokenizer, "to be or not", ids, 2)
    assert protocol_names() >= {"model_id", "model", "ids", "position", "config", "n", "n_layer"}
    for name in protocol_names():
        assert hasattr(state, name), name
    assert (state.n, state.n_layer, state.config) == (len(ids), model.config.n_layer, model.config)
