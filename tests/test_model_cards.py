"""Each shipped model against its model card: the card's configuration table describes the file
(parameters, layers, heads, key/value heads, width, context, normalisation, positions,
feed-forward), and its held-out numbers are those scripts/evaluate_models.py wrote for this
very file (docs/model_eval.json, matched by the file's SHA-256)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tinygpt.checkpoint import files as checkpoint

ROOT = Path(__file__).resolve().parent.parent
CARDS = {"model_card.md": "shakespeare.npz", "model_card_llama.md": "shakespeare_llama.npz"}
MAX_MODEL_BYTES = 25_000_000


def table_rows(card: str) -> dict[str, str]:
    """The two-column rows of the card's tables: {label: value}."""
    rows = {}
    for line in card.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def expected_rows(config, parameters: int) -> dict[str, str]:
    """What the configuration table must say about a model (each value's beginning)."""
    d, inner = config.n_embd, config.inner_dim
    feed_forward = (f"SwiGLU: {d} → 2 × {inner} → {d}" if config.mlp == "swiglu"
                    else f"{d} → {inner} → {d}, tanh GELU")
    return {
        "layers / heads / d": f"{config.n_layer} / {config.n_head} (head size "
                              f"{config.head_size}) / {d}",
        "key/value heads": str(config.kv_heads),
        "context": f"{config.n_ctx} tokens",
        "normalisation": "RMSNorm" if config.norm == "rmsnorm" else "LayerNorm",
        "positions": (f"rotary (RoPE, θ = {config.rope_theta:,.0f}"
                      if config.position == "rope" else "learned"),
        "feed-forward": feed_forward,
        "parameters": f"{parameters:,}",
    }


@pytest.fixture(scope="module")
def evaluation() -> dict:
    data = json.loads((ROOT / "docs" / "model_eval.json").read_text(encoding="utf-8"))
    return {entry["file"]: entry for entry in data["models"]}


@pytest.mark.parametrize("card_name", list(CARDS))
def test_the_card_describes_the_model_file(card_name: str) -> None:
    path = ROOT / "models" / CARDS[card_name]
    assert path.stat().st_size <= MAX_MODEL_BYTES
    model, _ = checkpoint.load(path)
    assert model.dtype == "float32"
    rows = table_rows((ROOT / "docs" / card_name).read_text(encoding="utf-8"))
    for label, value in expected_rows(model.config, model.num_parameters()).items():
        assert label in rows, f"{card_name} has no '{label}' row"
        assert rows[label].startswith(value), f"{card_name}, {label}: {rows[label]!r}"


@pytest.mark.parametrize("card_name", list(CARDS))
def test_the_cards_numbers_are_the_evaluation_of_this_file(card_name: str, evaluation) -> None:
    file = CARDS[card_name]
    entry = evaluation[file]
    digest = hashlib.sha256((ROOT / "models" / file).read_bytes()).hexdigest()[:16]
    assert entry["sha256_16"] == digest, (
        f"models/{file} changed since docs/model_eval.json: rerun scripts/evaluate_models.py")
    rows = table_rows((ROOT / "docs" / card_name).read_text(encoding="utf-8"))
    shown = re.search(r"[\d.]+", rows["**nats per character**"]).group()
    assert shown == f"{entry['nats_per_char']:.3f}"
    assert rows["nats per token"] == f"{entry['nats_per_token']:.3f}"
