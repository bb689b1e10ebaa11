"""Whole Hugging Face folders (Llama, SmolLM2, Qwen2 styles) loaded by `tinygpt.load(folder)`:
model and tokenizer together, against transformers and the tokenizers library.

Each folder is built offline: a small random LlamaForCausalLM / Qwen2ForCausalLM saved with
`save_pretrained` (float32 or bfloat16), and a byte-level BPE trained with the tokenizers
library in the model family's style (tests/tinygpt/tokenizer/hf_files.py). Two layouts:
- "save_pretrained": every file written by transformers (PreTrainedTokenizerFast too);
- "hub": the files written by hand as the hub's downloads hold them (config.json with
  `torch_dtype` and a top-level `rope_theta`, merges as "a b" strings, an EOS list in
  generation_config.json, tokenizer_config.json with `added_tokens_decoder`).
The Qwen2 folder has more embedding rows than tokens, as Qwen2.5-0.5B (151,936 for 151,665):
those rows are made likely, so generation really produces their ids.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity tests compare with PyTorch/transformers")
transformers = pytest.importorskip("transformers", reason="parity tests compare with transformers")

from transformers import (  # noqa: E402
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

import tinygpt  # noqa: E402
from tests.tinygpt.tokenizer.hf_files import LLAMA_SPECIALS, QWEN_SPECIALS  # noqa: E402
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402

pytestmark = pytest.mark.parity

SMALL = dict(hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-6,
             rope_theta=10000.0, initializer_range=0.2)
PAD_ROWS = 60  # the Qwen2 folder's embedding rows beyond its tokens
# name -> (tokenizer style, layout, weights dtype)
CASES = {
    "llama3": ("llama3", "save_pretrained", torch.float32),
    "smollm2": ("smollm2", "save_pretrained", torch.bfloat16),
    "qwen2": ("qwen2", "hub", torch.bfloat16),
}
TEXTS = ["Hello, world! It's a test.", "def f(x):\n    return x ** 2",
         "To be, or not to be: 1234 cafe\u0301", "<|im_start|>user\nhi<|im_end|> <tool_call>"]
NEW_TOKENS = 12


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add overhead
    yield
    torch.set_num_threads(threads)


def special_ids(style: str, ref: PreTrainedTokenizerFast) -> tuple[int, int, int]:
    """(bos, eos, second eos) ids of the style's special tokens."""
    names = LLAMA_SPECIALS if style == "llama3" else QWEN_SPECIALS
    return tuple(ref.convert_tokens_to_ids(n) for n in names)  # type: ignore[return-value]


def random_model(style: str, n_tokens: int, seed: int):
    """A random reference model; Qwen2 with PAD_ROWS more rows, and those rows made likely."""
    qwen = style == "qwen2"
    rows = n_tokens + PAD_ROWS if qwen else n_tokens
    config_class, model_class = (Qwen2Config, Qwen2ForCausalLM) if qwen else (
        LlamaConfig, LlamaForCausalLM)
    extra = dict(use_sliding_window=False) if qwen else {}
    torch.manual_seed(seed)
    hf = model_class(config_class(vocab_size=rows, tie_word_embeddings=style != "llama3",
                                  **SMALL, **extra)).eval()
    if qwen:
        with torch.no_grad():  # tied: bigger padding rows get bigger logits
            hf.model.embed_tokens.weight[n_tokens:] *= 4.0
    return hf


def round_to(hf, dtype) -> None:
    """The reference holds the numbers the file will hold (bfloat16 rounds them)."""
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(p.to(dtype).to(torch.float32))


def write_hub_files(folder: Path, hf, bos: int, eos: tuple[int, ...]) -> None:
    """config.json, tokenizer.json and the two small configs as a hub download holds them."""
    c = hf.config
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": bos,
        "eos_token_id": eos[0], "hidden_act": "silu", "hidden_size": c.hidden_size,
        "initializer_range": 0.02, "intermediate_size": c.intermediate_size,
        "max_position_embeddings": c.max_position_embeddings, "max_window_layers": 2,
        "model_type": "qwen2", "num_attention_heads": c.num_attention_heads,
        "num_hidden_layers": c.num_hidden_layers,
        "num_key_value_heads": c.num_key_value_heads, "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": SMALL["rope_theta"], "sliding_window": 128, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
        "use_sliding_window": False, "vocab_size": c.vocab_size}, indent=2))
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text())
    data["model"]["merges"] = [" ".join(pair) for pair in data["model"]["merges"]]
    path.write_text(json.dumps(data, ensure_ascii=False))
    decoder = {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                 "single_word", "special")}
               for t in data["added_tokens"]}
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "add_prefix_space": False, "added_tokens_decoder": decoder, "bos_token": None,
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "errors": "replace",
        "model_max_length": 131072, "tokenizer_class": "Qwen2Tokenizer",
        "clean_up_tokenization_spaces": False, "split_special_tokens": False}, indent=2))
    (folder / "generation_config.json").write_text(json.dumps({
        "bos_token_id": bos, "eos_token_id": list(eos), "do_sample": False,
        "transformers_version": "4.37.0"}, indent=2))


