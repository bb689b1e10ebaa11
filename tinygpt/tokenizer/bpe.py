"""Byte-level BPE tokenizer, compatible with GPT-2.

How text becomes token ids
1. Special tokens ("<|endoftext|>") are cut out first, by their exact text when allowed.
2. The rest is split into *chunks* with GPT-2's pre-tokenizer regex (words with their
   leading space, runs of digits, runs of punctuation, runs of whitespace). Merges never
   cross a chunk boundary.
3. Each chunk is turned into UTF-8 bytes; every byte is a token (256 base tokens).
4. The learned merges are applied by rank: repeatedly merge the adjacent pair that was
   learned earliest, until no learned pair is left.
A tokenizer read from tokenizer.json or a GGUF file carries a `pipeline` (tokenizer.pipeline)
doing steps 1-2 its own way (normalizer, Llama-3 / Qwen2 split, digits); 3-4 are the same.

Policies
- Lossless: ``decode(encode(text)) == text`` for every valid Unicode string (unless the
  vocab lacks a byte, as SmolLM2's does for 21 control bytes: those are dropped).
- Lone surrogates (e.g. "\\ud800") are not valid Unicode text and cannot be UTF-8 encoded:
  ``encode`` and ``train`` reject them with ``ValueError`` (GPT-2 does the same).
- ``decode`` reads the joined bytes as UTF-8 with ``errors="replace"`` (a cut character
  shows U+FFFD); ``decode_bytes`` returns the raw bytes instead.
- The pre-tokenizer regex is built from ``unicodedata`` (Unicode 14 in Python 3.11):
  characters assigned later count as "other" symbols.
"""

from __future__ import annotations

import io
import json
import unicodedata
from collections import Counter
from collections.abc import Collection
from itertools import pairwise
from pathlib import Path

from tinygpt.caps import (
    MAX_ADDED_TOKEN_CHARS,
    MAX_ADDED_TOKENS,
    MAX_TOKENIZER_BYTES,
    MAX_VOCAB,
    max_merges,
)
from tinygpt.safe_io import parse_json, read_capped, read_json
from tinygpt.tokenizer.added_tokens import AddedTokens
from tinygpt.tokenizer.bpe_merges import MergeRun, Pair, PairCounts, merge_pair
from tinygpt.tokenizer.chat_template import render_chat
from tinygpt.tokenizer.chunk_cache import _ByteLRU
from tinygpt.tokenizer.explanation import ChunkExplanation, Explanation, MergeStep
from tinygpt.tokenizer.pipeline import Matchers, TextPipeline
from tinygpt.tokenizer.pretokenizer import (
    bytes_to_gpt2_string,
    bytes_to_unicode,
    gpt2_string_to_bytes,
    pretokenize,
    pretokenize_pattern,
    unicode_to_bytes,
)

__all__ = [  # the pre-tokenizer and merge helpers are re-exported: one import for students
    "BPETokenizer", "ChunkExplanation", "Explanation", "MergeStep", "bytes_to_gpt2_string",
    "bytes_to_unicode", "gpt2_string_to_bytes", "merge_pair", "pretokenize",
    "pretokenize_pattern", "unicode_to_bytes",
]

ENDOFTEXT = "<|endoftext|>"
JSON_FORMAT = "tinygpt-bpe"

# explain() keeps this much of a replay (each cut is reported: steps_total, chunks_total)
MAX_REPLAY_CHUNKS = 256  # the last chunks of the text (the model reads a prompt's end)
MAX_REPLAY_STEPS = 64  # the first merge steps of each chunk
MAX_REPLAY_IDS = 2**18  # token ids kept over all recorded steps (~2 MB of lists)
CHUNK_CACHE_BYTES = 32 * 2**20  # encode()'s chunk cache, least recently used dropped first
MAX_MATCHERS = 8  # added-token matchers kept, one per set of allowed tokens (True: all)
SHORT_CHUNK = 8  # bytes; below this the plain merge loop beats the heap (measured: 2-11 vs 9-19 us)

