"""Charts of the tokens page: the embedding heatmap is the trace's."""

from __future__ import annotations

import numpy as np

from tinygpt_app.charts import tokens


def test_embedding_heatmap_holds_the_sum(run):
    dims = [str(j) for j in range(run.model.config.n_embd)]
    fig = tokens.embedding_heatmap(run.trace["embed.sum"], "E + P", run.labels, dims)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z, np.float64), run.trace["embed.sum"])
    assert list(fig.data[0].y) == run.labels
    # the columns are the dimensions 0..d-1 themselves: a number axis, not d categories
    assert fig.data[0].x is None and fig.layout.xaxis.type is None
    assert fig.layout.title.text == "E + P"
