"""A GPT-2-small-shaped folder with random weights, for the load benches (no model hub).

The model: transformers' GPT2Config defaults (12 layers, 12 heads, 768 dims, v = 50,257,
n_ctx = 1,024: GPT-2 small's shape), random weights, written with `save_pretrained`
(model.safetensors + config.json). The tokenizer: a byte-level BPE trained with the `tokenizers`
library on the shipped Shakespeare corpus (so prompts split into words as GPT-2's do, about one
token a word), written as GPT-2's vocab.json + merges.txt. The corpus gives fewer merges than
GPT-2 has tokens; the rest are filled with letter strings (bench.common.write_dummy_tokenizer's
idea), and `<|endoftext|>` is the last id, 50,256, as in GPT-2.

    python bench/gpt2_small.py /tmp/gpt2models/gpt2
    python bench/load.py --models-dir /tmp/gpt2models --model gpt2 ...
"""

from __future__ import annotations

import gzip
import itertools
import json
import string
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EOS = "<|endoftext|>"


def write_gpt2_small(folder: Path, seed: int = 0) -> Path:
    """config.json, model.safetensors, vocab.json and merges.txt in `folder` (made if needed)."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    config = transformers.GPT2Config()  # GPT-2 small's shape
    transformers.GPT2LMHeadModel(config).save_pretrained(folder, safe_serialization=True)
    write_tokenizer(folder, config.vocab_size)
    return folder


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    """A Shakespeare byte-level BPE of exactly `vocab_size` ids, EOS last (GPT-2's files)."""
    import tokenizers

    text = gzip.open(ROOT / "data" / "shakespeare_train.txt.gz", "rt", encoding="utf-8").read()
    bpe = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator([text], vocab_size=vocab_size - 1, min_frequency=2,
                            show_progress=False)
    model = json.loads(bpe.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda item: item[1]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    letters = (a + "".join(rest) for n in itertools.count(2)
               for a, *rest in itertools.product(string.ascii_lowercase, repeat=n))
    while len(vocab) < vocab_size - 1:  # fill: each new string's prefix is already a token
        word = next(letters)
        if word not in vocab and word[:-1] in vocab:
            merges.append(f"{word[:-1]} {word[-1]}")
            vocab[word] = len(vocab)
    vocab[EOS] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n",
                                       encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(write_gpt2_small(Path(sys.argv[1])))
