"""Patching, ablation and steering against transformers on the same weights, with PyTorch
forward hooks doing the same experiment in the reference model.

A GPT-2 (LayerNorm, GELU, learned positions) and a Llama (RMSNorm, SwiGLU, rotary positions,
grouped-query attention) with random weights are saved with save_pretrained and read back with
tinygpt's loaders. The hooks: a pre-hook on a block (the residual stream entering it), a hook on
its attention or MLP (what they write), a pre-hook on the attention's output projection (the
heads side by side) and on the MLP's down projection (the neurons). Log-probabilities agree to
1e-3, logits to 1e-4 of their largest value.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity tests compare with PyTorch/transformers")
transformers = pytest.importorskip("transformers", reason="parity tests compare with transformers")

from tests.parity.test_gpt2_parity import make_hf_model  # noqa: E402
from tests.parity.test_modern_parity import build  # noqa: E402
from tinygpt import load  # noqa: E402
from tinygpt import readouts as ti  # noqa: E402
from tinygpt.checkpoint.files import load_modern_model  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402

pytestmark = pytest.mark.parity

LOGPROB_ATOL = 1e-3
LOGIT_RTOL = 1e-4  # of the largest |logit|
T = 7
ANSWER = 11


@dataclass
class Pair:
    hf: object
    model: object
    blocks: list  # the reference's blocks
    attn: list  # their attention modules (output: a tuple, the first item written)
    mlp: list
    out_proj: list  # attention's output projection (input: the heads side by side)
    down: list  # the MLP's down projection (input: the neurons)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def pair(request, tmp_path_factory) -> Pair:
    folder = tmp_path_factory.mktemp(request.param) / "model"
    if request.param == "gpt2":
        hf = make_hf_model(folder, seed=1)
        blocks = list(hf.transformer.h)
        return Pair(hf, load(folder)[0], blocks, [b.attn for b in blocks],
                    [b.mlp for b in blocks], [b.attn.c_proj for b in blocks],
                    [b.mlp.c_proj for b in blocks])
    folder.mkdir(parents=True)
    hf = build("llama-gqa-untied", folder)
    blocks = list(hf.model.layers)
    return Pair(hf, load_modern_model(folder), blocks, [b.self_attn for b in blocks],
                [b.mlp for b in blocks], [b.self_attn.o_proj for b in blocks],
                [b.mlp.down_proj for b in blocks])


def ids_of(model, seed: int, n: int = T) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, model.config.vocab_size, n)


# ----------------------------------------------------------------------------- hooks


def _first(output):
    return output[0] if isinstance(output, tuple) else output


def _replace_first(output, value):
    return (value, *output[1:]) if isinstance(output, tuple) else value


@contextmanager
def hooked(pair: Pair, site: str, layer: int, fn):
    """fn(tensor (1, T, n)) -> tensor, at `site` of block `layer` of the reference:
    resid_pre, attn_out, mlp_out, heads (input of the output projection), neurons (input of
    the down projection)."""
    if site in ("resid_pre", "heads", "neurons"):
        module = {"resid_pre": pair.blocks, "heads": pair.out_proj,
                  "neurons": pair.down}[site][layer]
        handle = module.register_forward_pre_hook(
            lambda m, args: (fn(args[0]), *args[1:]))
    else:
        module = {"attn_out": pair.attn, "mlp_out": pair.mlp}[site][layer]
        handle = module.register_forward_hook(
            lambda m, args, out: _replace_first(out, fn(_first(out))))
    try:
        yield
    finally:
        handle.remove()


def reference_logits(pair: Pair, ids) -> np.ndarray:
    """(T, V) float64 logits of the reference model."""
    with torch.no_grad():
        out = pair.hf(torch.from_numpy(np.asarray(ids, dtype=np.int64)[None])).logits[0]
    return out.double().numpy()


def capture(pair: Pair, ids, site: str, layer: int) -> torch.Tensor:
    seen = []

    def keep(t):
        seen.append(t.clone())
        return t

    with hooked(pair, site, layer, keep):
        reference_logits(pair, ids)
    return seen[0]


def logprob(logits: np.ndarray, token: int) -> float:
    z = logits - logits.max()
    return float(z[token] - np.log(np.exp(z).sum()))


def assert_logits_close(ours, theirs) -> None:
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=LOGIT_RTOL * np.abs(theirs).max())


# ----------------------------------------------------------------------------- patching


def patched_reference(pair: Pair, clean, corrupt, site: str, layer: int, position: int) -> float:
    source = capture(pair, clean, site, layer)

    def put(t):
        t = t.clone()
        t[:, position] = source[:, position]
        return t

    with hooked(pair, site, layer, put):
        return logprob(reference_logits(pair, corrupt)[-1], ANSWER)


@pytest.mark.parametrize("site", ti.SITES)
def test_patching_grid_matches_hooks(pair, site):
    clean, corrupt = ids_of(pair.model, 1), ids_of(pair.model, 2)
    result = ti.activation_patching(pair.model, clean, corrupt, ANSWER, site)
    assert result.clean_score == pytest.approx(
        logprob(reference_logits(pair, clean)[-1], ANSWER), abs=LOGPROB_ATOL)
    assert result.corrupt_score == pytest.approx(
        logprob(reference_logits(pair, corrupt)[-1], ANSWER), abs=LOGPROB_ATOL)
    for layer in range(pair.model.config.n_layer):
        for t in range(T):
            expected = patched_reference(pair, clean, corrupt, site, layer, t)
            assert result.scores[layer, t] == pytest.approx(expected, abs=LOGPROB_ATOL), (
                layer, t)


def test_a_patch_at_the_wrong_position_is_caught(pair):
    """The comparison above has the power to see a shifted patch: the reference patched one
    position later differs from the grid's cell by far more than the tolerance."""
    clean, corrupt = ids_of(pair.model, 1), ids_of(pair.model, 2)
    result = ti.activation_patching(pair.model, clean, corrupt, ANSWER)
    gaps = [abs(result.scores[0, t] - patched_reference(pair, clean, corrupt, "resid_pre", 0,
                                                        t + 1)) for t in range(T - 1)]
    assert max(gaps) > 10 * LOGPROB_ATOL


