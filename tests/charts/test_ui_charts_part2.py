"""Chart builders and helpers of app part 2 (ui.py): each figure holds exactly the numbers it
claims to show; export settings; URL value parsers."""

from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="ui.py imports streamlit")
pd = pytest.importorskip("pandas", reason="the CSV export needs pandas")

import ui  # noqa: E402
from tinygpt.decoding import generate, pick_token  # noqa: E402
from tinygpt.model import GPT, GPTConfig  # noqa: E402
from tinygpt.readouts import beam_tree, draw_segments  # noqa: E402


def test_sampling_bars_split_kept_and_removed_in_rank_order():
    labels = ["a", "b", "c", "d"]
    probs = np.array([0.4, 0.3, 0.2, 0.1])
    kept = np.array([True, True, False, False])
    fig = ui.sampling_bars_figure(labels, probs, kept, "t", picked=1)
    by_name = {tr.name: tr for tr in fig.data}
    assert list(by_name["kept"].x) == ["a", "b"] and list(by_name["removed"].x) == ["c", "d"]
    np.testing.assert_allclose(by_name["kept"].y, [0.4, 0.3], rtol=1e-6)
    np.testing.assert_allclose(by_name["removed"].y, [0.2, 0.1], rtol=1e-6)
    assert list(fig.layout.xaxis.categoryarray) == labels  # bars stay in rank order
    assert fig.layout.annotations[0].x == "b"  # the picked token is pointed at


def test_cumulative_curve_marks_the_p_line_and_the_cutoff():
    cumulative = np.cumsum([0.5, 0.3, 0.1, 0.05, 0.05])
    fig = ui.cumulative_figure(cumulative, 0.85, 2, "t")
    kept, removed = fig.data
    np.testing.assert_allclose(kept.y, cumulative[:2], rtol=1e-6)
    assert list(kept.x) == [1, 2] and list(removed.x) == [2, 3, 4, 5]
    lines = fig.layout.shapes
    assert any(s.y0 == s.y1 == 0.85 for s in lines)  # the top-p line
    assert any(s.x0 == s.x1 == 2.5 for s in lines)  # the cutoff, between ranks 2 and 3


def test_renormalised_bars_hold_both_distributions():
    fig = ui.renormalised_figure(["x", "y"], np.array([0.3, 0.2]), np.array([0.6, 0.4]), "t")
    np.testing.assert_allclose(fig.data[0].y, [0.3, 0.2], rtol=1e-6)
    np.testing.assert_allclose(fig.data[1].y, [0.6, 0.4], rtol=1e-6)


def test_draw_bar_segments_and_the_u_line():
    probs = np.array([0.1, 0.002, 0.003, 0.595, 0.3])
    seg = draw_segments(probs, 0.005)
    u = 0.42
    token, _ = pick_token(probs, u)
    picked = int(np.searchsorted(seg.starts, u, side="right")) - 1
    labels = [str(t) if t >= 0 else "… small" for t in seg.tokens]
    fig = ui.draw_bar_figure(seg.starts, seg.widths, labels, u, picked, "t")
    bar = fig.data[0]
    np.testing.assert_allclose(np.asarray(bar.base, float), seg.starts, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(bar.x, float), seg.widths, rtol=1e-6)
    assert seg.tokens[picked] == token == 3
    assert bar.marker.color[picked] == ui.PICKED_COLOUR
    assert bar.marker.color[1] == ui.FADED  # the merged small tokens are grey
    assert fig.layout.shapes[0].x0 == fig.layout.shapes[0].x1 == u


def test_beam_tree_figure_draws_every_node_once():
    model = GPT(GPTConfig(vocab_size=32, n_ctx=24, n_embd=16, n_head=2, n_layer=2))
    result = generate(model, [1, 2], 5, strategy="beam", num_beams=2, eos_token_id=4)
    nodes = beam_tree(result.beam_history, result.tokens.tolist())
    fig = ui.beam_tree_figure(
        np.array([n.step for n in nodes]), np.array([n.rank for n in nodes]),
        np.array([n.parent for n in nodes]), [n.status for n in nodes],
        [str(n.token) for n in nodes], np.array([n.score for n in nodes]),
        np.array([n.on_winning_path for n in nodes]), "t")
    markers = [tr for tr in fig.data if tr.mode == "markers+text" and tr.text[0] != "prompt"]
    assert sum(len(tr.x) for tr in markers) == len(nodes)
    drawn = sorted(float(s) for tr in markers for s in tr.customdata[:, 1])
    assert drawn == pytest.approx(sorted(n.score for n in nodes))
    winner = next(tr for tr in fig.data if tr.name == "returned hypothesis")
    assert sum(x is None for x in winner.x) == len(result.tokens)  # one edge per token


def test_loss_curve_holds_train_and_validation_losses():
    fig = ui.loss_curve_figure(np.arange(1, 5), np.array([6.0, 5.5, 5.0, 4.8]), np.array([2, 4]),
                               np.array([5.6, 4.9]), "t", floor=np.log(512))
    np.testing.assert_allclose(fig.data[0].y, [6.0, 5.5, 5.0, 4.8], rtol=1e-6)
    np.testing.assert_allclose(fig.data[1].y, [5.6, 4.9], rtol=1e-6)
    assert fig.layout.shapes[0].y0 == pytest.approx(np.log(512))


def test_png_button_and_csv_export():
    config = ui.plot_config("my_chart")
    assert config["displayModeBar"] is True
    assert config["toImageButtonOptions"]["format"] == "png"
    assert config["toImageButtonOptions"]["filename"] == "my_chart"
    table = pd.DataFrame({"token": ["a", "b,c"], "p": [0.25, 0.75]})
    back = pd.read_csv(io.BytesIO(ui.csv_bytes(table)))
    assert back.equals(table)


@pytest.mark.parametrize("raw, ok", [("0.5", True), ("3", True), ("-1", False), ("nan", False),
                                     ("abc", False), ("3.5", False)])
def test_float_parser_refuses_impossible_values(raw, ok):
    parse = ui.in_range(0.0, 3.0)
    if ok:
        assert parse(raw) == float(raw)
    else:
        with pytest.raises(ValueError):
            parse(raw)


def test_int_and_choice_parsers():
    assert ui.in_range(0, 10, int)("7") == 7
    with pytest.raises(ValueError):
        ui.in_range(0, 10, int)("2.5")
    assert ui.one_of(["greedy", "sample"])("sample") == "sample"
    with pytest.raises(ValueError):
        ui.one_of(["greedy", "sample"])("beam")
