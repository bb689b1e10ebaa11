"""The Interventions sections' comparison of runs: the union of each run's top tokens, in the
first run's order, with every run's probabilities of exactly those tokens."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app sections import streamlit")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt_app.sections import interventions as section  # noqa: E402


def test_compared_takes_the_union_of_the_runs_top_tokens():
    _, tok = load(TINY)
    state = SimpleNamespace(tokenizer=tok)
    rng = np.random.default_rng(0)
    rows = {"a": rng.standard_normal(512), "b": rng.standard_normal(512)}
    labels, probs = section.compared(state, rows)
    tops = {name: set(np.argsort(-row)[:section.TOP].tolist()) for name, row in rows.items()}
    assert len(labels) == len(tops["a"] | tops["b"])
    for name, row in rows.items():
        p = ti.probabilities(row)
        assert set(np.round(probs[name], 12)) <= set(np.round(p, 12))
        np.testing.assert_allclose(np.sort(probs[name])[::-1][:section.TOP],
                                   np.sort(p)[::-1][:section.TOP])
    # the first run's top tokens come first, in its order
    first = np.argsort(-rows["a"])[:section.TOP]
    np.testing.assert_allclose(probs["a"][:section.TOP], ti.probabilities(rows["a"])[first])