# ----------------------------------------------------------------------------- ablation


def _heads_fn(head_size: int, heads: list[int], mean: bool):
    def ablate(t):
        t = t.clone()
        for h in heads:
            cols = slice(h * head_size, (h + 1) * head_size)
            t[:, :, cols] = t[:, :, cols].mean(dim=1, keepdim=True) if mean else 0.0
        return t
    return ablate


def _neurons_fn(neurons: list[int], mean: bool):
    def ablate(t):
        t = t.clone()
        t[:, :, neurons] = t[:, :, neurons].mean(dim=1, keepdim=True) if mean else 0.0
        return t
    return ablate


@pytest.mark.parametrize("mean", [False, True])
def test_ablation_matches_hooks(pair, mean):
    ids = ids_of(pair.model, 3)
    c = pair.model.config
    heads = [(0, 1), (0, 4 % c.n_head), (1, 2)]
    neurons = [(0, 5), (1, 0), (1, 17)]
    ours = ti.ablated_logits(pair.model, ids, heads=heads, neurons=neurons, mean=mean)
    hooks = []
    for layer in range(c.n_layer):
        picked = [h for lay, h in heads if lay == layer]
        hooks.append(hooked(pair, "heads", layer, _heads_fn(c.head_size, picked, mean)))
        cells = [n for lay, n in neurons if lay == layer]
        hooks.append(hooked(pair, "neurons", layer, _neurons_fn(cells, mean)))
    for h in hooks:
        h.__enter__()
    try:
        theirs = reference_logits(pair, ids)[-1]
    finally:
        for h in hooks:
            h.__exit__(None, None, None)
    assert_logits_close(ours, theirs)
    assert np.abs(theirs - reference_logits(pair, ids)[-1]).max() > 1e-3  # it changed


# ----------------------------------------------------------------------------- steering


def test_steering_matches_hooks(pair):
    a, b, ids = ids_of(pair.model, 4, 5), ids_of(pair.model, 5, 6), ids_of(pair.model, 6)
    layer, coefficient = 1, 3.0
    vector = ti.steering_vector(pair.model, a, b, layer)
    ref_vector = (capture(pair, a, "resid_pre", layer)[0, -1]
                  - capture(pair, b, "resid_pre", layer)[0, -1]).double().numpy()
    assert_logits_close(vector, ref_vector)
    push = torch.from_numpy(coefficient * vector.astype(np.float32))
    with hooked(pair, "resid_pre", layer, lambda t: t + push):
        theirs = reference_logits(pair, ids)
        ref_greedy = pair.hf.generate(torch.from_numpy(ids[None]), max_new_tokens=5,
                                      do_sample=False, pad_token_id=0)[0, len(ids):].numpy()
    assert_logits_close(ti.steered_logits(pair.model, ids, vector, layer, coefficient), theirs)
    steered = ti.steering(pair.model, vector, layer, coefficient)
    ours_greedy = generate(pair.model, ids, 5, interventions=steered).tokens
    np.testing.assert_array_equal(ours_greedy, ref_greedy)
