"""Llama and Qwen2 folders loaded by tinygpt against transformers' LlamaForCausalLM and
Qwen2ForCausalLM: logits at every position, KV-cached steps, greedy and beam generation.

The references are built offline from configs with random weights, saved with
`save_pretrained` into a temporary folder (float32 or bfloat16), and read back by
tinygpt.checkpoint.files.load_modern_model: the loader, the config mapping and the network are
all under test. Ids are fed directly (no tokenizer).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity tests compare with PyTorch/transformers")
transformers = pytest.importorskip("transformers", reason="parity tests compare with transformers")

from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from tinygpt.checkpoint.files import load_modern_model  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt.fast.parts import forward_parts  # noqa: E402

pytestmark = pytest.mark.parity

V = 96
SMALL = dict(vocab_size=V, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
             num_attention_heads=6, max_position_embeddings=128, rms_norm_eps=1e-5,
             bos_token_id=0, eos_token_id=0, pad_token_id=0, rope_theta=500.0)
# name -> (config class, model class, settings): GQA (6 query heads on 2 key/value heads),
# MQA (one key/value head), plain multi-head, tied and untied, with and without biases
CASES = {
    "llama-gqa-untied": (LlamaConfig, LlamaForCausalLM,
                         dict(num_key_value_heads=2, tie_word_embeddings=False)),
    "llama-mqa-tied": (LlamaConfig, LlamaForCausalLM,
                       dict(num_key_value_heads=1, tie_word_embeddings=True)),
    "llama-mha-bias": (LlamaConfig, LlamaForCausalLM,
                       dict(num_key_value_heads=6, attention_bias=True, mlp_bias=True)),
    "qwen2-gqa-tied": (Qwen2Config, Qwen2ForCausalLM,
                       dict(num_key_value_heads=2, tie_word_embeddings=True,
                            use_sliding_window=False, sliding_window=64)),
    "qwen2-mqa-untied": (Qwen2Config, Qwen2ForCausalLM,
                         dict(num_key_value_heads=1, tie_word_embeddings=False)),
}
LOGIT_ATOL = 2e-5  # float32: the two libraries sum in different orders ...
LOGIT_OF_MAX = 5e-6  # ... and the rounding grows with the logits (transformers 5.24: 2.3e-5 at
# logits near 5 on the untied Qwen2 shape), so the bound is the larger of the two


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add overhead
    yield
    torch.set_num_threads(threads)


def build(name: str, folder, dtype=torch.float32):
    """A random reference model saved to `folder` (in `dtype`), and the float32 model that the
    saved numbers are (bfloat16 rounds the weights: the reference uses the rounded ones)."""
    config_class, model_class, settings = CASES[name]
    torch.manual_seed(len(name))
    config = config_class(**SMALL, **settings, initializer_range=0.2)
    hf = model_class(config).eval()
    with torch.no_grad():  # norms' gammas and biases away from 1 and 0
        for pname, p in hf.named_parameters():
            if pname.endswith("norm.weight") or pname.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.3)
        for p in hf.parameters():  # the numbers the file will hold (no-op for float32)
            p.copy_(p.to(dtype).to(torch.float32))
    # a copy is converted: .to() on the reference would round its rotary buffers too
    copy.deepcopy(hf).to(dtype).save_pretrained(folder, safe_serialization=True)
    return hf


def hf_logits(hf, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf(torch.tensor(ids[None, :])).logits[0].numpy()


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    hf = build(request.param, folder)
    return hf, load_modern_model(folder, folder.parent)


IDS = np.random.default_rng(0).integers(0, V, 40)


def test_logits_match_at_every_position(pair) -> None:
    hf, ours = pair
    theirs, mine = hf_logits(hf, IDS), ours.forward(IDS)
    atol = max(LOGIT_ATOL, LOGIT_OF_MAX * float(np.abs(theirs).max()))
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=atol)
    np.testing.assert_array_equal(mine.argmax(-1), theirs.argmax(-1))


def test_kv_cached_steps_equal_full_forwards(pair) -> None:
    _, ours = pair
    cache = ours.new_cache(1)
    steps = [ours.forward_cached(IDS[None, :5], cache)[0]]
    steps += [ours.forward_cached(IDS[None, t : t + 1], cache)[0] for t in range(5, 20)]
    np.testing.assert_allclose(np.concatenate(steps), ours.forward(IDS[:20]), atol=1e-5)
    assert cache.keys[0].shape[1] == ours.config.kv_heads  # KV heads stored, not H


def test_forward_parts_equal_separate_cached_steps(pair) -> None:
    _, ours = pair
    prompts = [IDS[:3], IDS[5:12]]
    caches = [ours.new_cache(1) for _ in prompts]
    got = forward_parts(ours, [(p[None], c) for p, c in zip(prompts, caches, strict=True)])
    for prompt, logits in zip(prompts, got, strict=True):
        np.testing.assert_allclose(logits[0], ours.forward(prompt)[-1], atol=1e-5)


def hf_generate(hf, prompt: np.ndarray, **kwargs) -> list[int]:
    ids = torch.tensor(prompt[None, :])
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                          eos_token_id=None, pad_token_id=0, **kwargs)
    return out[0, len(prompt):].tolist()


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_generation_matches_transformers(pair, strategy: str) -> None:
    hf, ours = pair
    settings = dict(num_beams=3) if strategy == "beam" else {}
    for seed in range(3):
        prompt = np.random.default_rng(seed).integers(0, V, 2 + seed)
        result = generate(ours, prompt, 12, strategy=strategy, **settings)
        assert result.tokens.tolist() == hf_generate(hf, prompt, max_new_tokens=12, **settings)


def test_a_bfloat16_file_loads_upcast_to_float32(tmp_path) -> None:
    hf = build("llama-gqa-untied", tmp_path / "m", dtype=torch.bfloat16)
    ours = load_modern_model(tmp_path / "m", tmp_path)
    assert ours.dtype == np.float32
    assert ours.blocks[0].attn.W_q.dtype == np.float32
    theirs, mine = hf_logits(hf, IDS), ours.forward(IDS)  # hf holds the rounded weights
    atol = max(LOGIT_ATOL, LOGIT_OF_MAX * float(np.abs(theirs).max()))
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=atol)
    np.testing.assert_array_equal(mine.argmax(-1), theirs.argmax(-1))


def test_float32_files_load_into_rows_of_their_own(tmp_path) -> None:
    """Copied from the map into (in, out) rows (the products' fastest layout), same logits."""
    hf = build("qwen2-gqa-tied", tmp_path / "m")
    ours = load_modern_model(tmp_path / "m", tmp_path)
    W_q = ours.blocks[0].attn.W_q
    assert W_q.flags.c_contiguous and W_q.flags.owndata  # a copy, not a view of the map
    np.testing.assert_allclose(ours.forward(IDS), hf_logits(hf, IDS), atol=LOGIT_ATOL)


def test_rope_theta_from_rope_parameters_as_newer_files_write_it(tmp_path) -> None:
    hf = build("llama-gqa-untied", tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    theta = config.pop("rope_theta", None) or config["rope_parameters"]["rope_theta"]
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    path.write_text(json.dumps(config))
    ours = load_modern_model(tmp_path / "m", tmp_path)
    assert ours.config.rope_theta == 500.0
    np.testing.assert_allclose(ours.forward(IDS), hf_logits(hf, IDS), atol=LOGIT_ATOL)


SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
               rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
               bos_token_id=0, eos_token_id=0, pad_token_id=0)


def test_smollm2_135m_shape(tmp_path) -> None:
    """SmolLM2-135M's shape (30 layers, 576 wide, 9 heads on 3 key/value heads, tied): about
    8 s here, so it runs in the default suite."""
    torch.manual_seed(0)
    hf = LlamaForCausalLM(LlamaConfig(**SMOLLM2)).eval()
    hf.save_pretrained(tmp_path / "smol", safe_serialization=True)
    ours = load_modern_model(tmp_path / "smol", tmp_path)
    ids = np.random.default_rng(1).integers(0, 49152, 24)
    theirs, mine = hf_logits(hf, ids), ours.forward(ids)
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(mine.argmax(-1), theirs.argmax(-1))
