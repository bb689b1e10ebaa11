"""tinygpt.readouts.sampling: checked against a plain Python sort, the decoding filters
themselves, inverse-CDF sampling by pick_token, generate's own draws and the beam history's
parent pointers."""

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig
from tinygpt import readouts as ti
from tinygpt.decoding.generation import generate, pick_token, process_logits
from tinygpt.readouts import beam_tree, beam_tree_window, draw_segments, sorted_distribution


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


# ----------------------------------------------------------------------------- ranking


def test_rank_of():
    order = np.array([4, 0, 3, 1])
    assert [ti.rank_of(order, t) for t in (4, 0, 3, 1, 2)] == [0, 1, 2, 3, None]


@pytest.mark.parametrize("settings", [dict(top_k=5), dict(top_p=0.6), dict(top_k=30, top_p=0.9),
                                      dict(temperature=0.0), dict()])
def test_kept_by_rank_lists_the_kept_tokens_best_first(settings):
    logits = np.round(np.random.default_rng(3).normal(size=60) * 3, 1)  # some exact ties
    pr = process_logits(logits, **{"temperature": 0.7, **settings})
    ranked = ti.kept_by_rank(pr)
    expected = sorted(np.flatnonzero(pr.kept).tolist(), key=lambda i: (-logits[i], i))
    assert ranked.tolist() == expected
    assert ti.kept_by_rank(pr, limit=3).tolist() == expected[:3]


@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, None, 0.9), (0.6, 10, 0.5),
                                                       (1.5, 3, None), (1.0, None, None),
                                                       (0.0, None, 0.9)])
def test_sampling_summary_against_sums_over_the_kept_tokens(temperature, top_k, top_p):
    logits = np.random.default_rng(8).normal(size=80) * 2.5
    pr = process_logits(logits, temperature, top_k, top_p)
    s = ti.sampling_summary(pr)
    kept = [i for i in range(80) if pr.kept[i]]
    assert s.n_kept == len(kept)
    assert s.kept_mass == pytest.approx(sum(pr.probs[i] for i in kept), rel=1e-12)
    assert s.removed_mass == pytest.approx(1.0 - s.kept_mass, abs=1e-15)
    # after top-k, the kept tokens hold nucleus_held; without the least likely one, the rest
    held = sum(pr.probs_after_top_k[i] for i in kept)
    assert s.nucleus_held == pytest.approx(held, rel=1e-9)
    smallest = min(pr.probs_after_top_k[i] for i in kept)
    assert s.nucleus_before == pytest.approx(held - smallest, rel=1e-9, abs=1e-12)
    if top_p is not None and temperature > 0:
        assert s.nucleus_before < top_p <= s.nucleus_held + 1e-12
    # removed by the two cuts, one after the other, leaves the kept mass
    assert (1 - s.top_k_removed) * (1 - s.top_p_removed) == pytest.approx(s.kept_mass)

    def bits(p):
        return -sum(x * np.log2(x) for x in p if x > 0)

    raw = np.exp(logits - logits.max())
    assert s.entropy_model == pytest.approx(bits(raw / raw.sum()), rel=1e-5)
    assert s.entropy_tempered == pytest.approx(bits(pr.probs), rel=1e-5, abs=1e-6)
    assert s.entropy_final == pytest.approx(bits(pr.final_probs), rel=1e-5, abs=1e-6)
    assert s.entropy_uniform == pytest.approx(np.log2(80))


def test_sampling_summary_takes_one_row():
    with pytest.raises(ValueError, match="one row"):
        ti.sampling_summary(process_logits(np.zeros((2, 5))))


# ----------------------------------------------------------------------------- the draw


@pytest.mark.parametrize("seed", [0, 1, 7, 123])
def test_seeded_draw_is_the_first_token_generate_samples(seed):
    """The page's draw and the generator's first draw use the same u, so the same token."""
    model = GPT(GPTConfig(vocab_size=40, n_ctx=12, n_embd=16, n_head=2, n_layer=1), seed=2)
    for p in model.parameters().values():
        p *= 6.0
    prompt = np.array([3, 9, 1])
    result = generate(model, prompt, 1, strategy="sample", temperature=0.9, top_p=0.95,
                      seed=seed)
    pr = process_logits(model.forward(prompt)[-1], 0.9, None, 0.95)
    draw = ti.seeded_draw(pr.final_probs, seed)
    assert draw.u == result.steps[0].u
    assert draw.token == int(result.tokens[0])
    seg = draw.segments
    start, width = seg.starts[draw.segment], seg.widths[draw.segment]
    assert start <= draw.u < start + width + 1e-12
    assert seg.tokens[draw.segment] in (draw.token, -1)


# ----------------------------------------------------------------------------- beam tree


@pytest.mark.parametrize("first, last", [(0, 2), (2, 5), (3, 3), (0, 99)])
def test_beam_tree_window_reindexes_parents(beam_result, first, last):
    nodes = beam_tree(beam_result.beam_history, beam_result.tokens.tolist())
    window = beam_tree_window(nodes, first, last)
    originals = [n for n in nodes if first <= n.step <= last]
    assert len(window) == len(originals)
    for node, original in zip(window, originals, strict=True):
        assert (node.step, node.rank, node.token, node.tokens) == (
            original.step, original.rank, original.token, original.tokens)
        if original.parent >= 0 and nodes[original.parent].step >= first:
            parent, original_parent = window[node.parent], nodes[original.parent]
            assert (parent.step, parent.tokens) == (original_parent.step, original_parent.tokens)
        else:
            assert node.parent == -1


def test_shared_start_counts_the_tokens_every_sequence_begins_with():
    from tinygpt.readouts import shared_start

    assert shared_start([[5, 6, 7, 8], [5, 6, 9], [5, 6, 7]]) == 2
    assert shared_start([[1, 2], [1, 2, 3]]) == 2  # one is the start of the other
    assert shared_start([[1], [2]]) == 0
    assert shared_start([[4, 4, 4]]) == 3 and shared_start([]) == 0
