"""Page 8, what if: each switch changes the prediction as the model's own switched run does;
heads, stages and every switch at once."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    PROMPTS,
    TINY,
    assert_clean,
    chart,
    decode,
    open_page,
    widget,
)
from tinygpt import Interventions  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/10_What_if.py"


def test_what_if_switch_changes_the_prediction():
    model, tok = load(TINY)
    at = open_page(PAGE, NORMAL)
    assert at.info  # all switches off
    widget(at.toggle, "No causal mask").set_value(True).run()
    assert_clean(at)
    fig = chart(at, "Next token after position")
    normal, switched = decode(fig["data"][0]["x"]), decode(fig["data"][1]["x"])
    assert not np.allclose(normal, switched)
    # the switched bars are the model's own probabilities with the mask removed
    ids = np.array(tok.encode(NORMAL))
    ref = model.forward(ids, interventions=Interventions(no_causal_mask=True))[-1]
    p = np.exp(ref - ref.max())
    p /= p.sum()
    assert switched.max() == pytest.approx(p.max(), rel=1e-4)
    # without the mask the attention map has no hidden (NaN) cells any more
    z_normal = decode(chart(at, "normal: block 0")["data"][0]["z"]).astype(float)
    z_switched = decode(chart(at, "switched: block 0")["data"][0]["z"]).astype(float)
    assert np.isnan(z_normal).any() and not np.isnan(z_switched).any()


def test_what_if_zero_head_and_stage_views():
    at = open_page(PAGE, NORMAL)
    widget(at.multiselect, "Zero these heads").set_value(["0.1", "1.2"]).run()
    widget(at.multiselect, "Skip the feed-forward").set_value([1]).run()
    assert_clean(at)
    fig = chart(at, "Next token after position")
    assert not np.allclose(decode(fig["data"][0]["x"]), decode(fig["data"][1]["x"]))
    for stage, title in (("residual norms", "switched: ‖x‖"), ("logit lens", "switched: logit")):
        widget(at.radio, "Stage").set_value(stage).run()
        assert_clean(at)
        assert chart(at, title)


def test_what_if_head_selector_changes_the_map():
    at = open_page(PAGE, NORMAL)
    z0 = decode(chart(at, "normal: block 0")["data"][0]["z"])
    widget(at.selectbox, "Head").set_value(2).run()
    assert_clean(at)
    z2 = decode(chart(at, "normal: block 0, head 2")["data"][0]["z"])
    assert not np.allclose(np.nan_to_num(z0), np.nan_to_num(z2))
    spec = chart(at, "switched: block 0, head 2")["data"][0]
    assert (spec["zmin"], spec["zmax"]) == (0.0, 1.0)  # both maps on one colour scale


def test_what_if_every_switch_at_once():
    at = open_page(PAGE, PROMPTS["over_long"])
    for label in ("No position", "No causal mask", "No LayerNorm", "No residual"):
        widget(at.toggle, label).set_value(True).run()
    widget(at.multiselect, "Skip attention").set_value([0, 1]).run()
    assert_clean(at)
    for stage in ("residual norms", "logit lens"):
        widget(at.radio, "Stage").set_value(stage).run()
        assert_clean(at)
