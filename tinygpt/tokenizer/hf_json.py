"""Byte-level BPE tokenizers from a Hugging Face tokenizer.json (Llama-3, SmolLM2, Qwen2, GPT-2).

Interface (for the folder loader, `tinygpt.load(folder)`):
- `load_tokenizer_json(path, *, root=None) -> BPETokenizer`: reads tokenizer.json (at most
  MAX_TOKENIZER_BYTES, checked before reading; when `root` is given the file must really lie
  inside it, links followed). Any problem raises `CheckpointError` whose message names the
  file relative to `root` (never an absolute path).
- `read_bos_eos(folder, tokenizer, *, root=None) -> BosEos`: the BOS / EOS ids named by
  generation_config.json (what generation uses) or else tokenizer_config.json.
- `read_chat_template(folder, *, root=None) -> str | None`: tokenizer_config.json's
  "chat_template" (apply_chat_template renders it).
- `load_folder_tokenizer(folder, *, root=None) -> BPETokenizer`: all of the above, the
  tokenizer carrying those bos / eos ids and the chat template.
The tokenizer is a plain `BPETokenizer` with a `TextPipeline`, so encode, decode, explain
(the merge replay), token_display and saving in a checkpoint work as for GPT-2.
`encode(text)` gives the ids of `Tokenizer.from_file(path).encode(text,
add_special_tokens=False)`: every added token's text becomes its one id, as there.

What loads: model BPE (merges as "a b" strings or ["a", "b"] pairs, ignore_merges), the NFC
normalizer, the pre-tokenizers Split (known regexes only, see pipeline.KNOWN_SPLIT_PATTERNS),
Digits and ByteLevel (with or without its regex) in a Sequence, added tokens, the ByteLevel
decoder. The post-processor only matters with add_special_tokens=True and is not read.
Refused, with a message naming it: any other model, normalizer, pre-tokenizer or decoder
(WordPiece, Unigram, SentencePiece-style Metaspace, ...), byte_fallback, BPE dropout,
word prefixes or suffixes, added tokens that strip spaces or match single words, truncation.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from tinygpt.caps import (
    MAX_ADDED_TOKEN_CHARS,
    MAX_ADDED_TOKENS,
    MAX_JSON_BYTES,
    MAX_TOKENIZER_BYTES,
    MAX_VOCAB,
    max_merges,
)
from tinygpt.safe_io import (
    CheckpointError,
    check_inside,
    file_label,
    read_json,
)
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.tokenizer.pipeline import KNOWN_SPLIT_PATTERNS, TextPipeline
from tinygpt.tokenizer.pretokenizer import unicode_to_bytes

__all__ = ["BosEos", "load_folder_tokenizer", "load_tokenizer_json", "read_bos_eos",
           "read_chat_template",
           "tokenizer_from_dict"]

MESSAGE_CHARS = 300  # a refusal quotes at most this much


# ----------------------------------------------------------------------------- reading files


def _real_file(path: Path, root: Path | None) -> tuple[Path, str]:
    """(path to read, label for messages); inside `root` when one is given."""
    label = file_label(path, root)
    if not path.is_file():
        raise CheckpointError(f"{label}: missing")
    return (check_inside(path, root, label) if root is not None else path), label


def load_tokenizer_json(path: str | os.PathLike, *, root: str | os.PathLike | None = None
                        ) -> BPETokenizer:
    """A tokenizer.json -> BPETokenizer; CheckpointError naming the file on any problem."""
    real, label = _real_file(Path(path), Path(root) if root is not None else None)
    data = read_json(real, MAX_TOKENIZER_BYTES, label)
    try:
        return tokenizer_from_dict(data)
    except CheckpointError:
        raise
    except ValueError as err:
        raise CheckpointError(f"{label}: {err}"[:MESSAGE_CHARS]) from err


def tokenizer_from_dict(data: dict) -> BPETokenizer:
    """The parsed tokenizer.json -> BPETokenizer; ValueError naming what is unsupported."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    for key in ("truncation", "padding"):
        if data.get(key) is not None:
            raise ValueError(f"{key} is set; only files without {key} are supported")
    encoder, pairs, ignore_merges = _bpe_model(data.get("model"))
    added, normalized = _added_tokens(data.get("added_tokens", []))
    _check_decoder(data.get("decoder"))
    pipeline = TextPipeline(normalizer=_normalizer(data.get("normalizer")),
                            steps=_pre_tokenizer_steps(data.get("pre_tokenizer")),
                            ignore_merges=ignore_merges, normalized_tokens=normalized)
    vocab = _vocab_bytes(encoder, added)
    merges = _merge_ids(encoder, pairs)
    return BPETokenizer(vocab, merges, added, pipeline=pipeline)


