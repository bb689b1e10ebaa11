"""Page 2, LayerNorm: the norm selector changes what is drawn."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import assert_clean, charts, decode, open_page  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")


def test_layernorm_page_norm_selector_changes_the_histograms():
    at = open_page("pages/3_LayerNorm.py", "Hello world")
    before = decode(charts(at)[0]["data"][0]["x"], float)
    at.selectbox(key="layernorm.norm").set_value("Final LayerNorm (before the output layer)").run()
    assert_clean(at)
    after = decode(charts(at)[0]["data"][0]["x"], float)
    assert before.shape == after.shape and not np.array_equal(before, after)
