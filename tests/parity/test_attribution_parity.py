"""Logit attribution against Hugging Face transformers' GPT-2 on the same weights.

Every part is rebuilt from PyTorch's own tensors, caught with forward hooks: the merged heads
going into each c_proj, each MLP's output, the input of ln_f. Nothing comes from tinygpt's
trace, so this checks the attribution and tinygpt's forward at once.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch runs the reference GPT-2")
pytest.importorskip("transformers", reason="transformers defines the reference GPT-2")

from tests.parity.test_gpt2_parity import VOCAB, make_hf_model, random_ids  # noqa: E402
from tinygpt import load, logit_attribution  # noqa: E402

pytestmark = pytest.mark.parity


def hf_parts(hf, ids: np.ndarray, position: int, token: int) -> tuple[dict, float]:
    """Each part's share of the logit (by key), and the logit, from Hugging Face's tensors alone."""
    caught = {}
    hooks = [hf.transformer.ln_f.register_forward_hook(
        lambda m, args, out: caught.__setitem__("ln_f.input", args[0][0]))]  # fmt: skip
    for i, block in enumerate(hf.transformer.h):
        hooks.append(block.attn.c_proj.register_forward_hook(
            lambda m, args, out, i=i: caught.__setitem__(("merged", i), args[0][0])))  # fmt: skip
        hooks.append(block.mlp.register_forward_hook(
            lambda m, args, out, i=i: caught.__setitem__(("mlp", i), out[0])))  # fmt: skip
    with torch.no_grad():
        logits = hf(torch.from_numpy(ids[None])).logits[0, position, token].item()
    for hook in hooks:
        hook.remove()

    def to64(t):
        return t.detach().double().numpy()

    x = to64(caught["ln_f.input"][position])  # (C,)
    std = np.sqrt(x.var() + hf.config.layer_norm_epsilon)
    gamma, beta = to64(hf.transformer.ln_f.weight), to64(hf.transformer.ln_f.bias)
    w = to64(hf.lm_head.weight[token])  # (C,) the token's row of the output matrix

    def share(v):
        return float(((v - v.mean()) / std * gamma) @ w)

    H = hf.config.n_head
    hs = hf.config.n_embd // H
    parts = {
        ("token_embedding",): share(to64(hf.transformer.wte.weight[ids[position]])),
        ("position_embedding",): share(to64(hf.transformer.wpe.weight[position])),
        ("final_layernorm_shift",): float(beta @ w),
    }
    for i, block in enumerate(hf.transformer.h):
        merged = to64(caught[("merged", i)][position])  # (C,) heads side by side
        W = to64(block.attn.c_proj.weight)  # (C, C), Conv1D: input rows
        for h in range(H):
            parts[("head", i, h)] = share(merged[h * hs : (h + 1) * hs] @ W[h * hs : (h + 1) * hs])
        parts[("attention_bias", i)] = share(to64(block.attn.c_proj.bias))
        parts[("feed_forward", i)] = share(to64(caught[("mlp", i)][position]))
    return parts, logits


@pytest.mark.parametrize("config", [{}, {"tie_word_embeddings": False}], ids=["tied", "untied"])
def test_every_part_matches_transformers(tmp_path, config):
    hf = make_hf_model(tmp_path / "m", seed=7, **config)
    model, _ = load(tmp_path / "m")
    ids = random_ids(40, seed=8)
    for position, token in ((39, 5), (12, VOCAB - 1), (0, 100)):
        expected, hf_logit = hf_parts(hf, ids, position, token)
        a = logit_attribution(model, ids, position, token)
        assert set(a.keys) == set(expected)
        ours = dict(zip(a.keys, a.values, strict=True))
        for key, value in expected.items():
            assert ours[key] == pytest.approx(value, abs=2e-4), key
        assert a.total == pytest.approx(hf_logit, abs=1e-4)
        assert sum(expected.values()) == pytest.approx(hf_logit, abs=1e-4)
        assert max(abs(v) for v in expected.values()) > 0.1  # not all near zero
