"""Charts of decoding: the beam tree draws every node of tinygpt.readouts.beam_tree once."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.decoding.generation import generate
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.readouts import beam_tree
from tinygpt_app.charts import decoding


def test_beam_tree_draws_every_node_once():
    model = GPT(GPTConfig(vocab_size=32, n_ctx=24, n_embd=16, n_head=2, n_layer=2))
    result = generate(model, [1, 2], 5, strategy="beam", num_beams=2, eos_token_id=4)
    nodes = beam_tree(result.beam_history, result.tokens.tolist())
    fig = decoding.beam_tree(
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


def test_beam_node_names_alternate_above_and_below_by_step():
    """Names of neighbouring nodes on one row overlapped on phones (issue 25): a node's name
    sits above it on even steps and below it on odd ones."""
    steps, ranks = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 1, 0, 1, 0, 1])
    fig = decoding.beam_tree(steps, ranks, np.array([-1, -1, 0, 1, 2, 3]), ["running"] * 6,
                             ["a", "b", "c", "d", "e", "f"], np.zeros(6), np.zeros(6, bool), "t")
    (nodes,) = [tr for tr in fig.data if tr.name == "running"]
    side = {(int(x), int(y)): pos for x, y, pos in zip(nodes.x, nodes.y, nodes.textposition,
                                                       strict=True)}
    for rank in (0, 1):
        assert side[0, rank] != side[1, rank] != side[2, rank]
    assert nodes.cliponaxis is False


def test_beam_node_names_only_where_they_fit():
    """A token longer than two steps of a phone's tree is not written beside its node (it ran
    into its neighbours and out of the figure); its hover still names it."""
    steps = np.arange(20)
    long, short = "<|endoftext|>", "·a"
    texts = [long if s % 2 else short for s in steps]
    fig = decoding.beam_tree(steps, np.zeros(20, int), np.arange(-1, 19), ["running"] * 20, texts,
                             np.zeros(20), np.zeros(20, bool), "t")
    (nodes,) = [tr for tr in fig.data if tr.name == "running"]
    fits = decoding.node_label_chars(20 + 1.2)
    assert len(short) <= fits < len(long)
    assert list(nodes.text) == [short if s % 2 == 0 else "" for s in steps]
    assert [row[0] for row in nodes.customdata] == texts
