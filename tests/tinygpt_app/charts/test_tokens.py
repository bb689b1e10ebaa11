"""Charts of the tokens page: the embedding heatmap is the trace's."""

from __future__ import annotations

import numpy as np

from tinygpt_app.charts import tokens


def test_embedding_heatmap_holds_the_sum(run):
    dims = [str(j) for j in range(run.model.config.n_embd)]
    fig = tokens.embedding_heatmap(run.trace["embed.sum"], "E + P", run.labels, dims)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z, np.float64), run.trace["embed.sum"])
    assert list(fig.data[0].x) == dims and list(fig.data[0].y) == run.labels
    assert fig.layout.title.text == "E + P"
