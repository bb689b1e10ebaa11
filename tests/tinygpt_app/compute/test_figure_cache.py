"""Figures shared by the sessions of one process: the digest tells every input apart, a shared
figure is the figure the call would have built, the store keeps to its bytes, and two sessions
on the same view get the same charts with the second one built from the store."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import plotly.io
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import NORMAL, assert_clean, charts, open_page  # noqa: E402
from tinygpt_app.charts import common  # noqa: E402
from tinygpt_app.compute import figure_cache  # noqa: E402
from tinygpt_app.compute.figure_cache import FigureStore, SharedFigure, digest  # noqa: E402


def inputs(z: np.ndarray, title: str = "t") -> dict:
    return {"data": [{"type": "heatmap", "z": z, "x": ["a", "b"], "y": ["p", "q"]}],
            "layout": {"title": {"text": title}, "height": 300}}


def test_the_digest_tells_every_input_apart():
    z = np.arange(4, dtype=np.float32).reshape(2, 2)
    same = digest(inputs(z.copy()))
    assert digest(inputs(z)) == same
    changed = z.copy()
    changed[1, 1] = np.nextafter(changed[1, 1], np.float32(9))  # one ulp
    others = [inputs(changed), inputs(z.astype(np.float64)), inputs(z.reshape(1, 4)),
              inputs(z, "T"), inputs(z.T), {"a": 1}, {"a": 1.0}, {"a": True}, {"a": "1"},
              {"a": None}, {"a": [1, 2]}, {"a": [[1], 2]}, {"a": ["1", "2"]}, {"a": ["12"]}]
    digests = {digest(other) for other in others}
    assert same not in digests and len(digests) == len(others)


def test_anything_else_is_built_without_the_store():
    store = FigureStore(2**20)
    built = store.get({"data": [object()]}, lambda: go.Figure())
    assert isinstance(built, go.Figure) and len(store) == 0


def test_a_shared_figure_is_the_figure_the_call_would_build():
    store = FigureStore(2**20)
    z = np.random.default_rng(0).standard_normal((2, 2)).astype(np.float32)
    first = store.get(inputs(z), lambda: go.Figure(inputs(z)))
    again = store.get(inputs(z.copy()), lambda: pytest.fail("built twice"))
    assert isinstance(first, SharedFigure) and again is first
    assert (store.hits, store.misses) == (1, 1)
    fresh = go.Figure(inputs(z))
    assert plotly.io.to_json(first, validate=False) == plotly.io.to_json(fresh, validate=False)


def test_the_store_keeps_to_its_bytes_and_forgets_the_oldest():
    z = np.zeros((100, 100), dtype=np.float32)  # 40 kB each
    one = FigureStore(2**30).get(inputs(z), lambda: go.Figure(inputs(z))).nbytes
    assert one > z.nbytes
    store = FigureStore(int(2.5 * one))  # room for two
    for k in range(5):
        store.get(inputs(z, f"figure {k}"), lambda k=k: go.Figure(inputs(z, f"figure {k}")))
        assert store.figures.nbytes <= store.figures.max_bytes == int(2.5 * one)
    assert len(store) == 2
    rebuilt = []
    store.get(inputs(z, "figure 4"), lambda: rebuilt.append(4) or go.Figure(inputs(z)))
    store.get(inputs(z, "figure 0"), lambda: rebuilt.append(0) or go.Figure(inputs(z)))
    assert rebuilt == [0]  # the newest was kept, the oldest forgotten


def test_two_sessions_on_one_view_share_their_figures():
    first = open_page("pages/6_Logits.py", NORMAL)
    assert_clean(first)
    store = figure_cache.store()
    assert store is not None and common._shared is not None
    hits = store.hits
    second = open_page("pages/6_Logits.py", NORMAL)
    assert_clean(second)
    assert charts(second) == charts(first)
    assert store.hits - hits >= len(charts(first))  # every chart came from the store
