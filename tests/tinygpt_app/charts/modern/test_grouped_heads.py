"""Charts of charts/grouped_heads.py: the sharing drawn is the model's grouping, the bars are
its KV-cache bytes."""

from __future__ import annotations

import numpy as np

from tests.tinygpt.readouts.modern_models import LLAMA, random_model
from tinygpt.readouts.modern.grouped_heads import head_groups
from tinygpt_app.charts.modern import grouped_heads as charts


def test_every_query_head_is_joined_to_its_key_value_head():
    groups = head_groups(random_model({**LLAMA, "n_embd": 24, "n_head": 6, "n_kv_head": 2}))
    fig = charts.sharing(groups.kv_head_of, "t")
    lines, queries, kv = fig.data
    assert list(queries.text) == [f"q{h}" for h in range(6)]
    assert list(kv.text) == ["kv0", "kv1"]
    np.testing.assert_allclose(kv.x, [1.0, 4.0])  # each under the middle of its group
    ends = [(lines.x[i], lines.x[i + 1]) for i in range(0, len(lines.x), 3)]
    assert ends == [(h, kv.x[groups.kv_head_of[h]]) for h in range(6)]
    # a query head has the colour of its key/value head
    assert list(queries.marker.color) == [kv.marker.color[g] for g in groups.kv_head_of]


def test_bytes_bars_are_the_readouts():
    groups = head_groups(random_model(LLAMA))
    values = [groups.bytes_per_token, groups.bytes_per_token_one_kv_per_query]
    fig = charts.bytes_per_token(["this", "one per query"], values, "t")
    np.testing.assert_array_equal(fig.data[0].x, values)
    assert fig.data[0].text[0] == f"{values[0]:,} bytes"
