"""Page 6, softmax and sampling: each control moves the shown numbers the right way (a lower
temperature lowers the entropy, a smaller top-p keeps fewer tokens, the same seed draws the same
token); links reproduce the controls; impossible link values are refused with a message."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    assert_clean,
    chart,
    chart_title,
    metric,
    open_page,
    query_param,
    title_of,
)

pytestmark = pytest.mark.usefixtures("tiny_models")
SAMPLING = "pages/decoding/7_Softmax_and_sampling.py"


def test_lower_temperature_lowers_the_entropy():
    at = open_page(SAMPLING, NORMAL)
    at.slider(key="sampling.temperature").set_value(1.5).run()
    hot = metric(at, "Entropy at T")
    at.slider(key="sampling.temperature").set_value(0.5).run()
    assert_clean(at)
    cold = metric(at, "Entropy at T")
    assert cold < hot
    assert metric(at, "Entropy, T = 1") == pytest.approx(metric(at, "Entropy, T = 1"))
    assert query_param(at, "temperature") == "0.5"


def test_smaller_top_p_keeps_fewer_tokens():
    at = open_page(SAMPLING, NORMAL, top_p="0.9")
    wide = metric(at, "Tokens kept")
    at.slider(key="sampling.top_p").set_value(0.3).run()
    assert_clean(at)
    narrow = metric(at, "Tokens kept")
    assert narrow < wide
    assert "0.3" in chart_title(at, "Cumulative") or narrow > 0
    at.number_input(key="sampling.top_k").set_value(5).run()
    kept = metric(at, "Tokens kept")
    assert kept <= 5
    assert f"Renormalised: {int(kept)} kept token(s)" in chart_title(at, "Renormalised")


def test_the_renormalised_chart_says_when_it_shows_only_the_top_kept_tokens():
    at = open_page(SAMPLING, NORMAL, top_p="1", top_k="0")  # nothing cut: every token kept
    kept = int(metric(at, "Tokens kept"))
    shown = len(chart(at, "Renormalised")["data"][0]["x"])
    assert shown < kept
    assert f"top {shown} of {kept:,} kept" in chart_title(at, "Renormalised")


def test_the_same_seed_draws_the_same_token():
    first = chart_title(open_page(SAMPLING, NORMAL, seed="7"), "The draw")
    again = chart_title(open_page(SAMPLING, NORMAL, seed="7"), "The draw")
    assert first == again  # same u, same token
    other = chart_title(open_page(SAMPLING, NORMAL, seed="8"), "The draw")
    assert other != first  # another u


def test_draw_again_moves_the_seed():
    at = open_page(SAMPLING, NORMAL, seed="3")
    at.button(key="sampling.redraw").click().run()
    assert_clean(at)
    assert at.number_input(key="sampling.seed").value == 4 and query_param(at, "seed") == "4"


def test_temperature_zero_is_greedy_and_explained():
    at = open_page(SAMPLING, NORMAL, temperature="0")
    assert_clean(at)
    assert any("greedy" in i.value for i in at.info)
    assert metric(at, "Tokens kept") == 1


def test_an_impossible_value_in_the_link_is_refused_with_a_message():
    at = open_page(SAMPLING, NORMAL, temperature="-1", top_p="abc")
    assert not at.exception
    warnings = " ".join(w.value.replace("\\", "") for w in at.warning)  # markdown escapes
    # the value itself is not repeated (anyone can write a link), only what was wrong with it
    assert "temperature is outside 0 … 3" in warnings and "top_p is not a number" in warnings
    assert at.slider(key="sampling.temperature").value == 1.0


def test_controls_come_from_the_link_and_go_back_into_it():
    at = open_page(SAMPLING, NORMAL, temperature="0.7", top_k="40", top_p="0.5", seed="11", pos="2")
    assert_clean(at)
    assert at.slider(key="sampling.temperature").value == pytest.approx(0.7)
    assert at.number_input(key="sampling.top_k").value == 40
    assert at.slider(key="sampling.top_p").value == pytest.approx(0.5)
    assert "seed 11" in chart_title(at, "The draw")
    assert any("(position 2," in m.value for m in at.markdown)


def test_projected_the_controls_sit_beside_the_two_charts_they_change():
    """Projector mode: one row of three columns, the four controls in the first, the ranked
    bars and the cumulative curve in the other two (a browser test measures the screen)."""
    at = open_page(SAMPLING, NORMAL, projector="1", top_p="0.5")
    assert_clean(at)
    side, ranked, curve = at.main.columns[:3]
    assert [w.label for w in side.slider] == ["Temperature T", "Top-p (1 = off)"]
    assert [w.label for w in side.number_input] == ["Top-k (0 = off)", "Seed"]
    def title(column) -> str:
        return title_of(json.loads(column.get("plotly_chart")[0].proto.spec))

    assert title(ranked).startswith("Top ") and title(curve).startswith("Cumulative")
    kept = int(metric(at, "Tokens kept"))
    bars = chart(at, "Top ")
    shown = sum(len(trace["x"]) for trace in bars["data"])
    assert shown == min(max(kept + 5, 20), 40)  # the cut shows: more bars than kept tokens
    assert all(not m.value.endswith("bits") for m in at.metric)  # the unit is in the label


def test_at_temperature_one_the_entropy_is_said_once():
    """At T = 1 the tempered distribution is the model's own: one entropy, not two equal ones."""
    at = open_page(SAMPLING, NORMAL)
    labels = [m.label for m in at.metric]
    assert "Entropy, T = 1 (bits)" in labels
    assert not any(label.startswith("Entropy at T") for label in labels)
