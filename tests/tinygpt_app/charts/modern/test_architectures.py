"""tinygpt_app.charts.modern.architectures: one bar series per model, its numbers the counts
given."""

from __future__ import annotations

import numpy as np

from tinygpt.network.config import GPTConfig
from tinygpt.readouts.modern.architecture import PARTS, parameters_by_part
from tinygpt_app.charts.modern.architectures import parameters_by_part as chart


def test_one_series_per_model_with_its_counts_and_a_pattern_each():
    configs = [GPTConfig(vocab_size=64, n_ctx=16, n_embd=16, n_head=4, n_layer=2),
               GPTConfig(vocab_size=64, n_ctx=16, n_embd=16, n_head=4, n_layer=2,
                         norm="rmsnorm", position="rope", mlp="swiglu", n_kv_head=2)]
    counts = np.array([list(parameters_by_part(c).values()) for c in configs])
    fig = chart(["gpt", "llama"], PARTS, counts, "Parameters by part")
    assert [t.name for t in fig.data] == ["gpt", "llama"]
    for trace, row in zip(fig.data, counts, strict=True):
        np.testing.assert_array_equal(np.asarray(trace.x), row)
        assert list(trace.y) == list(PARTS)
    assert fig.data[0].marker.pattern.shape != fig.data[1].marker.pattern.shape
    assert fig.layout.barmode == "group"
