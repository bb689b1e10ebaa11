"""The run every chart test draws from: the fixture model's own forward pass with a trace."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from tests.apptest_support import TINY
from tinygpt.checkpoint.files import load
from tinygpt_app.kit.labels import token_label

PROMPT = "ROMEO:\nBut soft, what light through yonder window"


@dataclass
class Run:
    model: object
    tok: object
    ids: np.ndarray
    logits: np.ndarray
    trace: dict
    labels: list[str]  # "3:·the", one per position


@pytest.fixture(scope="package")
def run() -> Run:
    model, tok = load(TINY)
    ids = np.array(tok.encode(PROMPT))
    logits, trace = model.run_with_trace(ids)
    labels = [token_label(tok, t, position=i) for i, t in enumerate(ids)]
    return Run(model, tok, ids, logits, trace, labels)


@pytest.fixture(autouse=True)
def plain_figures(monkeypatch):
    """The builders as a notebook sees them: ordinary Plotly figures. (The app's pages, run by
    AppTest in this process, share figures between sessions; tests/app covers that.)"""
    from tinygpt_app.charts import common

    monkeypatch.setattr(common, "_shared", None)
