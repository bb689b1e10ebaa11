"""tinygpt.readouts.surprise: -log p of each real next token; its mean is the training loss."""

from pathlib import Path

import numpy as np
import pytest

from tinygpt import GPT, GPTConfig, load, surprise
from tinygpt.network.functional import cross_entropy, token_nll

ROOT = Path(__file__).resolve().parents[3]


def test_mean_is_the_trainers_cross_entropy_on_the_shipped_model():
    model, tok = load(ROOT / "models" / "shakespeare.npz")
    ids = np.array(tok.encode("ROMEO:\nBut soft, what light through yonder window breaks?"))
    s = surprise(model, ids)
    assert s.shape == (len(ids) - 1,)
    # the loss the trainer minimises, on the same text: inputs ids[:-1], targets ids[1:]
    loss, _ = cross_entropy(model.forward(ids[None, :-1]), ids[None, 1:])
    assert float(s.mean()) == pytest.approx(loss, abs=1e-5)
    loss_from_training, _ = model.loss_and_grads(ids[None, :-1], ids[None, 1:])
    assert float(s.mean()) == pytest.approx(loss_from_training, abs=1e-5)
    np.testing.assert_allclose(s, token_nll(model.forward(ids[:-1]), ids[1:]), atol=1e-5)


def test_each_entry_by_hand():
    model = GPT(GPTConfig(vocab_size=30, n_ctx=12, n_embd=8, n_head=2, n_layer=1), seed=2)
    ids = np.array([4, 9, 9, 0, 29, 3])
    logits = model.forward(ids).astype(np.float64)
    expected = [
        -(logits[t, ids[t + 1]] - np.log(np.exp(logits[t]).sum())) for t in range(len(ids) - 1)
    ]
    np.testing.assert_allclose(surprise(model, ids), expected, rtol=1e-6)
    np.testing.assert_array_equal(surprise(model, ids, logits=model.forward(ids)),
                                  surprise(model, ids))  # fmt: skip
    assert surprise(model, ids[:1]).shape == (0,)  # one token: nothing was predicted
    with pytest.raises(ValueError, match="logits must have shape"):
        surprise(model, ids, logits=logits[:-1])
    with pytest.raises(ValueError, match="vocabulary"):
        surprise(model, [1, 30])
