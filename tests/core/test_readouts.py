"""tinygpt.readouts: each read-out checked against a plain, independent computation."""

import math

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, Interventions
from tinygpt import readouts as ti
from tinygpt.decoding import generate, pick_token, process_logits
from tinygpt.readouts import beam_tree, draw_segments, sorted_distribution


@pytest.fixture(scope="module")
def model() -> GPT:
    cfg = GPTConfig(vocab_size=50, n_ctx=16, n_embd=16, n_head=2, n_layer=2)
    m = GPT(cfg, seed=3)
    # random LayerNorm scales/shifts so the lens really depends on them
    rng = np.random.default_rng(0)
    m.ln_f.gamma = (1 + 0.3 * rng.standard_normal(16)).astype(np.float32)
    m.ln_f.beta = (0.2 * rng.standard_normal(16)).astype(np.float32)
    m.embedding.embeddings *= 20  # bigger logits, so the top-k order is not all ties
    return m


@pytest.fixture(scope="module")
def run(model):
    ids = np.array([3, 7, 7, 1, 49, 0, 12, 3])
    return model.run_with_trace(ids)


def test_top_k_matches_full_sort():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((4, 30)).astype(np.float32)
    ids, probs = ti.top_k(logits, 5)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref = np.argsort(-p, axis=-1)[:, :5]
    np.testing.assert_array_equal(ids, ref)
    np.testing.assert_allclose(probs, np.take_along_axis(p, ref, -1), rtol=1e-5)
    assert ti.top_k(logits, 100)[0].shape == (4, 30)  # k is clipped to V


def test_entropy_known_values():
    assert ti.entropy(np.full(8, 1 / 8)) == pytest.approx(3.0)  # uniform over 8: 3 bits
    assert ti.entropy(np.array([1.0, 0.0, 0.0])) == pytest.approx(0.0)
    p = np.array([0.5, 0.25, 0.25])
    assert ti.entropy(p, base=math.e) == pytest.approx(-sum(x * math.log(x) for x in p))


def test_kl_divergence():
    p = np.array([0.5, 0.5])
    assert ti.kl_divergence(p, p) == pytest.approx(0.0)
    assert ti.kl_divergence(p, np.array([0.25, 0.75])) == pytest.approx(
        0.5 * math.log2(2) + 0.5 * math.log2(0.5 / 0.75)
    )


def test_residual_norms_by_hand(model, run):
    _, trace = run
    norms = ti.residual_norms(trace, model.config.n_layer)
    names = ["embed.sum", "blocks.0.resid_attn", "blocks.0.resid_ffn"]
    names += ["blocks.1.resid_attn", "blocks.1.resid_ffn"]
    assert norms.shape == (5, 8)
    for s, name in enumerate(names):
        for t in range(8):
            ref = math.sqrt(sum(float(v) ** 2 for v in trace[name][t]))
            assert norms[s, t] == pytest.approx(ref, rel=1e-5)


def test_residual_is_sum_of_writes(model, run):
    """The stream after block 1 = embeddings + every sublayer's output (that is what 'residual'
    means); the write norms are norms of those outputs."""
    _, trace = run
    total = trace["embed.sum"].astype(np.float64)
    for _, name in ti.sublayer_stages(model.config.n_layer):
        total = total + trace[name]
    np.testing.assert_allclose(total, trace["blocks.1.resid_ffn"], atol=1e-5)
    writes = ti.sublayer_write_norms(trace, model.config.n_layer)
    np.testing.assert_allclose(
        writes[3], np.sqrt((trace["blocks.1.ffn.output"] ** 2).sum(-1)), rtol=1e-5
    )


def _lens_by_hand(model, x):
    """Final LayerNorm with x's own statistics, then x @ E^T, written out independently."""
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    h = (x - mu) / np.sqrt(var + model.config.layer_norm_eps) * model.ln_f.gamma + model.ln_f.beta
    return h @ model.embedding.embeddings.astype(np.float64).T