def build_folder(name: str, models: Path):
    """The folder models/<name>; returns (reference model, reference tokenizer, eos id)."""
    style, layout, dtype = CASES[name]
    folder = models / name
    json_path = build_tokenizer(style, models / "tokenizers")
    ref = PreTrainedTokenizerFast(tokenizer_file=str(json_path))
    bos, eos, eos2 = special_ids(style, ref)
    hf = random_model(style, len(ref), seed=len(name))
    round_to(hf, dtype)
    hf.generation_config.bos_token_id, hf.generation_config.eos_token_id = bos, eos
    copy.deepcopy(hf).to(dtype).save_pretrained(folder, safe_serialization=True)
    if layout == "hub":
        (folder / "tokenizer.json").write_bytes(json_path.read_bytes())
        write_hub_files(folder, hf, bos, (eos2, eos))  # Qwen2.5-Instruct: <|im_end|> first
        return hf, ref, eos2
    PreTrainedTokenizerFast(tokenizer_file=str(json_path), bos_token=ref.convert_ids_to_tokens(
        bos), eos_token=ref.convert_ids_to_tokens(eos)).save_pretrained(folder)
    return hf, ref, eos


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    hf, ref, eos = build_folder(request.param, models)
    model, tok = tinygpt.load(models / request.param, models)
    return request.param, hf, ref, eos, model, tok


def hf_generate(hf, prompt: list[int], eos: int, **kwargs) -> list[int]:
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                          eos_token_id=eos, pad_token_id=eos, max_new_tokens=NEW_TOKENS,
                          **kwargs)
    return out[0, len(prompt):].tolist()


def test_the_folder_loads_with_its_tokenizer(loaded) -> None:
    name, hf, ref, eos, model, tok = loaded
    assert model.config.vocab_size == hf.config.vocab_size
    assert tok.vocab_size == len(ref)
    assert tok.padded_size == hf.config.vocab_size
    assert tok.eos_token_id == eos  # the first of the folder's EOS ids
    assert model.metadata["source"] == ("qwen2" if name == "qwen2" else "llama")


def test_text_is_cut_as_the_model_cuts_it(loaded) -> None:
    _, _, ref, _, _, tok = loaded
    for text in TEXTS:
        ids = tok.encode(text)
        assert ids == ref.encode(text, add_special_tokens=False), text
        assert tok.decode(ids) == ref.decode(ids), text


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_generation_from_text_matches_transformers(loaded, strategy: str) -> None:
    _, hf, ref, eos, model, tok = loaded
    settings = dict(num_beams=3) if strategy == "beam" else {}
    for text in TEXTS[:3]:
        prompt = tok.encode(text)
        result = generate(model, np.array(prompt), NEW_TOKENS, strategy=strategy,
                          eos_token_id=tok.eos_token_id, **settings)
        theirs = hf_generate(hf, prompt, eos, **settings)
        assert result.tokens.tolist() == theirs, (strategy, text)
        assert tok.decode(theirs) == ref.decode(theirs)  # padding ids: nothing, as there


def test_padding_rows_are_generated_and_shown(loaded) -> None:
    """Qwen2: ids past the tokenizer's tokens come out of the model; they decode to nothing,
    as in transformers, and display as a visible placeholder."""
    name, hf, ref, eos, model, tok = loaded
    if name != "qwen2":
        pytest.skip("only the Qwen2 folder has padding rows")
    made = generate(model, np.array(tok.encode(TEXTS[0])), NEW_TOKENS).tokens.tolist()
    unused = [i for i in made if i >= tok.vocab_size]
    assert unused, "the padding rows were made likely: greedy picks some"
    assert tok.decode(unused) == ref.decode(unused) == ""
    assert tok.token_display(unused[0]) == f"⟨unused id {unused[0]}⟩"
    with pytest.raises(IndexError):
        tok.token_bytes(hf.config.vocab_size)


def test_more_tokens_than_rows_is_refused(tmp_path) -> None:
    hf, _, _ = build_folder("llama3", tmp_path)
    config_path = tmp_path / "llama3" / "config.json"
    config = json.loads(config_path.read_text())
    config["vocab_size"] -= 1
    config_path.write_text(json.dumps(config))
    with torch.no_grad():  # the weights must agree with the config, else those are refused
        small = copy.deepcopy(hf)
        small.resize_token_embeddings(config["vocab_size"])
    small.save_pretrained(tmp_path / "llama3", safe_serialization=True)
    config_path.write_text(json.dumps(config))
    with pytest.raises(tinygpt.CheckpointError, match=r"llama3/tokenizer.json: .*vocab_size"):
        tinygpt.load(tmp_path / "llama3", tmp_path)


def test_folder_refusals_name_the_file(tmp_path) -> None:
    """The folder's tokenizer files obey the loaders' rules: one CheckpointError naming the
    file relative to the models folder (never an absolute path)."""
    models = tmp_path / "models"
    build_folder("llama3", models)
    folder = models / "llama3"
    outside = tmp_path / "tokenizer.json"
    (folder / "tokenizer.json").rename(outside)
    with pytest.raises(tinygpt.CheckpointError, match=r"^llama3: no tokenizer.json"):
        tinygpt.load(folder, models)
    (folder / "tokenizer.json").symlink_to(outside)  # a link out of the models folder
    with pytest.raises(tinygpt.CheckpointError, match=r"^llama3/tokenizer.json: ") as err:
        tinygpt.load(folder, models)
    assert str(tmp_path) not in str(err.value)
    (folder / "tokenizer.json").unlink()
    outside.rename(folder / "tokenizer.json")
    (folder / "generation_config.json").unlink()
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    with pytest.raises(tinygpt.CheckpointError,
                       match=r"^llama3/tokenizer_config.json: '<\|im_end\|>' is not"):
        tinygpt.load(folder, models)
