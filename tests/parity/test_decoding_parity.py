"""tinygpt.decoding.generation against Hugging Face transformers: the filters, greedy and beam
search.

The reference is transformers itself: its logits warpers on the same numbers, and
GPT2LMHeadModel.generate on a small random GPT-2 whose weights are copied into tinygpt.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity tests compare with PyTorch/transformers")
transformers = pytest.importorskip("transformers", reason="parity tests compare with transformers")

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402
from transformers.generation.logits_process import (  # noqa: E402
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from tinygpt.checkpoint.hf_gpt2 import GPT2_BLOCK_NAMES  # noqa: E402
from tinygpt.decoding.generation import (  # noqa: E402
    generate,
    softmax_with_temperature,
    top_k_filter,
    top_p_filter,
)
from tinygpt.network.model import GPT, GPTConfig  # noqa: E402

pytestmark = pytest.mark.parity


# ----------------------------------------------------------------------------- filters


def hf_warp(warper, logits: np.ndarray) -> np.ndarray:
    scores = torch.tensor(np.atleast_2d(logits), dtype=torch.float64)
    out = warper(None, scores).numpy()
    return out if logits.ndim == 2 else out[0]


def assert_same_filtering(ours: np.ndarray, theirs: np.ndarray, exact_ties: bool = True) -> None:
    """Same removed entries and same remaining values.

    exact_ties=False: when several tokens have exactly the same score at the cut, transformers
    keeps whichever torch.sort (not stable) put last; then only require the same number of
    kept tokens with the same values, row by row.
    """
    if exact_ties:
        np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(theirs))
        kept = ~np.isneginf(theirs)
        np.testing.assert_allclose(ours[kept], theirs[kept], rtol=0, atol=1e-12)
        return
    for row_ours, row_theirs in zip(np.atleast_2d(ours), np.atleast_2d(theirs), strict=True):
        kept_ours = np.sort(row_ours[np.isfinite(row_ours)])
        kept_theirs = np.sort(row_theirs[np.isfinite(row_theirs)])
        np.testing.assert_allclose(kept_ours, kept_theirs, rtol=0, atol=1e-12)


def logit_cases() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    cases = [rng.standard_normal(50) * scale for scale in (0.1, 1.0, 5.0)]
    cases.append(rng.standard_normal((4, 30)) * 2)  # a batch
    cases.append(np.zeros(16))  # all equal
    cases.append(np.array([3.0, 1.0, 3.0, 2.0, 1.0, 1.0, 0.0, 3.0]))  # ties at the cutoffs
    cases.append(rng.integers(-3, 3, size=(3, 40)).astype(float))  # many ties, batched
    cases.append(np.array([0.0]))  # one token
    return cases


@pytest.mark.parametrize("case", range(len(logit_cases())))
@pytest.mark.parametrize("k", [1, 2, 3, 5, 16, 40, 1000])
def test_top_k_matches_transformers(case: int, k: int) -> None:
    logits = logit_cases()[case]
    assert_same_filtering(top_k_filter(logits, k), hf_warp(TopKLogitsWarper(k), logits))


@pytest.mark.parametrize("case", range(len(logit_cases())))
@pytest.mark.parametrize("p", [1e-9, 0.05, 0.3, 0.5, 0.75, 0.9, 0.999, 1.0])
def test_top_p_matches_transformers(case: int, p: float) -> None:
    logits = logit_cases()[case]
    has_ties = any(len(np.unique(row)) < len(row) for row in np.atleast_2d(logits))
    ours, theirs = top_p_filter(logits, p), hf_warp(TopPLogitsWarper(p), logits)
    assert_same_filtering(ours, theirs, exact_ties=not has_ties)


def test_top_p_ties_keep_the_lowest_ids() -> None:
    kept = np.isfinite(top_p_filter(np.zeros(8), 0.3))  # each token 1/8: three are needed
    assert kept.tolist() == [True, True, True, False, False, False, False, False]


def test_top_p_boundary_token_that_crosses_p_is_kept() -> None:
    logits = np.log(np.array([0.5, 0.25, 0.1875, 0.0625]))
    for p in (0.4, 0.6, 0.7, 0.8, 0.95):
        assert_same_filtering(top_p_filter(logits, p), hf_warp(TopPLogitsWarper(p), logits))
    # p = 0.6: the first token holds 0.5 < 0.6, so the second (which crosses 0.6) is kept too
    assert np.isfinite(top_p_filter(logits, 0.6)).tolist() == [True, True, False, False]


@pytest.mark.parametrize("t", [0.1, 0.5, 1.0, 1.7, 10.0])
def test_temperature_matches_transformers(t: float) -> None:
    logits = np.random.default_rng(1).standard_normal((3, 20)) * 3
    theirs = hf_warp(TemperatureLogitsWarper(t), logits)
    expected = torch.softmax(torch.tensor(theirs), dim=-1).numpy()
    ours = softmax_with_temperature(logits, t)
    np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-15)


def test_chained_filters_match_transformers() -> None:
    logits = np.random.default_rng(2).standard_normal((5, 64)) * 2
    t, k, p = 0.7, 20, 0.8
    theirs = hf_warp(TopPLogitsWarper(p), hf_warp(TopKLogitsWarper(k), logits / t))
    ours = top_p_filter(top_k_filter(logits / t, k), p)
    assert_same_filtering(ours, theirs)


# ----------------------------------------------------------------------------- generate

# Hugging Face GPT-2 block names -> tinygpt names: the checkpoint loader's own map
# (Conv1D weights are (in, out): used as stored)
BLOCK_NAMES = GPT2_BLOCK_NAMES


def tinygpt_from_hf(hf: GPT2LMHeadModel) -> GPT:
    c = hf.config
    config = GPTConfig(
        vocab_size=c.vocab_size,
        n_ctx=c.n_positions,
        n_embd=c.n_embd,
        n_head=c.n_head,
        n_layer=c.n_layer,
        layer_norm_eps=c.layer_norm_epsilon,
    )
    sd = {k.removeprefix("transformer."): v.detach().numpy() for k, v in hf.state_dict().items()}
    params = {
        "embedding.embeddings": sd["wte.weight"],
        "embedding.position_embeddings": sd["wpe.weight"],
        "ln_f.gamma": sd["ln_f.weight"],
        "ln_f.beta": sd["ln_f.bias"],
    }
    for i in range(c.n_layer):
        for theirs, ours in BLOCK_NAMES.items():
            params[f"blocks.{i}.{ours}"] = sd[f"h.{i}.{theirs}"]
    model = GPT(config)
    model.load_parameters(params)
    return model


@pytest.fixture(scope="module")
def models():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: threads only add overhead (3-4x slower)
    torch.manual_seed(0)
    # initializer_range 0.3 (not 0.02) makes the next-token distributions peaky, so float32
    # rounding differences between the libraries cannot flip near-ties
    config = GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=32,
        vocab_size=64,
        n_positions=64,
        initializer_range=0.3,
        bos_token_id=0,  # the defaults (50256) are outside this small vocabulary
        eos_token_id=0,
    )
    hf = GPT2LMHeadModel(config).eval()
    yield hf, tinygpt_from_hf(hf)
    torch.set_num_threads(threads)


def hf_generate(hf: GPT2LMHeadModel, prompt: np.ndarray, eos: int, **kwargs) -> list[int]:
    ids = torch.tensor(prompt[None, :])
    with torch.no_grad():
        out = hf.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
            **kwargs,
        )
    return out[0, len(prompt) :].tolist()


PROMPTS = [np.random.default_rng(s).integers(0, 64, size=1 + s % 6) for s in range(4)]
EOS_IDS = (58, 32)  # tokens this random model produces now and then
REASONS: dict[tuple, list[str]] = defaultdict(list)  # beam settings -> stop reasons seen


def test_weights_copied_give_the_same_logits(models) -> None:
    hf, ours = models
    ids = np.arange(20) % 64
    with torch.no_grad():
        theirs = hf(torch.tensor(ids[None, :])).logits[0].numpy()
    np.testing.assert_allclose(ours.forward(ids), theirs, atol=1e-4)


@pytest.mark.parametrize("eos", EOS_IDS)
def test_greedy_matches_transformers(models, eos: int) -> None:
    hf, ours = models
    stops = []
    for prompt in PROMPTS:
        result = generate(ours, prompt, 20, eos_token_id=eos)
        assert result.tokens.tolist() == hf_generate(hf, prompt, eos, max_new_tokens=20)
        stops.append(result.stop_reason)
    assert set(stops) <= {"eos", "max_new_tokens"}


@pytest.mark.parametrize("num_beams", [2, 3, 4])
@pytest.mark.parametrize("length_penalty", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("early_stopping", [True, False, "never"])
def test_beam_search_matches_transformers(models, num_beams, length_penalty, early_stopping):
    hf, ours = models
    for eos in EOS_IDS:
        for prompt in PROMPTS:
            settings = dict(
                num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping
            )
            result = generate(ours, prompt, 12, strategy="beam", eos_token_id=eos, **settings)
            theirs = hf_generate(hf, prompt, eos, max_new_tokens=12, **settings)
            assert result.tokens.tolist() == theirs, (eos, prompt.tolist())
            REASONS[(num_beams, length_penalty, early_stopping)].append(result.stop_reason)


def test_beam_sweep_saw_both_endings() -> None:
    """The comparisons above covered hypotheses ended by EOS and by the length limit."""
    if len(REASONS) < 27:
        pytest.skip("needs the whole beam-search sweep in the same run")
    by_length_penalty = {lp: set() for lp in (0.5, 1.0, 2.0)}
    for (_, lp, _), reasons in REASONS.items():
        by_length_penalty[lp].update(reasons)
    for lp, seen in by_length_penalty.items():
        assert seen == {"eos", "max_new_tokens"}, (lp, seen)