def _to_utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"text contains a lone surrogate {text[err.start]!r} at position {err.start}; "
            "it is not valid Unicode and has no UTF-8 bytes"
        ) from err



# ----------------------------------------------------------------------------------------
# The tokenizer
# ----------------------------------------------------------------------------------------


class BPETokenizer:
    """Byte-level BPE tokenizer (GPT-2 style).

    vocab: list of token bytes, index = token id (special tokens hold their marker's bytes).
    merges: list of (left_id, right_id, new_id) in the order they were learned (= rank).
    special_tokens: marker text -> id, e.g. {"<|endoftext|>": 4095}.
    cache_bytes: the budget of encode()'s chunk cache (least recently used chunks go first).
    pipeline: how text is cut into chunks when it is not GPT-2's way (a tokenizer.json's
    normalizer and pre-tokenizers, see tinygpt.tokenizer.pipeline); None = GPT-2.
    bos_token_id, eos_token_id: set when the model's files name them (None: the eos is
    "<|endoftext|>" if the vocab has it, and there is no bos).
    padded_size: the model's vocab_size when its embedding has more rows than this vocab has
    tokens (Qwen2.5-0.5B: 151,665 tokens, 151,936 rows, a multiple of 128 for fast matmuls).
    The ids vocab_size .. padded_size-1 name no token: they decode to nothing (as in the
    tokenizers library) and display as "⟨unused id N⟩". None: no such ids.
    """

    def __init__(
        self,
        vocab: list[bytes],
        merges: list[tuple[int, int, int]],
        special_tokens: dict[str, int] | None = None,
        cache_bytes: int = CHUNK_CACHE_BYTES,
        *,
        pipeline: TextPipeline | None = None,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        padded_size: int | None = None,
        chat_template: str | None = None,
    ):
        self.chat_template = chat_template
        self.vocab: list[bytes] = list(vocab)
        self.merges: list[tuple[int, int, int]] = [tuple(m) for m in merges]
        self.special_tokens: dict[str, int] = dict(special_tokens or {})
        self.vocab_size: int = len(self.vocab)
        self.padded_size: int = self.vocab_size if padded_size is None else padded_size
        self.pipeline = pipeline
        self.bos_token_id, self._eos_id = bos_token_id, eos_token_id
        self._check()
        self._marker = {i: text for text, i in self.special_tokens.items()}  # id -> marker
        self._matchers: dict[object, AddedTokens | Matchers] = {}  # see _matcher
        # the id of each single-byte token: what a chunk's bytes start as
        special_ids = set(self.special_tokens.values())
        single = {tok[0]: i for i, tok in enumerate(self.vocab)
                  if len(tok) == 1 and i not in special_ids}
        # a byte no token holds (21 in SmolLM2) is dropped, as tokenizers and llama.cpp do
        self._byte_ids: list[int | None] = [single.get(b) for b in range(256)]
        self._drops_bytes = len(single) < 256
        self._rank: dict[Pair, int] = {(a, b): r for r, (a, b, _) in enumerate(self.merges)}
        self._merged_id: dict[Pair, int] = {(a, b): new for a, b, new in self.merges}
        self._cache = _ByteLRU(cache_bytes)  # chunk text -> token ids
        # ignore_merges: a chunk that is a whole (non-special) token is that token at once
        self._whole_ids: dict[bytes, int] = {}
        if pipeline is not None and pipeline.ignore_merges:
            self._whole_ids = {tok: i for i, tok in enumerate(self.vocab) if i not in special_ids}

    def _check(self) -> None:
        n = len(self.vocab)
        _check_counts(n, len(self.merges), self.special_tokens)
        if not all(self.vocab):
            raise ValueError("every token must hold at least one byte")
        special_ids = set(self.special_tokens.values())
        singles = {tok for i, tok in enumerate(self.vocab)
                   if len(tok) == 1 and i not in special_ids}
        if len(singles) != sum(len(tok) == 1 and i not in special_ids
                               for i, tok in enumerate(self.vocab)):
            raise ValueError("two tokens hold the same single byte")
        for a, b, new in self.merges:
            if not (0 <= a < n and 0 <= b < n and 0 <= new < n):
                raise ValueError(f"merge {(a, b, new)} refers to an id outside the vocab")
            if self.vocab[a] + self.vocab[b] != self.vocab[new]:
                raise ValueError(f"merge {(a, b, new)}: token bytes do not concatenate")
        for text, i in self.special_tokens.items():
            if not 0 <= i < n or self.vocab[i] != text.encode("utf-8"):
                raise ValueError(f"special token {text!r} has a bad id {i}")
        if type(self.padded_size) is not int or self.padded_size < n:
            raise ValueError(f"padded_size {self.padded_size!r} is below the {n} tokens")
        if not isinstance(self.chat_template, str | None):
            raise ValueError("chat_template must be text")
        for name, i in (("bos", self.bos_token_id), ("eos", self._eos_id)):
            if i is not None and not (type(i) is int and 0 <= i < n):
                raise ValueError(f"{name}_token_id {i!r} is not an id of the vocab")

    # ------------------------------------------------------------------ training

    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        special_tokens: Collection[str] = (ENDOFTEXT,),
    ) -> BPETokenizer:
        """Learn merges from `text` until the vocab has `vocab_size` tokens.

        vocab_size counts the 256 byte tokens, the merges and the special tokens (given ids
        at the end). Training stops early if no adjacent pair is left. Special-token markers
        in `text` are document separators: they are cut out before counting.
        Ties between equally frequent pairs go to the smallest (left_id, right_id).
        """
        specials = list(dict.fromkeys(special_tokens))
        n_merges = vocab_size - 256 - len(specials)
        if n_merges < 0:
            raise ValueError(f"vocab_size must be at least {256 + len(specials)}")
        chunk_counts: Counter[str] = Counter()
        for piece, marker in AddedTokens(specials).split(text):
            if marker is None:
                chunk_counts.update(pretokenize(piece))
        words = [list(_to_utf8(chunk)) for chunk in chunk_counts]  # byte b has id b
        stats = PairCounts(words, list(chunk_counts.values()))

        vocab = [bytes([b]) for b in range(256)]
        merges: list[tuple[int, int, int]] = []
        for _ in range(n_merges):
            pair = stats.best_pair()
            if pair is None:
                break
            new_id = len(vocab)
            stats.merge(pair, new_id)
            merges.append((pair[0], pair[1], new_id))
            vocab.append(vocab[pair[0]] + vocab[pair[1]])
        special_ids = {}
        for marker in specials:
            special_ids[marker] = len(vocab)
            vocab.append(marker.encode("utf-8"))
        return cls(vocab, merges, special_ids)

    # ------------------------------------------------------------------ encoding

    @property
    def eos_token_id(self) -> int | None:
        """The end-of-text id the model's files name, else that of "<|endoftext|>" (or None)."""
        return self._eos_id if self._eos_id is not None else self.special_tokens.get(ENDOFTEXT)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = False,
                            tokenize: bool = True) -> str | list[int]:
        """A conversation ([{"role": "user", "content": text}, ...]) as the model reads it,
        rendered as transformers does (chat_template.py); tokenize=True -> its ids."""
        specials = {name: self.token_bytes(i).decode("utf-8", errors="replace") for name, i
                    in (("bos_token", self.bos_token_id), ("eos_token", self.eos_token_id))
                    if i is not None}
        text = render_chat(self.chat_template, messages, special_tokens=specials,
                           add_generation_prompt=add_generation_prompt)
        return self.encode(text) if tokenize else text

    def encode(self, text: str, allowed_special: bool | Collection[str] = True) -> list[int]:
        """Text -> token ids.

        allowed_special: True = every special marker in the text becomes its special id;
        False = none (markers are encoded as ordinary text); or a set of allowed markers.
        Raises ValueError for text with lone surrogates.
        """
        ids: list[int] = []
        for chunk, is_special in self._chunks(text, allowed_special):
            if is_special:
                ids.append(self.special_tokens[chunk])
            else:
                ids.extend(self._encode_chunk(chunk))
        return ids

    def _chunks(self, text: str, allowed_special: bool | Collection[str]) -> list[tuple[str, bool]]:
        """Text -> [(chunk, is_special)]: special markers cut out, the rest pre-tokenized."""
        matcher = self._matcher(allowed_special)
        if self.pipeline is not None:
            return self.pipeline.chunks(text, matcher)
        chunks: list[tuple[str, bool]] = []
        for piece, marker in matcher.split(text):
            if marker is not None:
                chunks.append((marker, True))
            else:
                chunks.extend((chunk, False) for chunk in pretokenize(piece))
        return chunks

    def _matcher(self, allowed_special: bool | Collection[str]) -> AddedTokens | Matchers:
        """The matcher of the allowed special tokens (tinygpt.tokenizer.added_tokens), built
        once per set: an encode then costs what its text costs, however many tokens there are
        (the pipeline's matchers are a pair: raw and normalized tokens)."""
        key = True if allowed_special is True else frozenset(self._allowed(allowed_special))
        found = self._matchers.get(key)
        if found is None:
            allowed = [t for t in self.special_tokens if key is True or t in key]
            found = self.pipeline.matchers(allowed) if self.pipeline else AddedTokens(allowed)
            if len(self._matchers) >= MAX_MATCHERS:
                self._matchers.clear()
            self._matchers[key] = found
        return found

    def _whole_token(self, chunk: str) -> int | None:
        """With ignore_merges: the id of the vocabulary token that is the whole chunk, if any."""
        return self._whole_ids.get(_to_utf8(chunk)) if self._whole_ids else None

    def _allowed(self, allowed_special: bool | Collection[str]) -> list[str]:
        if allowed_special is True:
            return list(self.special_tokens)
        if allowed_special is False:
            return []
        unknown = {t for t in allowed_special if t not in self.special_tokens}
        if unknown:
            raise ValueError(f"not special tokens of this vocab: {sorted(unknown)}")
        return list(allowed_special)

    def _encode_chunk(self, chunk: str) -> tuple[int, ...]:
        ids = self._cache.get(chunk)
        if ids is None:
            whole = self._whole_token(chunk)
            if whole is not None:
                ids = (whole,)
            else:
                ids = tuple(self._apply_merges(self._initial_ids(chunk)))
            self._cache.put(chunk, ids)
        return ids

    def _initial_ids(self, chunk: str) -> list[int]:
        ids = [self._byte_ids[b] for b in _to_utf8(chunk)]
        return [i for i in ids if i is not None] if self._drops_bytes else ids

    def _best_pair(self, ids: list[int]) -> Pair | None:
        """The adjacent pair with the best (lowest) merge rank, or None if none was learned."""
        rank = self._rank
        never = len(self.merges)  # above every rank (a pair listed twice keeps its last)
        pair = min(pairwise(ids), key=lambda p: rank.get(p, never), default=None)
        return pair if pair in rank else None

    def _apply_merges(self, ids: list[int]) -> list[int]:
        """Merge by rank until no learned pair is left.

        Short chunks (most words) take the plain loop, faster below SHORT_CHUNK bytes; long
        ones take _Merges, the same steps in O(n log n) instead of O(n^2).
        """
        if len(ids) < SHORT_CHUNK:
            while (pair := self._best_pair(ids)) is not None:
                ids = merge_pair(ids, pair, self._merged_id[pair])
            return ids
        merges = MergeRun(ids, self._rank, self._merged_id)
        while merges.step() is not None:
            pass
        return merges.tokens()

    def _replay_chunk(self, chunk: str, max_steps: int, max_ids: int) -> ChunkExplanation:
        """One chunk's merges: the first steps recorded (at most max_steps, and at most
        max_ids token ids after the first step), every step counted."""
        initial = self._initial_ids(chunk)
        whole = self._whole_token(chunk)
        if whole is not None:
            return ChunkExplanation(chunk, False, initial, [], [whole], 0, taken_whole=True)
        merges = MergeRun(initial, self._rank, self._merged_id)
        steps: list[MergeStep] = []
        total, kept_ids = 0, 0
        while (done := merges.step()) is not None:
            total += 1
            if len(steps) == total - 1 < max_steps and (not steps or kept_ids < max_ids):
                tokens = merges.tokens()
                kept_ids += len(tokens)
                steps.append(MergeStep(done[0], done[1], tokens))
        return ChunkExplanation(chunk, False, initial, steps, merges.tokens(), total)

    # ------------------------------------------------------------------ decoding

    def decode_bytes(self, ids: Collection[int]) -> bytes:
        """Token ids -> the raw bytes they stand for (no UTF-8 decoding)."""
        return b"".join(self.token_bytes(i) for i in ids)

    def decode(self, ids: Collection[int]) -> str:
        """Token ids -> text. Invalid UTF-8 (a character split across a cut) becomes U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ for the tokens page

    def is_unused(self, token_id: int) -> bool:
        """True for an id of the model's padding rows: no token of the vocab (padded_size)."""
        return self.vocab_size <= token_id < self.padded_size

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one token (none for an unused padding id)."""
        if self.is_unused(token_id):
            return b""
        if not 0 <= token_id < self.vocab_size:  # a negative id would count from the end
            raise IndexError(f"token id {token_id} is not in 0 .. {self.padded_size - 1}")
        return self.vocab[token_id]

    def token_string(self, token_id: int) -> str:
        """The token as GPT-2's vocab.json writes it (' the' -> 'Ġthe'); specials as is."""
        if self.is_unused(token_id):
            return _unused_label(token_id)
        marker = self._marker.get(token_id)
        return marker if marker is not None else bytes_to_gpt2_string(self.vocab[token_id])

    def token_display(self, token_id: int) -> str:
        """A readable form of one token: space as '·', newline as '\\n', tab as '\\t',
        other control characters as '\\xNN' / '\\uNNNN', and bytes that are not a whole
        UTF-8 character (a token cut mid-character) as '\\xNN'.
        """
        if self.is_unused(token_id):
            return _unused_label(token_id)
        text = self.token_bytes(token_id).decode("utf-8", errors="backslashreplace")
        return "".join(_display_char(ch) for ch in text)

    def explain(
        self,
        text: str,
        allowed_special: bool | Collection[str] = True,
        *,
        max_chunks: int = MAX_REPLAY_CHUNKS,
        max_steps: int = MAX_REPLAY_STEPS,
        max_ids: int = MAX_REPLAY_IDS,
    ) -> Explanation:
        """Replay the tokenization of `text`, chunk by chunk, merge by merge, within caps.

        Returns the last `max_chunks` chunks (an Explanation: a list of ChunkExplanation
        with `chunks_total` and `first_chunk`). Each chunk records its first merge steps:
        at most `max_steps`, and the chunks share a budget of `max_ids` recorded token ids
        (each chunk records at least its first step); `steps_total` counts them all and
        `final` is always the real result. Concatenating every `.final` gives the end of
        `encode(text)` (all of it when nothing was cut). Memory and work grow linearly with
        the text (O(n log n) for the merges). Use dataclasses.asdict() for plain dicts.
        """
        chunks = self._chunks(text, allowed_special)
        kept = chunks[max(0, len(chunks) - max_chunks):] if max_chunks > 0 else []
        ids_each = max_ids // max(1, sum(not special for _, special in kept))
        result = []
        for chunk, is_special in kept:
            if is_special:
                result.append(ChunkExplanation(chunk, True, [self.special_tokens[chunk]]))
            else:
                result.append(self._replay_chunk(chunk, max_steps, ids_each))
        return Explanation(result, len(chunks))

    # ------------------------------------------------------------------ saving and loading

    def to_json_dict(self) -> dict:
        """Plain JSON-ready dict: vocab as hex byte strings, merges as [left, right, new]
        (and, only when set, the pipeline and the bos / eos ids)."""
        d = {
            "format": JSON_FORMAT,
            "version": 1,
            "vocab": [tok.hex() for tok in self.vocab],
            "merges": [list(m) for m in self.merges],
            "special_tokens": dict(self.special_tokens),
        }
        if self.pipeline is not None:
            d["pipeline"] = self.pipeline.to_dict()
        for key, value in (("bos_token_id", self.bos_token_id), ("eos_token_id", self._eos_id)):
            if value is not None:
                d[key] = value
        if self.padded_size != self.vocab_size:
            d["padded_size"] = self.padded_size
        if self.chat_template is not None:
            d["chat_template"] = self.chat_template
        return d

    @classmethod
    def from_json_dict(cls, d: dict) -> BPETokenizer:
        """Inverse of :meth:`to_json_dict`; ValueError on anything malformed."""
        if not isinstance(d, dict) or d.get("format") != JSON_FORMAT:
            raise ValueError(f"not a {JSON_FORMAT} tokenizer dict")
        vocab, merges = d.get("vocab"), d.get("merges")
        specials = d.get("special_tokens", {})
        if not (isinstance(vocab, list) and all(isinstance(h, str) for h in vocab)):
            raise ValueError("vocab must be a list of hex strings")
        if not (isinstance(merges, list) and all(
                isinstance(m, list) and len(m) == 3 and all(type(i) is int for i in m)
                for m in merges)):
            raise ValueError("merges must be a list of [left, right, new] ids")
        if not (isinstance(specials, dict) and all(type(i) is int for i in specials.values())):
            raise ValueError("special_tokens must map marker text to an id")
        pipeline = TextPipeline.from_dict(d["pipeline"]) if "pipeline" in d else None
        return cls([bytes.fromhex(h) for h in vocab], [tuple(m) for m in merges], specials,
                   pipeline=pipeline, bos_token_id=d.get("bos_token_id"),
                   eos_token_id=d.get("eos_token_id"), padded_size=d.get("padded_size"),
                   chat_template=d.get("chat_template"))

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as JSON."""
        Path(path).write_text(json.dumps(self.to_json_dict()), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        """Read a tokenizer written by :meth:`save` (at most MAX_TOKENIZER_BYTES)."""
        return cls.from_json_dict(read_json(path, MAX_TOKENIZER_BYTES, Path(path).name))

    # ------------------------------------------------------------------ GPT-2 files

    @classmethod
    def from_gpt2(
        cls,
        encoder_json: str | Path,
        vocab_bpe: str | Path,
        special_tokens: Collection[str] = (ENDOFTEXT,),
    ) -> BPETokenizer:
        """Load GPT-2's encoder.json + vocab.bpe (or Hugging Face vocab.json + merges.txt).

        Token strings are in the bytes_to_unicode alphabet ('Ġ' = space). The merges file
        lists one "left right" pair per line, best first; a leading "#version" line is
        skipped. Listed special tokens found in the vocab keep their ids. Each file may
        hold at most MAX_TOKENIZER_BYTES; anything malformed raises ValueError.
        """
        encoder_path, merges_path = Path(encoder_json), Path(vocab_bpe)
        encoder = parse_json(read_capped(encoder_path, MAX_TOKENIZER_BYTES, encoder_path.name),
                             encoder_path.name)
        merges_text = read_capped(merges_path, MAX_TOKENIZER_BYTES, merges_path.name)
        return cls.from_gpt2_data(encoder, merges_text.decode("utf-8"), special_tokens)

    @classmethod
    def from_gpt2_data(
        cls,
        encoder: dict[str, int],
        merges_text: str,
        special_tokens: Collection[str] = (ENDOFTEXT,),
    ) -> BPETokenizer:
        """The parsed vocab.json (token string -> id) and the text of merges.txt; see from_gpt2."""
        if not (isinstance(encoder, dict) and all(type(i) is int for i in encoder.values())):
            raise ValueError("vocab.json must be one object mapping token strings to ids")
        if sorted(encoder.values()) != list(range(len(encoder))):
            raise ValueError("vocab ids must be exactly 0 .. len(vocab)-1")
        specials = {s: encoder[s] for s in special_tokens if s in encoder}
        vocab: list[bytes] = [b""] * len(encoder)
        for text, i in encoder.items():
            if text in specials:
                vocab[i] = text.encode("utf-8")
            elif set(text) <= unicode_to_bytes().keys():
                vocab[i] = gpt2_string_to_bytes(text)
            else:
                raise ValueError(f"token {text!r} is neither byte-level nor a listed special")

        merges: list[tuple[int, int, int]] = []
        for line in io.StringIO(merges_text):  # line by line: no list of every line
            line = line.rstrip("\r\n")
            if line.startswith("#version") or not line.strip():
                continue
            parts = line.split(" ")
            if len(parts) != 2 or not all(p in encoder for p in parts):
                raise ValueError(f"merge {line[:40]!r} is not two tokens of the vocab")
            if len(merges) >= len(encoder):
                raise ValueError("more merges than tokens in the vocab")
            left, right = parts
            if left + right not in encoder:
                raise ValueError(f"merge {line[:40]!r}: {left + right!r} is not in the vocab"[:120])
            merges.append((encoder[left], encoder[right], encoder[left + right]))
        return cls(vocab, merges, specials)

    def save_gpt2(self, encoder_json: str | Path, vocab_bpe: str | Path) -> None:
        """Write GPT-2 style vocab.json + merges.txt (readable by Hugging Face)."""
        encoder = {self.token_string(i): i for i in range(self.vocab_size)}
        Path(encoder_json).write_text(json.dumps(encoder, ensure_ascii=False), encoding="utf-8")
        lines = ["#version: 0.2"] + [
            f"{self.token_string(a)} {self.token_string(b)}" for a, b, _ in self.merges
        ]
        Path(vocab_bpe).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _check_counts(vocab: int, merges: int, specials: dict[str, int]) -> None:
    """The tokenizer's counts against their caps (tinygpt.caps), before anything is built."""
    if vocab > MAX_VOCAB:
        raise ValueError(f"{vocab:,} tokens; the cap is {MAX_VOCAB:,} (tinygpt.caps)")
    if merges > max_merges(vocab):
        raise ValueError(f"{merges:,} merges for {vocab:,} tokens; the cap is "
                         f"{max_merges(vocab):,} (tinygpt.caps.max_merges)")
    if len(specials) > MAX_ADDED_TOKENS:
        raise ValueError(f"{len(specials):,} added tokens; the cap is {MAX_ADDED_TOKENS:,} "
                         "(tinygpt.caps)")
    long = next((text for text in specials if len(text) > MAX_ADDED_TOKEN_CHARS), None)
    if long is not None:
        raise ValueError(f"added token {long[:40]!r}... has {len(long):,} characters; the "
                         f"cap is {MAX_ADDED_TOKEN_CHARS} (tinygpt.caps)")


def _unused_label(token_id: int) -> str:
    return f"⟨unused id {token_id}⟩"


def _display_char(ch: str) -> str:
    if ch == " ":
        return "·"
    if ch in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch]
    if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return ch
