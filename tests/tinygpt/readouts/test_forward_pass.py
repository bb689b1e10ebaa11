"""tinygpt.readouts.forward_pass: each read-out checked against a plain, independent
computation (loops, hand-written formulas, a separate forward pass)."""

import math

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, Interventions
from tinygpt import readouts as ti


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


def test_tying_check_rebuilt_and_difference(model, run):
    _, trace = run
    check = ti.tying_check(model, trace, position=2, token=9)
    by_hand = sum(float(a) * float(b) for a, b in zip(trace["ln_f.output"][2],
                                                      model.embedding.embeddings[9], strict=True))
    assert check.rebuilt == pytest.approx(by_hand, rel=1e-6, abs=1e-6)
    assert check.difference == pytest.approx(check.rebuilt - check.logit, abs=1e-12)
    assert abs(check.difference) < 1e-4


def test_query_key_check_difference_and_weight(model, run):
    _, trace = run
    check = ti.query_key_check(trace, layer=1, head=1, query=5, key=2)
    q, k = trace["blocks.1.attn.q"][1, 5], trace["blocks.1.attn.k"][1, 2]
    by_hand = sum(float(a) * float(b) for a, b in zip(q, k, strict=True)) / len(q) ** 0.5
    assert check.scaled == pytest.approx(by_hand, rel=1e-9)
    assert abs(check.difference) < 1e-4
    # the weight is softmax over the visible scores of that row, recomputed here
    row = trace["blocks.1.attn.scores"][1, 5, :6].astype(np.float64)
    assert check.weight == pytest.approx(math.exp(row[2]) / sum(math.exp(v) for v in row),
                                         rel=1e-5)


def test_shift_by_one_against_a_loop(run):
    logits, trace = run
    tokens = trace["tokens"]
    s = ti.shift_by_one(logits, tokens)
    assert s.targets.shape == s.guesses.shape == s.logprobs.shape == s.hits.shape == (7,)
    surprise = 0.0
    for t in range(7):
        row = logits[t].astype(np.float64)
        z = sum(math.exp(v) for v in row)
        assert s.targets[t] == tokens[t + 1]
        assert s.guesses[t] == max(range(len(row)), key=lambda i: (row[i], -i))  # first max
        assert s.probs[t] == pytest.approx(math.exp(row[tokens[t + 1]]) / z, rel=1e-5)
        assert s.hits[t] == (s.guesses[t] == tokens[t + 1])
        surprise -= math.log(math.exp(row[tokens[t + 1]]) / z)
    assert s.loss == pytest.approx(surprise / 7, rel=1e-5)
    assert s.n_hits == sum(bool(h) for h in s.hits)


def test_shift_by_one_of_one_token_is_empty(run):
    logits, trace = run
    s = ti.shift_by_one(logits[:1], trace["tokens"][:1])
    assert s.hits.shape == (0,) and s.n_hits == 0 and math.isnan(s.loss)


def test_shift_by_one_loss_is_the_training_loss(model, run):
    """Mean surprise of one sequence = the cross-entropy training computes for it."""
    logits, trace = run
    ids = trace["tokens"]
    loss, _ = model.astype(np.float64).loss_and_grads(ids[None, :-1], ids[None, 1:])
    assert ti.shift_by_one(logits, ids).loss == pytest.approx(loss, rel=1e-5)


@pytest.mark.parametrize("n, position, size, expected", [
    (30, 0, 24, list(range(0, 24))),
    (30, 23, 24, list(range(0, 24))),
    (30, 24, 24, list(range(1, 25))),
    (30, 29, 24, list(range(6, 30))),
    (10, 7, 24, list(range(10))),
    (10, 9, 1, [9]),
])
def test_position_window(n, position, size, expected):
    window = ti.position_window(n, position, size)
    assert window == expected
    assert position in window and len(window) == min(n, size)


def test_position_window_rejects_a_position_outside():
    with pytest.raises(ValueError, match="outside"):
        ti.position_window(5, 5, 3)


def test_visible_keys_follow_the_mask(model, run):
    _, trace = run
    for query in range(8):
        assert ti.visible_keys(trace, 0, 1, query).tolist() == list(range(query + 1))
    _, open_trace = model.run_with_trace(np.array([1, 2, 3, 4]),
                                         interventions=Interventions(no_causal_mask=True))
    assert ti.visible_keys(open_trace, 1, 0, 0).tolist() == [0, 1, 2, 3]


def test_layer_norm_names_and_lookup(model):
    names = ti.layer_norm_names(2)
    assert names == ["blocks.0.ln1", "blocks.0.ln2", "blocks.1.ln1", "blocks.1.ln2", "ln_f"]
    assert ti.find_layer_norm(model, "blocks.1.ln2") is model.blocks[1].ln2
    assert ti.find_layer_norm(model, "ln_f") is model.ln_f
    for bad in ("blocks.2.ln1", "blocks.0.attn", "ln_g", "blocks.-1.ln1", ""):
        with pytest.raises(ValueError, match="no LayerNorm"):
            ti.find_layer_norm(model, bad)


