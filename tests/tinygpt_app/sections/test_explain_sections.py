"""The explain sections on existing pages: the surprise map (Logits) and all heads at a glance
(Attention), checked against the model's own numbers."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    TINY,
    assert_clean,
    chart,
    chart_title,
    decode,
    open_page,
)
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.network.functional import cross_entropy  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


def test_surprise_mean_shown_is_the_training_loss_on_the_prompt():
    at = open_page("pages/6_Logits.py", NORMAL)
    assert_clean(at)
    model, tok = load(TINY)
    ids = np.array(tok.encode(NORMAL))
    loss, _ = cross_entropy(model.forward(ids[None, :-1]), ids[None, 1:])
    text = next(m.value for m in at.markdown if "is exactly the cross-entropy" in m.value)
    assert f"**{loss:.3f} nats**" in text
    bars = decode(chart(at, "Surprise of each token")["data"][0]["y"], float)
    assert len(bars) == len(ids) - 1 and abs(bars.mean() - loss) < 1e-4
    assert any("background:rgb" in m.value for m in at.markdown)


def test_one_token_prompt_has_no_surprise_to_show():
    at = open_page("pages/6_Logits.py", "R")
    assert_clean(at)
    assert any("nothing before it" in i.value for i in at.info)


def test_all_heads_small_multiples_and_open_one():
    at = open_page("pages/4_Attention.py", NORMAL)
    assert_clean(at)
    spec = chart(at, "every head")
    model, _ = load(TINY)
    cfg = model.config
    maps = [trace for trace in spec["data"] if trace["type"] == "heatmap"]
    assert len(maps) == cfg.n_layer * cfg.n_head
    assert all("text" not in trace for trace in maps)
    crosses = [trace for trace in spec["data"] if trace["type"] == "scatter"]  # masked cells
    assert len(crosses) == len(maps) and sum(bool(t.get("showlegend")) for t in crosses) == 1
    at.selectbox(key="attention.open").set_value((1, 2))
    at.button(key="attention.open_button").click().run()
    assert_clean(at)
    assert at.selectbox(key="attention.layer").value == 1
    assert at.selectbox(key="attention.head").value == 2
    assert "block 1, head 2" in chart_title(at, "Attention weights, block")


def test_long_prompt_shows_the_inspected_row_of_each_head(monkeypatch):
    monkeypatch.setattr("tinygpt_app.sections.explain.HEADS_CELLS", 100)
    at = open_page("pages/4_Attention.py", NORMAL)
    assert_clean(at)
    spec = chart(at, "looks, in every head")
    assert len(spec["data"]) == 1
    model, _ = load(TINY)
    z = decode(spec["data"][0]["z"], float)
    assert z.shape[0] == model.config.n_layer * model.config.n_head
