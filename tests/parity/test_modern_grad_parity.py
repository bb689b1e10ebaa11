"""Gradient check of a whole Llama-style model: tinygpt's hand-written backward pass (RMSNorm,
rotary positions, grouped-query attention, SwiGLU, tied output) against torch autograd through
transformers' LlamaForCausalLM holding the same weights, in float64 and in float32.

The reference is built with random weights, its state dict renamed to tinygpt's names by the
checkpoint loader's own mapping (tinygpt.checkpoint.hf_modern), and the same mapping renames
torch's gradients, so every parameter's gradient is compared with the one torch computed.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity tests compare with PyTorch/transformers")
transformers = pytest.importorskip("transformers", reason="parity tests compare with transformers")

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from tinygpt.checkpoint.hf_modern import modern_config, modern_parameters  # noqa: E402
from tinygpt.network.model import GPT  # noqa: E402

pytestmark = pytest.mark.parity

V = 80
SMALL = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
             num_attention_heads=4, max_position_embeddings=32, rms_norm_eps=1e-5,
             rope_theta=500.0, bos_token_id=0, eos_token_id=0, pad_token_id=0)
# the shipped Llama-style shape (GQA 4 on 2, tied, no biases), and one with biases and its own
# output matrix, so that every kind of parameter has its gradient checked
CASES = {
    "gqa-tied": dict(num_key_value_heads=2, tie_word_embeddings=True),
    "mqa-untied-bias": dict(num_key_value_heads=1, tie_word_embeddings=False,
                            attention_bias=True, mlp_bias=True),
}
# (dtype, tolerance on each gradient, relative to its largest entry)
DTYPES = {"float64": (torch.float64, np.float64, 1e-9),
          "float32": (torch.float32, np.float32, 2e-4)}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class ExactRotary(torch.nn.Module):
    """transformers computes the rotary angles in float32 whatever the model's dtype; a float64
    check needs them in float64 (cos/sin of position * theta^(-2j/hs), as tinygpt does)."""

    def __init__(self, head_size: int, theta: float) -> None:
        super().__init__()
        j = torch.arange(0, head_size, 2, dtype=torch.float64)
        self.inv_freq = theta ** (-j / head_size)  # (hs/2,)

    def forward(self, x, position_ids):
        angles = position_ids[..., None].to(torch.float64) * self.inv_freq  # (B, T, hs/2)
        emb = torch.cat((angles, angles), dim=-1)  # (B, T, hs): the half-split layout
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class ExactRMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm squares and averages in float32 whatever the model's dtype;
    this one stays in the input's dtype (the same `weight`, so the same parameter names)."""

    def __init__(self, norm) -> None:
        super().__init__()
        self.weight, self.eps = norm.weight, norm.variance_epsilon

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def exact_in_float64(hf: LlamaForCausalLM) -> None:
    """Swap the two parts that transformers computes in float32 for float64 ones (its eager
    attention's softmax is float32 too: the model uses torch's SDPA, which is not)."""
    head_size = SMALL["hidden_size"] // SMALL["num_attention_heads"]
    hf.model.rotary_emb = ExactRotary(head_size, SMALL["rope_theta"])
    hf.model.norm = ExactRMSNorm(hf.model.norm)
    for layer in hf.model.layers:
        layer.input_layernorm = ExactRMSNorm(layer.input_layernorm)
        layer.post_attention_layernorm = ExactRMSNorm(layer.post_attention_layernorm)


def reference(case: str, torch_dtype) -> LlamaForCausalLM:
    torch.manual_seed(len(case))
    config = LlamaConfig(**SMALL, **CASES[case], initializer_range=0.2,
                         attn_implementation="sdpa")
    hf = LlamaForCausalLM(config).to(torch_dtype)
    exact_in_float64(hf)
    with torch.no_grad():  # norms' gammas and biases away from 1 and 0
        for name, p in hf.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.3)
    return hf


def as_ours(hf: LlamaForCausalLM, np_dtype) -> GPT:
    """The same weights in a tinygpt GPT, renamed by the checkpoint loader's mapping."""
    config = modern_config(hf.config.to_dict())
    tensors = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
    params = modern_parameters(tensors, config)
    model = GPT(config, dtype=np_dtype, init=False)
    model.load_parameters({k: np.ascontiguousarray(v, dtype=np_dtype) for k, v in params.items()})
    return model


def torch_loss_and_grads(hf, ids: np.ndarray, targets: np.ndarray, config):
    """Mean cross-entropy over every position, and autograd's gradients in tinygpt's names."""
    hf.zero_grad()
    logits = hf(torch.tensor(ids)).logits  # (B, T, V)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V),
                                             torch.tensor(targets).reshape(-1))
    loss.backward()
    named = {name: p.grad.numpy() for name, p in hf.named_parameters()}
    return loss.item(), modern_parameters(named, config)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_every_gradient_matches_torch_autograd(case: str, dtype: str) -> None:
    torch_dtype, np_dtype, tol = DTYPES[dtype]
    hf = reference(case, torch_dtype)
    ours = as_ours(hf, np_dtype)
    rng = np.random.default_rng(1)
    ids, targets = rng.integers(0, V, (2, 12)), rng.integers(0, V, (2, 12))  # (B, T)

    their_loss, theirs = torch_loss_and_grads(hf, ids, targets, ours.config)
    loss, mine = ours.loss_and_grads(ids, targets)

    assert loss == pytest.approx(their_loss, rel=tol)
    assert mine.keys() == theirs.keys()
    for name, grad in mine.items():
        assert grad.dtype == np_dtype, name
        scale = float(np.abs(theirs[name]).max())
        assert scale > 0, f"{name}: torch's gradient is zero; the check would be empty"
        np.testing.assert_allclose(grad, theirs[name], rtol=0, atol=tol * scale, err_msg=name)


def test_the_tied_case_is_the_shipped_shape() -> None:
    """The first case has the parts of models/shakespeare_llama.npz (tinygpt's --arch llama)."""
    c = as_ours(reference("gqa-tied", torch.float64), np.float64).config
    assert (c.norm, c.position, c.mlp, c.tie_weights, c.group_size) == (
        "rmsnorm", "rope", "swiglu", True, 2)
    assert not (c.attn_bias or c.proj_bias or c.mlp_bias)
