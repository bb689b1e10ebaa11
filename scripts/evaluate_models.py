"""Evaluate the shipped models in one run, by the same function, on the held-out plays: the
numbers their model cards show (docs/model_card.md, docs/model_card_llama.md).

    python scripts/evaluate_models.py models/shakespeare.npz models/shakespeare_llama.npz \
        --out docs/model_eval.json

For each model: its architecture and parameter count, the held-out text's nats per character
and per token (tinygpt.train.trainer.evaluate_text, windows of 256 tokens), samples with the
cards' settings, and the top guesses after the app's default prompt. One BLAS thread, so the
numbers do not depend on the machine's load (only the time does). tests/test_model_cards.py
checks the cards against this file and this file against the model files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinygpt.checkpoint import files as checkpoint  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402
from tinygpt.network.functional import softmax  # noqa: E402
from tinygpt.readouts.parts import config_facts  # noqa: E402
from tinygpt.train.corpus import load_corpus  # noqa: E402
from tinygpt.train.trainer import evaluate_text  # noqa: E402

BLOCK = 256  # the window evaluate_text cuts the held-out text into (the models' context)
SAMPLE_PROMPTS = ("ROMEO:\n", "HAMLET:\nTo be, or not to be")
SAMPLE = dict(temperature=0.8, top_k=40, seed=1, max_new_tokens=80)  # the cards' settings
DEFAULT_PROMPT = ("ROMEO:\nBut soft, what light through yonder window breaks?\n"
                  "It is the east, and Juliet is the")  # the cards' example prompt


def file_digest(path: Path) -> str:
    """The first 16 hex digits of the file's SHA-256: which file was evaluated."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def samples(model, tok) -> list[str]:
    """One sample per prompt, stopping at <|endoftext|> (the prompt included)."""
    out = []
    for prompt in SAMPLE_PROMPTS:
        ids = np.asarray(tok.encode(prompt))
        result = generate(model, ids, strategy="sample", eos_token_id=tok.eos_token_id,
                          record_steps=False, **SAMPLE)
        out.append(prompt + tok.decode([int(i) for i in result.tokens]))
    return out


def top_guesses(model, tok, k: int = 4) -> list[tuple[str, float]]:
    """The k likeliest next tokens after the default prompt, with their probabilities."""
    probs = softmax(model.forward(np.asarray(tok.encode(DEFAULT_PROMPT)))[-1].astype(np.float64))
    best = np.argsort(-probs)[:k]
    return [(tok.decode([int(i)]), round(float(probs[i]), 4)) for i in best]


def evaluate(path: Path, held_out: str) -> dict:
    model, tok = checkpoint.load(path)
    start = time.perf_counter()
    result = evaluate_text(model, tok, held_out, BLOCK)
    meta = model.metadata
    return {
        "file": path.name, "sha256_16": file_digest(path), "bytes": path.stat().st_size,
        "parameters": model.num_parameters(), "architecture": config_facts(model.config),
        "nats_per_char": round(result["nats_per_char"], 4),
        "nats_per_token": round(result["nats_per_token"], 4),
        "held_out_tokens": result["tokens"], "held_out_chars": result["chars"],
        "eval_seconds": round(time.perf_counter() - start, 1),
        "train_steps": meta.get("step"), "train_seconds": meta.get("elapsed_seconds"),
        "final_train_loss": meta.get("train_loss"),
        "samples": samples(model, tok), "top_guesses": top_guesses(model, tok),
    }


# What each shipped model is, in words (its card's facts beside the numbers measured here):
# what it learnt from, what that lets it know, and what it cannot know.
FACTS = {
    "shakespeare.npz": {
        "name": "shakespeare (GPT-2-style)",
        "made_by": "tinygpt's own NumPy trainer, from scratch, on a 2-core CPU "
                   "(docs/model_card.md)",
        "licence": "the plays are public domain; the model is the project's",
    },
    "shakespeare_llama.npz": {
        "name": "shakespeare_llama (Llama-style)",
        "made_by": "tinygpt's own NumPy trainer, from scratch, on a 2-core CPU "
                   "(docs/model_card_llama.md)",
        "licence": "the plays are public domain; the model is the project's",
    },
}
SHAKESPEARE = {
    "trained_on": "35 of Shakespeare's plays (4.8 million characters; The Tempest and Twelfth "
                  "Night held out)",
    "knows": "how a speech in those plays goes on: speakers' names, verse, his words and "
             "spelling",
    "cannot_know": "anything the plays do not say: facts about the world, modern words, true "
                   "answers to questions (a question gets a line of a play back)",
}


def describe(r: dict) -> str:
    """The configuration in one line, from the evaluated file's own config."""
    a = r["architecture"]
    heads = (f"{a['n_head']} heads" if a["n_kv_head"] == a["n_head"] else
             f"{a['n_head']} query heads sharing {a['n_kv_head']} key/value heads")
    parts = ("LayerNorm, learned positions, GELU" if a["position"] == "learned" else
             "RMSNorm, rotary positions, SwiGLU")
    return (f"{a['n_layer']} blocks, width {a['n_embd']}, {heads}, {parts}, {a['n_ctx']} tokens "
            f"of context, a {a['vocab_size']:,}-token byte-level BPE")


def card(r: dict) -> dict:
    """models/<name>.card.json of one evaluated file: what the app says the model is."""
    return {**FACTS[r["file"]], **SHAKESPEARE, "architecture": describe(r),
            "parameters": r["parameters"], "config": r["architecture"],
            "heldout_nats_per_char": r["nats_per_char"],
            "source": "scripts/evaluate_models.py (held-out plays, evaluate_text)"}


def write_card_files(results: list[dict], models_dir: Path) -> None:
    """models/<name>.card.json beside each shipped model: what it is (read by the model picker
    and Home) and the held-out loss its card states (read by the Architectures page)."""
    for r in results:
        path = models_dir / (Path(r["file"]).stem + ".card.json")
        path.write_text(json.dumps(card(r), indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "model_eval.json")
    args = p.parse_args(argv)
    held_out = load_corpus("val")
    with threadpool_limits(limits=1, user_api="blas"):
        results = [evaluate(path, held_out) for path in args.models]
    args.out.write_text(json.dumps({"held_out": "The Tempest, Twelfth Night",
                                    "block_size": BLOCK, "models": results}, indent=1) + "\n")
    write_card_files(results, ROOT / "models")
    for r in results:
        print(f"{r['file']}: {r['parameters']:,} parameters, {r['nats_per_char']:.4f} "
              f"nats/char, {r['nats_per_token']:.4f} nats/token ({r['eval_seconds']} s)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
