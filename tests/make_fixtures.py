"""Build tests/fixtures/tiny.npz: a small untrained model with a real BPE tokenizer.

The app tests point TINYGPT_MODELS_DIR at tests/fixtures so every page runs quickly on it.
Run from the repo root:  python -m tests.make_fixtures
"""

from __future__ import annotations

from pathlib import Path

from tinygpt.checkpoint.files import save
from tinygpt.network.model import GPT, GPTConfig
from tinygpt.tokenizer.bpe import BPETokenizer
from tinygpt.train.corpus import load_corpus

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY = FIXTURES / "tiny.npz"


def make_tiny(path: Path = TINY) -> Path:
    """Tokenizer of 512 tokens learned from the validation text; 2 layers, 4 heads, d = 32."""
    tok = BPETokenizer.train(load_corpus("val")[:100_000], 512)
    config = GPTConfig(vocab_size=tok.vocab_size, n_ctx=64, n_embd=32, n_head=4, n_layer=2)
    save(GPT(config, seed=0), tok, path, metadata={"note": "untrained test fixture"})
    return path


if __name__ == "__main__":
    FIXTURES.mkdir(exist_ok=True)
    out = make_tiny()
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KB)")
