"""The tokenizer a GGUF file describes in its metadata, read into the tokenizer.json pipelines.

A GGUF file carries no tokenizer.json. Its `tokenizer.ggml.*` keys hold the same parts:
`model` ("gpt2": byte-level BPE; "llama" would be SentencePiece, refused), `tokens` (each id's
text in GPT-2's byte alphabet), `merges` ("a b"), `token_type` (1 normal, 3 control, 4 user
defined, ...), `bos_token_id` / `eos_token_id`, `add_bos_token`, and `pre`, the NAME of the
pre-tokenizer llama.cpp applies. Here that name is mapped onto the steps a tokenizer.json
would list (PRE_TOKENIZERS), and the whole is handed to hf_json.tokenizer_from_dict: one
tokenizer class, one set of checks, whichever file the tokenizer came from.

- `smollm` (SmolLM2): digits one by one, then GPT-2's byte-level split, as SmolLM2's own
  tokenizer.json and llama.cpp do.
- `gpt-2`: GPT-2's split. `qwen2`, `llama-bpe` (Llama-3, with its ignore_merges, as
  llama.cpp): their regex, then bytes.
- any other name is refused, naming it: a wrong split would give other ids silently.

Control tokens (type 3, e.g. `<|im_start|>`) and user-defined ones (type 4) are added tokens:
typed as text they become their one id, as in transformers and llama.cpp. Nothing is
normalized (llama.cpp applies no NFC for these). `encode` adds no BOS; the file's wish is
kept as `tokenizer.add_bos_token`, and its chat template as `tokenizer.chat_template`.
"""

from __future__ import annotations

import numpy as np

from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.hf_json import tokenizer_from_dict
from tinygpt.tokenizer.pipeline import KNOWN_SPLIT_PATTERNS

__all__ = ["PRE_TOKENIZERS", "tokenizer_from_gguf"]

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types that are matched whole in the text
_REGEX = {name: regex for regex, name in KNOWN_SPLIT_PATTERNS.items()}


def _split(name: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": _REGEX[name]}, "behavior": "Isolated",
            "invert": False}


_BYTES = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}
_GPT2 = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
# tokenizer.ggml.pre -> (the pre_tokenizer of the model's own tokenizer.json, ignore_merges)
PRE_TOKENIZERS = {
    "smollm": ({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _GPT2]}, False),
    "gpt-2": (_GPT2, False),
    "qwen2": ({"type": "Sequence", "pretokenizers": [_split("qwen2"), _BYTES]}, False),
    "llama-bpe": ({"type": "Sequence", "pretokenizers": [_split("llama3"), _BYTES]}, True),
}


def _strings(metadata: dict, key: str) -> list[str]:
    value = metadata.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{key} must be an array of strings")
    return value


def _token_types(metadata: dict, n: int) -> np.ndarray:
    types = metadata.get("tokenizer.ggml.token_type")
    if types is None:
        return np.ones(n, np.int64)
    if not isinstance(types, np.ndarray) or types.dtype.kind not in "iu" or len(types) != n:
        raise ValueError(f"tokenizer.ggml.token_type must be {n:,} integers, one per token")
    return types


def _special_id(metadata: dict, key: str, n: int) -> int | None:
    value = metadata.get(f"tokenizer.ggml.{key}")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise ValueError(f"tokenizer.ggml.{key} {str(value)[:20]} is not an id of the "
                         f"{n:,} tokens")
    return value


def tokenizer_json(metadata: dict) -> dict:
    """The tokenizer.json dict the metadata describes (ValueError naming what is refused)."""
    model = metadata.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"tokenizer.ggml.model {str(model)[:40]!r} is not supported (only "
                         "'gpt2', byte-level BPE)")
    pre = metadata.get("tokenizer.ggml.pre", "gpt-2")
    if pre not in PRE_TOKENIZERS:
        raise ValueError(f"tokenizer.ggml.pre {str(pre)[:40]!r} is not a known pre-tokenizer "
                         f"({', '.join(PRE_TOKENIZERS)}); it is refused, not approximated")
    tokens = _strings(metadata, "tokenizer.ggml.tokens")
    merges = _strings(metadata, "tokenizer.ggml.merges")
    types = _token_types(metadata, len(tokens))
    whole = {int(i) for i in np.flatnonzero((types == CONTROL) | (types == USER_DEFINED))}
    vocab = {text: i for i, text in enumerate(tokens) if i not in whole}
    added = [{"id": i, "content": tokens[i], "special": int(types[i]) == CONTROL,
              "normalized": False} for i in sorted(whole)]
    if len(vocab) + len(added) != len(tokens):
        raise ValueError("tokenizer.ggml.tokens lists a token twice")
    pre_tokenizer, ignore_merges = PRE_TOKENIZERS[pre]
    return {"model": {"type": "BPE", "vocab": vocab, "merges": merges,
                      "ignore_merges": ignore_merges},
            "added_tokens": added, "pre_tokenizer": pre_tokenizer,
            "decoder": {"type": "ByteLevel"}}


def tokenizer_from_gguf(metadata: dict, padded_size: int | None = None) -> BPETokenizer:
    """The BPETokenizer of a GGUF file's metadata, with its BOS / EOS ids, `add_bos_token`
    and `chat_template` (None when the file has none). ValueError on anything refused."""
    tok = tokenizer_from_dict(tokenizer_json(metadata))
    n = tok.vocab_size
    tok = BPETokenizer(tok.vocab, tok.merges, tok.special_tokens, pipeline=tok.pipeline,
                       bos_token_id=_special_id(metadata, "bos_token_id", n),
                       eos_token_id=_special_id(metadata, "eos_token_id", n),
                       padded_size=padded_size, chat_template=_chat_template(metadata))
    tok.add_bos_token = metadata.get("tokenizer.ggml.add_bos_token") is True
    return tok


def _chat_template(metadata: dict) -> str | None:
    template = metadata.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise ValueError("tokenizer.chat_template must be text")
    return template