@pytest.mark.parametrize("name", ["blocks.0.ln1", "blocks.1.ln2", "ln_f"])
def test_layer_norm_statistics_from_the_input(model, run, name):
    """mean, variance, sigma and the denominator, recomputed from the norm's input x."""
    _, trace = run
    stats = ti.layer_norm_statistics(model, trace, name)
    x = trace[f"{name}.input"].astype(np.float64)  # (T, C)
    C = x.shape[1]
    for t in range(x.shape[0]):
        mu = sum(x[t]) / C
        var = sum((v - mu) ** 2 for v in x[t]) / C
        assert stats.mean[t] == pytest.approx(mu, rel=1e-5, abs=1e-6)
        assert stats.var[t] == pytest.approx(var, rel=1e-4)
        assert stats.std[t] == pytest.approx(math.sqrt(var), rel=1e-4)
        assert stats.denominator[t] == pytest.approx(math.sqrt(var + stats.eps), rel=1e-4)
    # what the model divided by: x_hat = (x - mu) / denominator
    np.testing.assert_allclose((x - stats.mean[:, None]) / stats.denominator[:, None],
                               trace[f"{name}.normalized"], atol=1e-4)
    norm = ti.find_layer_norm(model, name)
    assert stats.gamma is norm.gamma and stats.beta is norm.beta


def test_prediction_change_against_separate_softmaxes():
    rng = np.random.default_rng(5)
    before, after = rng.normal(size=40) * 3, rng.normal(size=40) * 3
    change = ti.prediction_change(before, after, k=4)
    p = np.exp(before - before.max())
    p /= p.sum()
    q = np.exp(after - after.max())
    q /= q.sum()
    union = set(np.argsort(-p)[:4].tolist()) | set(np.argsort(-q)[:4].tolist())
    assert set(change.tokens.tolist()) == union
    assert change.tokens.tolist() == sorted(union, key=lambda i: -p[i])
    np.testing.assert_allclose(change.p_before, p[change.tokens], rtol=1e-9)
    np.testing.assert_allclose(change.p_after, q[change.tokens], rtol=1e-9)
    assert (change.top_before, change.top_after) == (int(p.argmax()), int(q.argmax()))
    assert change.changed == (p.argmax() != q.argmax())
    assert change.p_top_after == pytest.approx(q.max())
    assert change.kl_bits == pytest.approx(float(np.sum(p * np.log2(p / q))), rel=1e-5)
    assert change.entropy_before == pytest.approx(float(-np.sum(p * np.log2(p))), rel=1e-5)


def test_prediction_change_of_identical_rows():
    row = np.array([2.0, 1.0, 0.5, -1.0])
    change = ti.prediction_change(row, row, k=2)
    assert not change.changed and change.kl_bits == pytest.approx(0.0, abs=1e-7)
    assert change.tokens.tolist() == [0, 1]


def test_query_key_check_on_rotated_grouped_heads():
    """Llama-shaped: the score is the rotated query of head 5 times the rotated key of its
    shared key/value head 5 // 3 = 1, turned by hand here with cos and sin of the positions."""
    cfg = GPTConfig(vocab_size=50, n_ctx=16, n_embd=24, n_head=6, n_layer=1, norm="rmsnorm",
                    position="rope", rope_theta=100.0, n_kv_head=2, mlp="swiglu")
    model = GPT(cfg, seed=5)
    _, trace = model.run_with_trace(np.array([3, 7, 7, 1, 49, 0, 12, 3]))
    check = ti.query_key_check(trace, layer=0, head=5, query=6, key=2)

    def turned(x, p):  # x (hs,) at position p: pairs (j, j + hs/2) by p * theta^(-2j/hs)
        half = len(x) // 2
        angle = p * 100.0 ** (-np.arange(half) * 2 / len(x))
        a, b = x[:half], x[half:]
        return np.concatenate([a * np.cos(angle) - b * np.sin(angle),
                               b * np.cos(angle) + a * np.sin(angle)])

    q = turned(trace["blocks.0.attn.q"][5, 6].astype(np.float64), 6)
    k = turned(trace["blocks.0.attn.k"][1, 2].astype(np.float64), 2)
    assert check.scaled == pytest.approx(q @ k / 2.0, rel=1e-5)
    assert abs(check.difference) < 1e-5
    with pytest.raises(ValueError, match="RMSNorm"):
        ti.layer_norm_statistics(model, trace, "blocks.0.ln1")


@pytest.mark.parametrize("v", [2, 50, 50_257])
def test_uniform_entropy_is_the_entropy_of_the_even_guess(v):
    even = np.full(v, 1.0 / v)
    assert ti.uniform_entropy(v) == pytest.approx(float(ti.entropy(even)), rel=1e-6)
    assert ti.uniform_entropy(v) == pytest.approx(math.log2(v), rel=1e-12)
    assert ti.uniform_entropy(v, math.e) == pytest.approx(math.log(v), rel=1e-12)  # nats