def test_logit_lens_matches_hand_computation(model, run):
    logits, trace = run
    lens = ti.logit_lens(model, trace, k=3, sublayers=True)
    assert lens.ids.shape == (5, 8, 3) and lens.probs.shape == (5, 8, 3)
    assert lens.labels[0] == "embeddings" and len(lens.labels) == 5
    ref = _lens_by_hand(model, trace["blocks.0.resid_attn"])
    np.testing.assert_array_equal(lens.ids[1, :, 0], ref.argmax(-1))
    p = np.exp(ref - ref.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(lens.probs[1, :, 0], p.max(-1), rtol=1e-4)
    # the last stage is the model's own output
    np.testing.assert_array_equal(lens.ids[-1, :, 0], logits.argmax(-1))


def test_logit_lens_per_block(model, run):
    _, trace = run
    lens = ti.logit_lens(model, trace, k=1, sublayers=False)
    assert lens.labels == ["embeddings", "block 0", "block 1"]
    assert lens.ids.shape == (3, 8, 1) and lens.entropy.shape == (3, 8)


def test_next_token_hits_loop(run):
    logits, trace = run
    tokens = trace["tokens"]
    hits = ti.next_token_hits(logits, tokens)
    assert hits.shape == (7,)
    for t in range(7):
        assert hits[t] == (int(np.argmax(logits[t])) == int(tokens[t + 1]))


def test_target_logprobs(run):
    logits, trace = run
    tokens = trace["tokens"]
    lp = ti.target_logprobs(logits, tokens)
    for t in range(7):
        row = logits[t].astype(np.float64)
        ref = row[tokens[t + 1]] - math.log(sum(math.exp(v) for v in row))
        assert lp[t] == pytest.approx(ref, abs=1e-5)


def test_vocab_columns(run):
    logits, _ = run
    cols = ti.vocab_columns(logits, 2)
    ids, _ = ti.top_k(logits, 2)
    assert set(cols.tolist()) == set(ids.reshape(-1).tolist())
    assert np.all(np.diff(cols) > 0)
    few = ti.vocab_columns(logits, 2, max_columns=3)
    assert len(few) <= 3 and set(few.tolist()) <= set(cols.tolist())
    # first choices are kept before any second choice
    firsts = list(dict.fromkeys(ids[:, 0].tolist()))
    assert sorted(few.tolist()) == sorted(firsts[:3]) or len(firsts) < 3


def test_singular_values_match_svd(model):
    s = ti.output_singular_values(model)
    ref = np.linalg.svd(model.output.W_out.astype(np.float64), compute_uv=False)
    assert s.shape == (model.config.n_embd,)  # C of them, not V
    np.testing.assert_allclose(s, ref, rtol=1e-4, atol=1e-4)


def test_tying_check(model, run):
    _, trace = run
    check = ti.tying_check(model, trace, position=4, token=17)
    assert check.tied and ti.weights_are_tied(model)
    np.testing.assert_array_equal(check.column, model.embedding.embeddings[17])
    assert check.dot + check.bias == pytest.approx(check.logit, rel=1e-4, abs=1e-4)


def test_untied_model_is_not_tied():
    cfg = GPTConfig(vocab_size=20, n_ctx=8, n_embd=8, n_head=2, n_layer=1, tie_weights=False,
                    output_bias=True)
    m = GPT(cfg, seed=0)
    m.output.b_out[:] = np.arange(20, dtype=np.float32) * 0.1
    _, trace = m.run_with_trace(np.array([1, 2, 3]))
    check = ti.tying_check(m, trace, position=2, token=5)
    assert not check.tied
    assert check.bias == pytest.approx(0.5)
    assert check.dot + check.bias == pytest.approx(check.logit, rel=1e-4, abs=1e-4)


def test_lens_under_interventions(model):
    """Skipping every sublayer leaves the stream at the embeddings, so all stages read alike."""
    iv = Interventions(skip_attn=frozenset({0, 1}), skip_ffn=frozenset({0, 1}))
    _, trace = model.run_with_trace(np.array([1, 2, 3]), interventions=iv)
    lens = ti.logit_lens(model, trace, k=1)
    for s in range(1, 3):
        np.testing.assert_array_equal(lens.ids[s], lens.ids[0])


def test_logit_lens_positions_subset(model, run):
    _, trace = run
    full = ti.logit_lens(model, trace, k=2, sublayers=True)
    part = ti.logit_lens(model, trace, k=2, sublayers=True, positions=[1, 5, 6])
    np.testing.assert_array_equal(part.ids, full.ids[:, [1, 5, 6]])
    np.testing.assert_allclose(part.probs, full.probs[:, [1, 5, 6]], rtol=1e-5)


def test_attention_with_mask(model, run):
    _, trace = run
    w = ti.attention_with_mask(trace, layer=1, head=0)
    T = w.shape[0]
    above = np.triu(np.ones((T, T), bool), k=1)
    assert np.isnan(w[above]).all()
    np.testing.assert_allclose(w[~above], trace["blocks.1.attn.weights"][0][~above])
    np.testing.assert_allclose(np.nansum(w, axis=-1), 1.0, rtol=1e-5)
    _, open_trace = model.run_with_trace(np.array([1, 2, 3]),
                                         interventions=Interventions(no_causal_mask=True))
    assert not np.isnan(ti.attention_with_mask(open_trace, 0, 1)).any()


def test_probabilities_sum_to_one():
    p = ti.probabilities(np.array([[1000.0, 0.0], [0.0, 0.0]]))
    np.testing.assert_allclose(p, [[1.0, 0.0], [0.5, 0.5]])


# read-outs for the sampling and decoding pages: checked against a plain Python sort, the
# decoding filters themselves, inverse-CDF sampling by pick_token, and the beam history's
# parent pointers
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
