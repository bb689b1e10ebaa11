"""tinygpt.readouts.lesson: the numbers the guided lesson states, checked against loops over
the trace and a separate forward pass."""

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig
from tinygpt.readouts import lesson as lr


@pytest.fixture(scope="module")
def model() -> GPT:
    return GPT(GPTConfig(vocab_size=50, n_ctx=16, n_embd=16, n_head=2, n_layer=3), seed=5)


@pytest.fixture(scope="module")
def run(model):
    return model.run_with_trace(np.array([3, 7, 7, 1, 49, 0, 12, 3]))


@pytest.mark.parametrize("query", range(8))
def test_strongest_look_is_the_largest_weight_on_an_earlier_token(model, run, query):
    _, trace = run
    cfg = model.config
    best = (-1.0, None)
    for layer in range(cfg.n_layer):
        for head in range(cfg.n_head):
            for key in range(query) if query else [0]:
                w = float(trace[f"blocks.{layer}.attn.weights"][head, query, key])
                if w > best[0]:
                    best = (w, (layer, head, key))
    look = lr.strongest_look(trace, cfg.n_layer, cfg.n_head, query)
    assert (look.layer, look.head, look.key) == best[1]
    assert look.weight == pytest.approx(best[0])
    assert look.key < query or query == 0


def test_residual_growth_follows_one_token_down_the_stream(model, run):
    _, trace = run
    L, t = model.config.n_layer, 5
    growth = lr.residual_growth(trace, L, t)
    names = ["embed.sum"] + [f"blocks.{i}.{s}" for i in range(L)
                             for s in ("resid_attn", "resid_ffn")]
    expected = [float(np.sqrt((trace[name][t].astype(np.float64) ** 2).sum())) for name in names]
    np.testing.assert_allclose(growth.norms, expected, rtol=1e-5)
    writes = [float(np.linalg.norm(trace[f"blocks.{i}.{s}.output"][t])) for i in range(L)
              for s in ("attn", "ffn")]
    np.testing.assert_allclose(growth.writes, writes, rtol=1e-5)
    assert growth.write_labels[growth.biggest] == ["attn 0", "ffn 0", "attn 1", "ffn 1",
                                                   "attn 2", "ffn 2"][int(np.argmax(writes))]
    assert growth.first == pytest.approx(expected[0]) and growth.last == pytest.approx(
        expected[-1])


def test_logit_spread_of_a_separate_forward(model, run):
    logits, _ = run
    row = model.forward(np.array([3, 7, 7, 1, 49, 0, 12, 3]))[-1].astype(np.float64)
    spread = lr.logit_spread(logits[-1])
    assert spread.top == pytest.approx(max(row), rel=1e-5)
    assert spread.bottom == pytest.approx(min(row), rel=1e-5)
    assert row[spread.top_token] == max(row) and row[spread.bottom_token] == min(row)
    assert spread.mean == pytest.approx(sum(row) / len(row), abs=1e-5)


@pytest.mark.parametrize("position", [0, 4, 7])
def test_confidence_against_separate_forwards_of_each_prefix(model, position):
    """Top-1 at a position and one before it, each from its own forward of the prefix (a
    causal model's row t depends only on tokens 0..t), softmax written out by hand."""
    ids = np.array([3, 7, 7, 1, 49, 0, 12, 3])
    logits, _ = model.run_with_trace(ids)
    found = lr.confidence(logits, position)

    def by_hand(t: int) -> tuple[int, float]:
        row = model.forward(ids[:t + 1])[-1].astype(np.float64)
        e = [np.exp(z - max(row)) for z in row]
        best = int(np.argmax(row))
        return best, e[best] / sum(e)

    token, p = by_hand(position)
    assert found.token == token and found.p == pytest.approx(p, rel=1e-5)
    if position == 0:
        assert found.before_token is None and found.before_p is None
    else:
        before_token, before_p = by_hand(position - 1)
        assert found.before_token == before_token
        assert found.before_p == pytest.approx(before_p, rel=1e-5)