# ----------------------------------------------------------------------------- the parts


def _kind(part, where: str) -> str:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        raise ValueError(f"{where} must be an object with a type")
    if part["type"] == "Metaspace":
        raise ValueError(f"{where} Metaspace (SentencePiece-style) is not supported; "
                         "only byte-level BPE tokenizers load")
    return part["type"]


def _flag(part: dict, key: str, default: bool, where: str) -> bool:
    """A true / false of tokenizer.json (absent or null: `default`); "no" or 0 is refused."""
    value = part.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"{where} {key} {str(value)[:20]!r} is not true or false")
    return value


def _bpe_model(model) -> tuple[dict[str, int], list, bool]:
    """(vocab, merges as given, ignore_merges) of model BPE; refuses everything else."""
    kind = _kind(model, "model")
    if kind != "BPE":
        raise ValueError(f"model type {kind!r} is not supported (only byte-level BPE)")
    if _flag(model, "byte_fallback", False, "model"):
        raise ValueError("model byte_fallback is not supported (a SentencePiece-style BPE)")
    if model.get("dropout") not in (None, 0, 0.0):
        raise ValueError("model dropout is set: BPE dropout is random, not supported")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ValueError(f"model {key} {model[key]!r} is not supported")
    vocab, merges = model.get("vocab"), model.get("merges")
    if not (isinstance(vocab, dict) and all(type(i) is int for i in vocab.values())):
        raise ValueError("model vocab must map token strings to ids")
    if not isinstance(merges, list):
        raise ValueError("model merges must be a list")
    if len(vocab) > MAX_VOCAB:  # counted before any is read: a cap, not a long loop
        raise ValueError(f"model vocab has {len(vocab):,} tokens; the cap is {MAX_VOCAB:,}")
    if len(merges) > max_merges(len(vocab)):
        raise ValueError(f"model merges: {len(merges):,} for {len(vocab):,} tokens; the cap is "
                         f"{max_merges(len(vocab)):,} (tinygpt.caps.max_merges)")
    return vocab, merges, _flag(model, "ignore_merges", False, "model")


def _normalizer(part) -> str | None:
    """None or "NFC" (also NFC alone in a Sequence); anything else is refused."""
    if part is None:
        return None
    kind = _kind(part, "normalizer")
    if kind == "Sequence":
        inner = part.get("normalizers")
        if not isinstance(inner, list) or len(inner) > 1:
            raise ValueError("normalizer Sequence: only a single NFC is supported")
        return _normalizer(inner[0]) if inner else None
    if kind != "NFC":
        raise ValueError(f"normalizer {kind!r} is not supported (only NFC)")
    return "NFC"


def _pre_tokenizer_steps(part) -> tuple[str, ...]:
    """The pipeline steps of Split / Digits pre-tokenizers ending in one ByteLevel."""
    parts = part.get("pretokenizers") if _kind(part, "pre_tokenizer") == "Sequence" else [part]
    if not isinstance(parts, list) or not parts:
        raise ValueError("pre_tokenizer Sequence must list its pre-tokenizers")
    steps: list[str] = []
    for i, step in enumerate(parts):
        kind = _kind(step, "pre_tokenizer")
        if kind not in ("ByteLevel", "Split", "Digits"):
            raise ValueError(f"pre_tokenizer {kind!r} is not supported")
        if (kind == "ByteLevel") != (i == len(parts) - 1):
            raise ValueError("pre_tokenizer: exactly one ByteLevel, the last, is supported")
        if kind == "ByteLevel":
            steps.extend(_byte_level_steps(step))
        elif kind == "Split":
            steps.append(_split_step(step))
        else:
            digit = _flag(step, "individual_digits", False, "pre_tokenizer Digits")
            steps.append("digit" if digit else "digits")
    return tuple(steps)


def _byte_level_steps(step: dict) -> list[str]:
    if _flag(step, "add_prefix_space", False, "pre_tokenizer ByteLevel"):
        raise ValueError("pre_tokenizer ByteLevel add_prefix_space is not supported")
    return ["gpt2"] if _flag(step, "use_regex", True, "pre_tokenizer ByteLevel") else []


