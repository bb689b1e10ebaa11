"""Training: AdamW (by hand and against PyTorch), clipping, schedule, Trainer, resume."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from tinygpt.network.functional import token_nll
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.train.trainer import (
    AdamW,
    TrainConfig,
    Trainer,
    clip_grad_norm,
    evaluate_text,
    get_batch,
    load_trainer_state,
    loss_curves,
    lr_schedule,
    save_trainer_state,
)

# ----------------------------------------------------------------------------- AdamW


def test_adamw_first_step_by_hand():
    """Step 1: m_hat = g and v_hat = g**2, so the update is lr * g / (|g| + eps) = lr * sign(g)."""
    w = np.array([[1.0, -2.0], [0.5, 3.0]])
    b = np.array([0.25, -0.75])
    g_w = np.array([[0.1, -0.2], [0.0, 4.0]])
    g_b = np.array([-3.0, 0.01])
    opt = AdamW({"w": w, "b": b}, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.5)
    opt.step({"w": g_w, "b": g_b})
    w0 = np.array([[1.0, -2.0], [0.5, 3.0]])
    expected_w = w0 * (1 - 0.1 * 0.5) - 0.1 * g_w / (np.abs(g_w) + 1e-8)
    expected_b = np.array([0.25, -0.75]) - 0.1 * g_b / (np.abs(g_b) + 1e-8)  # no decay
    np.testing.assert_allclose(w, expected_w, rtol=1e-12)
    np.testing.assert_allclose(b, expected_b, rtol=1e-12)


def test_adamw_second_step_by_hand():
    p = np.array([2.0])
    opt = AdamW({"p": p}, lr=0.01, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.0)
    opt.step({"p": np.array([1.0])})
    opt.step({"p": np.array([3.0])})
    m = 0.8 * 0.2 * 1.0 + 0.2 * 3.0
    v = 0.9 * 0.1 * 1.0 + 0.1 * 9.0
    m_hat, v_hat = m / (1 - 0.8**2), v / (1 - 0.9**2)
    step1 = 0.01 * 1.0 / (1.0 + 1e-6)
    assert p[0] == pytest.approx(2.0 - step1 - 0.01 * m_hat / (math.sqrt(v_hat) + 1e-6), rel=1e-14)


def test_adamw_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is the reference AdamW")
    rng = np.random.default_rng(0)
    shapes = {"W": (5, 3), "b": (3,), "gamma": (3,), "E": (7, 3)}
    params = {k: rng.standard_normal(s) for k, s in shapes.items()}
    tparams = {k: torch.tensor(v.copy(), requires_grad=True) for k, v in params.items()}
    decay = [tparams[k] for k in ("W", "E")]
    no_decay = [tparams[k] for k in ("b", "gamma")]
    topt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=3e-2, betas=(0.9, 0.95), eps=1e-8,
    )
    opt = AdamW(params, lr=3e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for step in range(5):
        grads = {k: rng.standard_normal(s) for k, s in shapes.items()}
        lr = 3e-2 * (0.5 + 0.1 * step)  # the schedule changes lr every step
        for group in topt.param_groups:
            group["lr"] = lr
        for k, t in tparams.items():
            t.grad = torch.tensor(grads[k])
        topt.step()
        opt.step(grads, lr)
    for k in shapes:
        np.testing.assert_allclose(params[k], tparams[k].detach().numpy(), rtol=1e-12, atol=1e-14)


def test_weight_decay_only_on_matrices():
    model = GPT(GPTConfig(vocab_size=10, n_ctx=4, n_embd=4, n_head=1, n_layer=1))
    params = model.parameters()
    before = {k: v.copy() for k, v in params.items()}
    for k, v in params.items():  # make every parameter non-zero so decay would show
        v += 1.0
        before[k] += 1.0
    opt = AdamW(params, lr=0.1, weight_decay=0.5)
    opt.step({k: np.zeros_like(v) for k, v in params.items()})  # zero gradient: only decay acts
    for k, v in params.items():
        if v.ndim >= 2:
            np.testing.assert_allclose(v, before[k] * (1 - 0.05), rtol=1e-6, err_msg=k)
        else:
            np.testing.assert_array_equal(v, before[k], err_msg=k)
    assert params["embedding.embeddings"].ndim == 2  # the embedding matrix is decayed
    # updated in place: the model sees it (E is a view of the kept E^T, the same memory)
    assert np.shares_memory(model.embedding.embeddings, params["embedding.embeddings"])
    np.testing.assert_array_equal(model.embedding.embeddings, params["embedding.embeddings"])


# ----------------------------------------------------------------------------- clipping, schedule


def test_clip_grad_norm():
    grads = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    norm = clip_grad_norm(grads, 1.0)
    assert norm == pytest.approx(5.0)
    total = math.sqrt(sum(float((g**2).sum()) for g in grads.values()))
    assert total == pytest.approx(1.0, rel=1e-5)
    np.testing.assert_allclose(grads["a"], [0.6, 0.0], rtol=1e-5)
    small = {"a": np.array([0.3, 0.4])}
    assert clip_grad_norm(small, 1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(small["a"], [0.3, 0.4])  # under the limit: untouched


def test_clip_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is the reference clip_grad_norm_")
    rng = np.random.default_rng(1)
    grads = {k: rng.standard_normal(s) for k, s in {"a": (4, 3), "b": (5,)}.items()}
    ts = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads.values()]
    for t, g in zip(ts, grads.values(), strict=True):
        t.grad = torch.tensor(g.copy())
    tnorm = torch.nn.utils.clip_grad_norm_(ts, 0.5)
    norm = clip_grad_norm(grads, 0.5)
    assert norm == pytest.approx(float(tnorm), rel=1e-12)
    for t, g in zip(ts, grads.values(), strict=True):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-12)


def test_lr_schedule_shape():
    lrs = [lr_schedule(s, 1.0, 10, 100, 0.1) for s in range(120)]
    assert lrs[0] == pytest.approx(0.1)
    assert lrs[9] == pytest.approx(1.0)  # warm-up ends at the peak
    assert all(a < b for a, b in zip(lrs[:9], lrs[1:10], strict=True))  # rising
    assert all(a >= b for a, b in zip(lrs[10:100], lrs[11:101], strict=True))  # falling
    assert lrs[55] == pytest.approx(0.55)  # half-way through the cosine: the midpoint
    assert lrs[100] == pytest.approx(0.1) and lrs[119] == pytest.approx(0.1)
    assert min(lrs) >= 0.1 - 1e-12


# ----------------------------------------------------------------------------- batches


def test_get_batch_windows_and_seed():
    data = np.arange(100)
    x, y = get_batch(data, 4, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8)
    np.testing.assert_array_equal(y, x + 1)  # targets are the next tokens
    np.testing.assert_array_equal(np.diff(x, axis=1), 1)  # contiguous windows
    assert x.min() >= 0 and y.max() <= 99
    x2, _ = get_batch(data, 4, 8, np.random.default_rng(0))
    np.testing.assert_array_equal(x, x2)
    with pytest.raises(ValueError):
        get_batch(np.arange(5), 1, 5, np.random.default_rng(0))


# ----------------------------------------------------------------------------- Trainer


def tiny_setup(seed: int = 0, **overrides):
    """A small model and a short repeating 'text' of token ids it can learn quickly."""
    pattern = np.array([1, 5, 2, 7, 3, 3, 9, 4, 0, 6, 8, 2])
    ids = np.tile(pattern, 40)
    model = GPT(GPTConfig(vocab_size=10, n_ctx=16, n_embd=16, n_head=2, n_layer=1), seed=seed)
    cfg = dict(batch_size=4, block_size=16, max_steps=50, lr=1e-2, min_lr=1e-3, warmup=5,
               eval_interval=10, eval_batches=2, sample_interval=0, seed=seed)
    cfg.update(overrides)
    return model, ids, TrainConfig(**cfg)


def test_loss_falls_on_a_repeating_corpus():
    model, ids, cfg = tiny_setup()
    trainer = Trainer(model, ids, ids, cfg)
    records = []
    trainer.run(records.append)
    assert len(records) == 50 == trainer.step_count and trainer.history == records
    assert records[0].loss > 2.0  # about ln(10) at the start
    assert records[-1].loss < 0.5  # the pattern is learned
    vals = [r.val_loss for r in records if r.val_loss is not None]
    assert len(vals) == 5 and vals[-1] < vals[0]
    for r in records:
        assert r.lr > 0 and r.grad_norm > 0 and r.tokens_per_sec > 0 and r.elapsed > 0


def test_same_seed_same_run():
    runs = []
    for _ in range(2):
        model, ids, cfg = tiny_setup(max_steps=8)
        trainer = Trainer(model, ids, ids, cfg)
        trainer.run()
        runs.append(([r.loss for r in trainer.history], model.parameters()))
    assert runs[0][0] == runs[1][0]
    for k in runs[0][1]:
        np.testing.assert_array_equal(runs[0][1][k], runs[1][1][k])
    model, ids, cfg = tiny_setup(max_steps=8, seed=1)
    other = Trainer(model, ids, ids, cfg)
    other.run()
    assert [r.loss for r in other.history] != runs[0][0]


def test_stop_from_another_thread():
    model, ids, cfg = tiny_setup(max_steps=10_000, eval_interval=0)
    trainer = Trainer(model, ids, ids, cfg)

    def stop_soon(record):
        if record.step == 3:
            threading.Thread(target=trainer.stop).start()

    thread = threading.Thread(target=trainer.run, args=(stop_soon,))
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert 3 <= trainer.step_count < 50
    assert trainer.stop_requested


def test_time_limit_ends_the_run():
    model, ids, cfg = tiny_setup(max_steps=10_000, eval_interval=0, time_limit=0.0)
    trainer = Trainer(model, ids, ids, cfg)
    trainer.run()
    assert trainer.step_count == 0


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    model, ids, cfg = tiny_setup(max_steps=12)
    full = Trainer(model, ids, ids, cfg)
    full.run()

    first_model, _, _ = tiny_setup(max_steps=12)
    first = Trainer(first_model, ids, ids, cfg)
    for _ in range(6):
        first.step()
    # what a checkpoint keeps: the parameters, plus the optimiser state beside them
    np.savez(tmp_path / "params.npz", **first_model.parameters())
    save_trainer_state(first, tmp_path / "x.optim.npz")

    resumed_model = GPT(first_model.config, seed=123)  # different initial weights
    with np.load(tmp_path / "params.npz", allow_pickle=False) as f:
        resumed_model.load_parameters({k: f[k] for k in f.files})
    second = Trainer(resumed_model, ids, ids, cfg)
    second.load_state_dict(load_trainer_state(tmp_path / "x.optim.npz"))
    assert second.step_count == 6
    second.run()
    assert second.step_count == 12
    for k, v in model.parameters().items():
        np.testing.assert_array_equal(resumed_model.parameters()[k], v, err_msg=k)
    assert [r.loss for r in second.history] == [r.loss for r in full.history[6:]]


def test_sample_with_a_tokenizer():
    class CharTok:  # ids 0..9 are the digits
        eos_token_id = None

        def decode(self, ids):
            return "".join(str(i) for i in ids)

    model, ids, cfg = tiny_setup(sample_interval=5, max_steps=5)
    trainer = Trainer(model, ids, ids, cfg, tokenizer=CharTok())
    record = trainer.step()
    assert record.sample is None
    for _ in range(4):
        record = trainer.step()
    assert isinstance(record.sample, str) and len(record.sample) > 0


# ----------------------------------------------------------------------------- evaluate_text


class ByteTok:
    """Each character is one token (its code), plus an end-of-text token 127."""

    eos_token_id = 127

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


def test_evaluate_text_counts_every_token_once():
    model = GPT(GPTConfig(vocab_size=128, n_ctx=8, n_embd=8, n_head=2, n_layer=1), dtype=np.float64)
    text = "to be or not to be, that is the question"  # 41 chars: windows of 8 + a partial one
    result = evaluate_text(model, ByteTok(), text, block_size=8)
    assert result["tokens"] == len(text) and result["chars"] == len(text)
    # by hand: eos + text, cut into windows of 8 inputs, each predicting the next token
    seq = [127] + [ord(c) for c in text]
    total = 0.0
    for start in range(0, len(seq) - 1, 8):
        x = seq[start : start + 8]
        y = seq[start + 1 : start + 9]
        logits = model.forward(np.array(x[: len(y)]))
        total += float(token_nll(logits, np.array(y)).sum())
    assert result["nats_per_token"] == pytest.approx(total / len(text), rel=1e-12)
    assert result["nats_per_char"] == pytest.approx(total / len(text), rel=1e-12)
    # an untrained model is close to uniform over the vocab
    assert result["nats_per_token"] == pytest.approx(math.log(128), rel=0.05)


# ----------------------------------------------------------------------------- loss curves


def test_loss_curves_follow_the_history():
    model, ids, cfg = tiny_setup(max_steps=12, eval_interval=5)
    trainer = Trainer(model, ids, ids, cfg)
    history = trainer.run()
    curves = loss_curves(history)
    assert curves.steps.tolist() == list(range(1, 13))
    assert curves.train_loss.tolist() == [r.loss for r in history]
    assert curves.val_steps.tolist() == [5, 10, 12]  # every 5 steps, and the last one
    assert curves.val_loss.tolist() == [r.val_loss for r in history if r.val_loss is not None]
    assert curves.change == history[-1].loss - history[0].loss
    empty = loss_curves([])
    assert empty.steps.shape == empty.val_loss.shape == (0,)
