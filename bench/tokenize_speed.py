"""Tokenizer speed: tinygpt's byte-level BPE beside Hugging Face `tokenizers` (Rust).

What: train a 4096-token BPETokenizer on the first --train-mb MB of the Shakespeare corpus in
data/ (without it, Python's own docstrings repeated: English-like, offline), then encode
--encode-mb MB of held-out text with a cold chunk cache; the reference is `tokenizers`' BPE
loaded with the *same* vocab and merges, and both must give identical ids.
How: one process per thread count (default 1: tinygpt's tokenizer is pure Python and one
`encode` call of `tokenizers` uses one thread); each library in its own block, warm-up, then
--runs encodes, each with a freshly loaded tokenizer (untimed), median and spread. Training
is timed once. Results: bench/results/tokenize_speed.json.
Targets: none (issue 14 names none); the figures keep the README honest.

    python bench/tokenize_speed.py                  # 1 thread, 5 runs
    python bench/tokenize_speed.py --runs 3 --train-mb 0.5 --encode-mb 0.2 --results-dir /tmp/smoke
"""

from __future__ import annotations

import importlib
import inspect
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench import common  # noqa: E402
from tinygpt.tokenizer.bpe import BPETokenizer  # noqa: E402

MB = 1_000_000


def shakespeare_text() -> str | None:
    try:
        from tinygpt.train.corpus import load_corpus

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


def parse_args():
    p = common.parser(__doc__, threads="1", runs=5, warmup=1)
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--train-mb", type=float, default=4.0)
    p.add_argument("--encode-mb", type=float, default=1.0)
    return p.parse_args()


def hf_tokenizer_factory(tok: BPETokenizer, folder: Path):
    """A function making a fresh `tokenizers` BPE with our vocab and merges, or None if the
    library is not installed."""
    try:
        from tokenizers import ByteLevelBPETokenizer
    except ImportError:
        return None
    vocab, merges = folder / "vocab.json", folder / "merges.txt"
    tok.save_gpt2(vocab, merges)

    def fresh():
        hf = ByteLevelBPETokenizer.from_file(str(vocab), str(merges), add_prefix_space=False)
        hf.add_special_tokens(list(tok.special_tokens))
        return hf

    return fresh


def texts(args) -> tuple[str, str, str]:
    """(training text, held-out text to encode, where it comes from)."""
    n_train, n_encode = int(args.train_mb * MB), int(args.encode_mb * MB)
    text, source = shakespeare_text(), "Shakespeare corpus (data/)"
    if text is None:
        text, source = docstring_text(), "stdlib docstrings, repeated"
    text = repeat_to(text, n_train + n_encode)  # no-op when the corpus is long enough
    return text[:n_train], text[n_train:], source


def measure(args) -> list[dict]:
    common.limit_threads(int(args.threads))
    train_text, encode_text, source = texts(args)
    size = f"{len(encode_text.encode('utf-8')) / MB:g} MB"
    print(f"text: {source}; train {len(train_text):,} chars, encode {size}", flush=True)
    t0 = time.perf_counter()
    tok = BPETokenizer.train(train_text, args.vocab_size)
    train_s = common.Measure((time.perf_counter() - t0,))
    rows = [common.row(f"BPE training, {tok.vocab_size} tokens on {args.train_mb:g} MB",
                       train_s, note=source)]

    def cold() -> BPETokenizer:
        return BPETokenizer.from_json_dict(tok.to_json_dict())  # an empty chunk cache

    ours = common.timed(lambda t: t.encode(encode_text), args.runs, args.warmup, setup=cold)
    ids = cold().encode(encode_text)
    assert cold().decode(ids) == encode_text, "round trip failed"
    common.settle()
    with tempfile.TemporaryDirectory() as tmp:
        fresh_hf = hf_tokenizer_factory(tok, Path(tmp))
        if fresh_hf is None:
            print("tokenizers is not installed: no reference")
            return rows
        theirs = common.timed(lambda t: t.encode(encode_text), args.runs, args.warmup,
                              setup=fresh_hf)
        same = fresh_hf().encode(encode_text).ids == ids
    rows.append(common.row(f"BPE encode {size}, cold cache", ours, theirs,
                           "Hugging Face tokenizers, same merges",
                           note=f"{len(ids):,} tokens, identical ids: {same}"))
    return rows


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