def _split_step(step: dict) -> str:
    pattern = step.get("pattern")
    regex = pattern.get("Regex") if isinstance(pattern, dict) else None
    if regex not in KNOWN_SPLIT_PATTERNS:
        shown = repr(pattern)[:80]
        raise ValueError(f"pre_tokenizer Split pattern {shown} is not one of the known "
                         "patterns (GPT-2, Llama-3, Qwen2); it is refused, not approximated")
    if step.get("behavior") != "Isolated" or _flag(step, "invert", False, "pre_tokenizer Split"):
        raise ValueError(f"pre_tokenizer Split behavior {step.get('behavior')!r} "
                         f"(invert {step.get('invert')!r}) is not supported (only Isolated)")
    return KNOWN_SPLIT_PATTERNS[regex]


def _check_decoder(part) -> None:
    kind = _kind(part, "decoder")
    if kind != "ByteLevel":
        raise ValueError(f"decoder {kind!r} is not supported (only ByteLevel)")


def _added_tokens(tokens) -> tuple[dict[str, int], tuple[str, ...]]:
    """({content: id} of every added token, the contents matched after normalization)."""
    if not isinstance(tokens, list):
        raise ValueError("added_tokens must be a list")
    if len(tokens) > MAX_ADDED_TOKENS:  # counted before any is read
        raise ValueError(f"{len(tokens):,} added tokens; the cap is {MAX_ADDED_TOKENS:,} "
                         "(tinygpt.caps)")
    added: dict[str, int] = {}
    normalized: list[str] = []
    for token in tokens:
        if not (isinstance(token, dict) and isinstance(token.get("content"), str)
                and token["content"] and type(token.get("id")) is int):
            raise ValueError("every added token needs a non-empty content and an integer id")
        if len(token["content"]) > MAX_ADDED_TOKEN_CHARS:
            raise ValueError(f"added token {token['content'][:40]!r}... has "
                             f"{len(token['content']):,} characters; the cap is "
                             f"{MAX_ADDED_TOKEN_CHARS} (tinygpt.caps)")
        where = f"added token {token['content'][:40]!r}:"
        for flag in ("single_word", "lstrip", "rstrip"):
            if _flag(token, flag, False, where):
                raise ValueError(f"{where} {flag} is not supported")
        if added.setdefault(token["content"], token["id"]) != token["id"]:
            raise ValueError(f"{where} listed twice")
        if _flag(token, "normalized", not _flag(token, "special", False, where), where):
            normalized.append(token["content"])
    return added, tuple(normalized)


def _vocab_bytes(encoder: dict[str, int], added: dict[str, int]) -> list[bytes]:
    """Each id's bytes: the model's tokens through GPT-2's byte alphabet, added tokens as
    their UTF-8 text. The ids must be exactly 0 .. n-1."""
    by_id: dict[int, bytes] = {}
    for text, i in encoder.items():
        by_id[i] = _byte_level_bytes(text)
    for text, i in added.items():
        data = text.encode("utf-8")
        if by_id.setdefault(i, data) != data:
            raise ValueError(f"added token {text!r} has id {i}, which the vocab gives to "
                             "another token")
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError("token ids must be exactly 0 .. n-1 (model vocab and added tokens)")
    return [by_id[i] for i in range(len(by_id))]


@functools.cache
def _to_latin1() -> dict[int, str]:
    """str.translate table: GPT-2's alphabet -> the Latin-1 character of each byte, and every
    other Latin-1 character -> U+FFFF, which then cannot be encoded (so it is refused)."""
    table = {code: "\uffff" for code in range(256)}
    table.update({ord(ch): chr(b) for ch, b in unicode_to_bytes().items()})
    return table


def _byte_level_bytes(text: str) -> bytes:
    """A token string in GPT-2's byte alphabet -> its bytes (gpt2_string_to_bytes, faster:
    a vocabulary has 150,000 of them)."""
    try:
        return text.translate(_to_latin1()).encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError(f"model token {text[:40]!r} is not byte-level") from None


def _merge_ids(encoder: dict[str, int], merges: list) -> list[tuple[int, int, int]]:
    """Merges ("a b" or ["a", "b"]) -> (left id, right id, merged id)."""
    out: list[tuple[int, int, int]] = []
    for merge in merges:
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not (isinstance(parts, list) and len(parts) == 2
                and all(isinstance(p, str) and p in encoder for p in parts)):
            raise ValueError(f"merge {str(merge)[:40]!r} is not two tokens of the vocab")
        left, right = parts
        if left + right not in encoder:
            raise ValueError(f"merge {str(merge)[:40]!r}: {(left + right)[:40]!r} is not in "
                             "the vocab")
        out.append((encoder[left], encoder[right], encoder[left + right]))
    return out


