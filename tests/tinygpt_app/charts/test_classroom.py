"""tinygpt_app.charts.classroom: the class's guesses beside the model's probabilities, with the
guesses shown as typed (never as Plotly's HTML)."""

from __future__ import annotations

import numpy as np

from tinygpt_app.charts import classroom


def test_two_bars_per_token_hold_the_given_shares():
    tokens = [" the", "<br>", " a"]
    share, probs = [0.5, 0.25, 0.0], [0.1, 0.02, 0.6]
    fig = classroom.guesses_vs_model(tokens, share, probs, "Round 1", model_name="tiny")
    the_class, model = fig.data
    assert (the_class.name, model.name) == ("the class", "tiny")
    # escaped once (common.plotly_text): Plotly shows "<br>" as typed, no line break
    assert list(the_class.y) == [" the", "&lt;br&gt;", " a"] == list(model.y)
    np.testing.assert_allclose(np.asarray(the_class.x), share, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(model.x), probs, rtol=1e-6)
    assert list(the_class.text) == ["50%", "25%", "0%"]
    assert fig.layout.xaxis.range[1] >= 0.6  # the largest bar fits


def test_no_guesses_yet_still_draws():
    fig = classroom.guesses_vs_model([], [], [], "Round 2")
    assert len(fig.data) == 2 and len(fig.data[0].x) == 0


def test_labels_and_values_have_room_inside_the_figure():
    """The class reveal cut " picked" to "icked" and "3.6%" to ".6%" (issue 25): the token
    labels take the margin they need, the values sit outside their bars and are not clipped at
    the plot's edge, and the right margin holds the longest value."""
    fig = classroom.guesses_vs_model([" picked", " the"], [0.5, 0.0], [0.036, 0.4], "Round 1")
    assert fig.layout.yaxis.automargin and fig.layout.xaxis.automargin
    for trace in fig.data:
        assert trace.cliponaxis is False
        assert trace.textposition == "outside"
    longest = max(len(t) for trace in fig.data for t in trace.text)  # "40.0%"
    assert fig.layout.margin.r >= 8 * longest
