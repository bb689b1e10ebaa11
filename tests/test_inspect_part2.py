"""tinygpt.inspect read-outs for the sampling and decoding pages (app part 2).

Checked against independent routes: a plain Python sort, the decoding filters themselves,
inverse-CDF sampling by `pick_token`, and the beam history's own parent pointers.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt.decoding import generate, pick_token, process_logits
from tinygpt.inspect import beam_tree, draw_segments, sorted_distribution
from tinygpt.model import GPT, GPTConfig


def random_probs(v: int, seed: int, peak: float = 3.0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=v) * peak
    p = np.exp(logits - logits.max())
    return p / p.sum()


def test_sorted_distribution_matches_a_plain_sort_with_ties_by_id() -> None:
    p = np.array([0.1, 0.3, 0.1, 0.4, 0.1])
    d = sorted_distribution(p)
    expected = sorted(range(5), key=lambda i: (-p[i], i))  # ties: lowest id first
    assert d.order.tolist() == expected
    np.testing.assert_allclose(d.probs, p[expected])
    np.testing.assert_allclose(d.cumulative, np.cumsum(p[expected]))
    assert d.cumulative[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("top_p", [0.05, 0.3, 0.5, 0.9, 0.99])
def test_top_p_keeps_the_tokens_up_to_where_the_curve_crosses_p(top_p: float) -> None:
    probs = random_probs(200, seed=int(top_p * 100))
    kept = process_logits(np.log(probs), top_p=top_p).kept
    d = sorted_distribution(probs)
    cutoff = int(np.searchsorted(d.cumulative, top_p - 1e-12)) + 1  # first rank reaching p
    assert kept.sum() == cutoff
    assert set(np.flatnonzero(kept)) == set(d.order[:cutoff].tolist())


def test_draw_segments_tile_the_bar_and_contain_the_drawn_token() -> None:
    probs = random_probs(300, seed=1)
    seg = draw_segments(probs, min_width=0.01)
    assert seg.widths.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(seg.starts, np.concatenate([[0.0], np.cumsum(seg.widths)[:-1]]))
    assert seg.counts.sum() == 300
    assert (probs[seg.tokens[seg.tokens >= 0]] >= 0.01).all()
    for u in np.linspace(0.0, 0.999, 97):
        token, _ = pick_token(probs, u)
        s = int(np.searchsorted(seg.starts, u, side="right")) - 1  # segment holding u
        if seg.tokens[s] >= 0:
            assert seg.tokens[s] == token
        else:
            assert probs[token] < 0.01  # inside a merged run of small tokens


def test_draw_segments_skip_removed_tokens() -> None:
    probs = np.array([0.0, 0.5, 0.0, 0.25, 0.25])
    seg = draw_segments(probs)
    assert seg.tokens.tolist() == [1, 3, 4]
    np.testing.assert_allclose(seg.starts, [0.0, 0.5, 0.75])


@pytest.fixture(scope="module")
def beam_result():
    model = GPT(GPTConfig(vocab_size=32, n_ctx=24, n_embd=16, n_head=2, n_layer=2))
    for p in model.parameters().values():
        p *= 8.0  # peakier distributions
    return generate(model, [1, 2], 8, strategy="beam", num_beams=3, eos_token_id=4)


def test_beam_tree_follows_the_parent_slots(beam_result) -> None:
    history = beam_result.beam_history
    nodes = beam_tree(history, beam_result.tokens.tolist())
    assert len(nodes) == sum(len(s.candidates) for s in history)
    for node in nodes:
        if node.step == 0:
            assert node.parent == -1 and node.tokens == (node.token,)
        else:
            parent = nodes[node.parent]
            assert parent.step == node.step - 1 and parent.status == "running"
            assert node.tokens == (*parent.tokens, node.token)
    for step, record in enumerate(history[:-1]):  # running nodes = the beams that go on
        running = {n.tokens for n in nodes if n.step == step and n.status == "running"}
        assert running == {tuple(r) for r in record.running}


def test_beam_tree_marks_one_winning_path_ending_in_the_result(beam_result) -> None:
    nodes = beam_tree(beam_result.beam_history, beam_result.tokens.tolist())
    path = [n for n in nodes if n.on_winning_path]
    assert [n.step for n in path] == list(range(len(beam_result.tokens)))
    assert path[-1].tokens == tuple(beam_result.tokens.tolist())
    assert path[-1].status == "finished"
    assert path[-1].final_score == pytest.approx(beam_result.score)