# ----------------------------------------------------------------------------- BOS / EOS


@dataclass(frozen=True)
class BosEos:
    """The begin- and end-of-text ids a model's files name (eos: all of them, first = main)."""

    bos: int | None
    eos: tuple[int, ...]


def _config(folder: Path, name: str, root: Path | None) -> dict:
    path = folder / name
    if not path.is_file():
        return {}
    real, label = _real_file(path, root)
    value = read_json(real, MAX_JSON_BYTES, label)
    if not isinstance(value, dict):
        raise CheckpointError(f"{label}: not a JSON object")
    return value


def _token_id(value, tok: BPETokenizer, label: str) -> int | None:
    """tokenizer_config's "eos_token": a token text (or {"content": text}) -> its id."""
    text = value.get("content") if isinstance(value, dict) else value
    if text is None:
        return None
    if not isinstance(text, str) or text not in tok.special_tokens:
        raise CheckpointError(f"{label}: {str(text)[:60]!r} is not an added token of "
                              "tokenizer.json")
    return tok.special_tokens[text]


def _ids(value, tok: BPETokenizer, label: str) -> tuple[int, ...]:
    """generation_config's "eos_token_id": an id or a non-empty list of ids, each checked."""
    ids = value if isinstance(value, list) else [value]
    if not ids:  # callers take ids[0]
        raise CheckpointError(f"{label}: an empty list where token ids are expected")
    if not all(type(i) is int and 0 <= i < tok.vocab_size for i in ids):
        raise CheckpointError(f"{label}: {str(value)[:60]} are not ids of the tokenizer's "
                              f"{tok.vocab_size:,} tokens")
    return tuple(ids)


def read_bos_eos(folder: str | os.PathLike, tok: BPETokenizer, *,
                 root: str | os.PathLike | None = None) -> BosEos:
    """BOS / EOS ids from generation_config.json, else tokenizer_config.json (else none)."""
    folder = Path(folder)
    root_path = Path(root) if root is not None else None
    gen = _config(folder, "generation_config.json", root_path)
    tcfg = _config(folder, "tokenizer_config.json", root_path)
    gen_label = file_label(folder / "generation_config.json", root_path)
    tcfg_label = file_label(folder / "tokenizer_config.json", root_path)
    bos: int | None = None
    eos: tuple[int, ...] = ()
    if gen.get("bos_token_id") is not None:
        bos = _ids(gen["bos_token_id"], tok, gen_label)[0]
    elif tcfg.get("bos_token") is not None:
        bos = _token_id(tcfg["bos_token"], tok, tcfg_label)
    if gen.get("eos_token_id") is not None:
        eos = _ids(gen["eos_token_id"], tok, gen_label)
    elif tcfg.get("eos_token") is not None:
        eos = (_token_id(tcfg["eos_token"], tok, tcfg_label),)
    return BosEos(bos, eos)


def read_chat_template(folder: str | os.PathLike, *, root: str | os.PathLike | None = None
                       ) -> str | None:
    """tokenizer_config.json's "chat_template" (the default one when it names several)."""
    root_path = Path(root) if root is not None else None
    value = _config(Path(folder), "tokenizer_config.json", root_path).get("chat_template")
    if isinstance(value, list):  # [{"name": "default", "template": ...}, {"name": "tool_use"...}]
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        value = named.get("default")
    if value is not None and not isinstance(value, str):
        label = file_label(Path(folder) / "tokenizer_config.json", root_path)
        raise CheckpointError(f"{label}: chat_template is not text")
    return value


def load_folder_tokenizer(folder: str | os.PathLike, *, root: str | os.PathLike | None = None,
                          padded_size: int | None = None) -> BPETokenizer:
    """tokenizer.json of a model folder, carrying the folder's BOS / EOS ids.

    Generation stops on one EOS id (tinygpt.generate takes one): the first the folder names.
    `padded_size`: the model's embedding rows, when more than the tokens (BPETokenizer);
    fewer raises ValueError.
    """
    folder = Path(folder)
    tok = load_tokenizer_json(folder / "tokenizer.json", root=root)
    ids = read_bos_eos(folder, tok, root=root)
    return BPETokenizer(tok.vocab, tok.merges, tok.special_tokens, pipeline=tok.pipeline,
                        bos_token_id=ids.bos, eos_token_id=ids.eos[0] if ids.eos else None,
                        padded_size=padded_size,
                        chat_template=read_chat_template(folder, root=root))
