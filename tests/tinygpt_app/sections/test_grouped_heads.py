"""The Grouped-query attention section of the Attention page: the sharing drawn and the KV
bytes per token are the folder's config arithmetic (Qwen2-shaped: 6 query heads on 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
pytest.importorskip("safetensors.numpy", reason="the folders are written with safetensors")

from tests.apptest_support import assert_clean, chart, decode, open_page  # noqa: E402
from tests.pages.modern_folders import PROMPT, choose  # noqa: E402

PAGE = "pages/4_Attention.py"


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_bytes_per_token_from_the_folders_config(modern_models, name):
    config = json.loads((modern_models / name / "config.json").read_text())
    H, KV = config["num_attention_heads"], config["num_key_value_heads"]
    hs, L = config["hidden_size"] // H, config["num_hidden_layers"]
    at = choose(open_page(PAGE, PROMPT), name)
    assert_clean(at)
    bars = decode(chart(at, "KV cache: bytes per token")["data"][0]["x"], float)
    np.testing.assert_array_equal(bars, [2 * L * KV * hs * 4, 2 * L * H * hs * 4])  # float32
    sharing = chart(at, "query heads")
    queries = sharing["data"][1]
    assert decode(queries["customdata"], int).tolist() == [h // (H // KV) for h in range(H)]


def test_the_chosen_head_names_its_group(modern_models):
    at = choose(open_page(PAGE, PROMPT), "qwen2")
    at.selectbox(key="attention.head").set_value(4).run()
    assert_clean(at)
    assert chart(at, "head 4 reads kv1")
    assert any("shares its keys and values with heads 3, 5" in c.value for c in at.caption)
