"""Tokenizer speed: train a 4096-token BPETokenizer, then time encoding 1 MB of English.

The reference, measured in the same run, is Hugging Face `tokenizers` (Rust) loaded with
the *same* vocab and merges (skipped if it is not installed); we also check both give
identical ids.

    python bench/tokenize_speed.py
    python bench/tokenize_speed.py --vocab-size 4096 --train-mb 4 --encode-mb 1

Text: the Shakespeare corpus in data/ (training on its first MBs, encoding held-out text);
without it, Python's own docstrings repeated (English-like, offline).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
from tinygpt.tokenizer import BPETokenizer  # noqa: E402

MB = 1_000_000


def shakespeare_text() -> str | None:
    try:
        from tinygpt.corpus import load_corpus

        return load_corpus("train") + load_corpus("val")
    except (ImportError, OSError):
        return None


def docstring_text() -> str:
    """English-like text from the docstrings of some stdlib modules."""
    docs: dict[str, None] = {}
    for name in ("os", "re", "json", "collections", "pathlib", "argparse", "logging",
                 "subprocess", "unittest", "asyncio", "decimal", "datetime", "email",
                 "http.client", "threading", "inspect", "pydoc", "typing", "tarfile"):
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj)
            if doc:
                docs[doc] = None
    return "\n\n".join(docs)


def repeat_to(text: str, n_chars: int) -> str:
    return (text * (n_chars // len(text) + 1))[:n_chars]


def timed(fn, *args):
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def hf_encode_time(tok: BPETokenizer, text: str) -> tuple[list[int], float] | None:
    """HF tokenizers with our vocab and merges: (ids, seconds), or None if not installed."""
    try:
        from tokenizers import ByteLevelBPETokenizer
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        vocab, merges = Path(tmp) / "vocab.json", Path(tmp) / "merges.txt"
        tok.save_gpt2(vocab, merges)
        hf = ByteLevelBPETokenizer.from_file(str(vocab), str(merges), add_prefix_space=False)
    hf.add_special_tokens(list(tok.special_tokens))
    encoding, seconds = timed(hf.encode, text)
    return encoding.ids, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--train-mb", type=float, default=4.0)
    parser.add_argument("--encode-mb", type=float, default=1.0)
    args = parser.parse_args()
    n_train, n_encode = int(args.train_mb * MB), int(args.encode_mb * MB)

    text = shakespeare_text()
    source = "Shakespeare corpus (data/)"
    if text is None:
        text, source = docstring_text(), "stdlib docstrings, repeated"
    text = repeat_to(text, n_train + n_encode)  # no-op when the corpus is long enough
    train_text, encode_text = text[:n_train], text[n_train:]  # encode held-out text
    print(f"text: {source}; train {len(train_text):,} chars, "
          f"encode {len(encode_text.encode('utf-8')):,} bytes")

    tok, train_s = timed(BPETokenizer.train, train_text, args.vocab_size)
    print(f"train  tinygpt  vocab {tok.vocab_size}: {train_s:7.2f} s")

    fresh = BPETokenizer.from_json_dict(tok.to_json_dict())  # empty chunk cache: cold timing
    ids, cold_s = timed(fresh.encode, encode_text)
    _, warm_s = timed(fresh.encode, encode_text)
    assert fresh.decode(ids) == encode_text, "round trip failed"
    print(f"encode tinygpt  (cold cache): {cold_s:7.3f} s  {len(ids):,} tokens "
          f"({len(encode_text) / len(ids):.2f} chars/token)")
    print(f"encode tinygpt  (warm cache): {warm_s:7.3f} s")

    reference = hf_encode_time(tok, encode_text)
    if reference is None:
        print("encode HF tokenizers: not installed, no reference")
        return
    hf_ids, hf_s = reference
    print(f"encode HF tokenizers (Rust):  {hf_s:7.3f} s  identical ids: {hf_ids == ids}")
    print(f"ratio tinygpt cold / HF: {cold_s / hf_s:.1f}x")


if __name__ == "__main__":
    main()
