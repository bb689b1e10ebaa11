"""Model folders of real sizes with random weights, for the load benches (no model hub).

GPT-2 small: transformers' GPT2Config defaults (12 layers, 12 heads, 768 dims, v = 50,257,
n_ctx = 1,024: GPT-2 small's shape), random weights, written with `save_pretrained`
(model.safetensors + config.json). The tokenizer: a byte-level BPE trained with the `tokenizers`
library on the shipped Shakespeare corpus (so prompts split into words as GPT-2's do, about one
token a word), written as GPT-2's vocab.json + merges.txt. The corpus gives fewer merges than
GPT-2 has tokens; the rest are filled with letter strings (bench.common.write_dummy_tokenizer's
idea), and `<|endoftext|>` is the last id, 50,256, as in GPT-2.

SmolLM2-135M: its Llama shape (30 layers, 9 query and 3 key/value heads, 576 dims, SwiGLU
of 1,536, v = 49,152, tied embeddings, rotary base 100,000), random weights, written with
`save_pretrained`; its tokenizer.json a Shakespeare byte-level BPE written by transformers'
PreTrainedTokenizerFast (fewer tokens than the model's rows: the rest are unused ids).

    python bench/large_folders.py gpt2-small /tmp/models/gpt2
    python bench/load.py --models-dir /tmp/models --model gpt2 ...
"""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import string
import sys
import tempfile
from collections.abc import Callable
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


def write_smollm2_135m(folder: Path, seed: int = 0) -> Path:
    """config.json, model.safetensors and the tokenizer files of a SmolLM2-135M shape."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
        rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=0, eos_token_id=0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    bpe = shakespeare_bpe(config.vocab_size, special=[EOS])  # EOS is id 0, as in SmolLM2
    transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=EOS,
                                         eos_token=EOS).save_pretrained(folder)
    return folder


def shakespeare_bpe(vocab_size: int, special: list[str] | None = None):
    """A byte-level BPE (tokenizers library) trained on the shipped Shakespeare corpus."""
    import tokenizers

    text = gzip.open(ROOT / "data" / "shakespeare_train.txt.gz", "rt", encoding="utf-8").read()
    bpe = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False)
    bpe.train_from_iterator([text], vocab_size=vocab_size, min_frequency=2,
                            special_tokens=special or [], show_progress=False)
    return bpe


def write_tokenizer(folder: Path, vocab_size: int) -> None:
    """A Shakespeare byte-level BPE of exactly `vocab_size` ids, EOS last (GPT-2's files)."""
    model = json.loads(shakespeare_bpe(vocab_size - 1).to_str())["model"]
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


WRITERS = {"gpt2-small": write_gpt2_small, "smollm2-135m": write_smollm2_135m}


def serve_on_shape(args, serve: Callable[[object], int]) -> int:
    """`serve(args)` on a random model of `args.shape`, written to a temporary folder for this
    run (args.models_dir and args.model point at it; the folder goes afterwards)."""
    folder = Path(tempfile.mkdtemp(prefix="tinygpt-shape-"))
    try:
        WRITERS[args.shape](folder / args.shape)
        args.models_dir, args.model = str(folder), args.shape
        return serve(args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in WRITERS:
        sys.exit(__doc__)
    print(WRITERS[sys.argv[1]](Path(sys.argv[2])))
