"""tinygpt.tokenizer.gguf_vocab: a GGUF file's tokenizer metadata read into the tokenizer.json
pipelines gives the ids of the tokenizers library on the model's own tokenizer.json, for each
pre-tokenizer name llama.cpp writes (smollm: digits one by one; gpt-2; qwen2; llama-bpe with
ignore_merges); unknown names are refused, named."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from tests.tinygpt.checkpoint.gguf_files import PRE, vocabulary
from tests.tinygpt.tokenizer.hf_files import TEXTS, build, reference_ids
from tinygpt.tokenizer.gguf_vocab import PRE_TOKENIZERS, tokenizer_from_gguf

tokenizers = pytest.importorskip("tokenizers", reason="the tokenizers library is the reference")


def metadata(tokenizer_json, style: str) -> dict:
    tokens, merges, types = vocabulary(tokenizer_json)
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": PRE[style],
            "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges,
            "tokenizer.ggml.token_type": np.array(types, np.int32),
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.add_bos_token": True, "tokenizer.chat_template": "{{ x }}"}


@pytest.mark.parametrize("style", list(PRE))
def test_the_ids_are_those_of_the_model_s_own_tokenizer_json(tmp_path, style):
    path = build(style, tmp_path)
    tok = tokenizer_from_gguf(metadata(path, style))
    ref = tokenizers.Tokenizer.from_file(str(path))
    texts = [t for t in TEXTS if style != "qwen2" or unicodedata.normalize("NFC", t) == t]
    for text in texts:  # Qwen2's tokenizer.json normalizes (NFC); llama.cpp's GGUF does not
        assert tok.encode(text) == reference_ids(ref, text), (style, text)
        assert tok.decode(tok.encode(text)) == text
    assert (tok.bos_token_id, tok.eos_token_id, tok.add_bos_token) == (1, 2, True)
    assert tok.chat_template == "{{ x }}"


def test_smollm_splits_digits_one_by_one(tmp_path):
    tok = tokenizer_from_gguf(metadata(build("smollm2", tmp_path), "smollm2"))
    assert [tok.decode([i]) for i in tok.encode("2026")] == ["2", "0", "2", "6"]


@pytest.mark.parametrize("key,value,message", [
    ("tokenizer.ggml.pre", "falcon", "'falcon' is not a known pre-tokenizer"),
    ("tokenizer.ggml.model", "llama", "'llama' is not supported"),
    ("tokenizer.ggml.bos_token_id", 10**6, "is not an id"),
    ("tokenizer.ggml.token_type", np.array([1], np.int32), "one per token"),
    ("tokenizer.ggml.tokens", ["a"] * 300, "twice"),
])
def test_what_is_not_built_is_refused_by_name(tmp_path, key, value, message):
    md = metadata(build("smollm2", tmp_path), "smollm2")
    md[key] = value
    if key == "tokenizer.ggml.tokens":
        md["tokenizer.ggml.token_type"] = np.ones(300, np.int32)
    with pytest.raises(ValueError, match=message):
        tokenizer_from_gguf(md)


def test_every_name_maps_to_a_pipeline():
    assert set(PRE.values()) == set(PRE_TOKENIZERS)
