"""tinygpt_app.compute.architectures: the models set side by side, the cards' held-out loss
(read capped, "no card" for anything not a finite number), and the cached guesses."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute caches with streamlit")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt.readouts.modern.architecture import next_token  # noqa: E402
from tinygpt_app.compute import architectures as arch  # noqa: E402
from tinygpt_app.compute import model_cards  # noqa: E402


@pytest.fixture
def models(tmp_path, monkeypatch):
    for name in ("mine.npz", "shakespeare.npz", "shakespeare_llama.npz", "other.npz"):
        shutil.copy(TINY, tmp_path / name)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    return tmp_path


def test_the_model_in_use_comes_first_then_the_shipped_ones(models):
    assert arch.default_models("mine.npz") == ["mine.npz", "shakespeare.npz",
                                               "shakespeare_llama.npz"]
    assert arch.default_models("shakespeare.npz") == ["shakespeare.npz",
                                                      "shakespeare_llama.npz"]


def test_without_the_llama_model_the_gpt_one_is_beside(tmp_path, monkeypatch):
    for name in ("other.npz", "shakespeare.npz"):
        shutil.copy(TINY, tmp_path / name)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    assert arch.default_models("other.npz") == ["other.npz", "shakespeare.npz"]


def test_the_card_gives_the_heldout_loss_or_nothing(models):
    assert arch.heldout_loss("mine.npz") is None  # no card
    card = models / "mine.card.json"
    card.write_text(json.dumps({"heldout_nats_per_char": 1.234, "other": "kept"}))
    assert arch.heldout_loss("mine.npz") == pytest.approx(1.234)
    for bad in ('{"heldout_nats_per_char": "1.2"}', '{"heldout_nats_per_char": NaN}',
                '{"heldout_nats_per_char": true}', "[1.2]", "{not json"):
        card.write_text(bad)
        assert arch.heldout_loss("mine.npz") is None, bad
    pad = "x" * model_cards.MAX_CARD_BYTES
    card.write_text(json.dumps({"heldout_nats_per_char": 1.0, "pad": pad}))
    assert arch.heldout_loss("mine.npz") is None  # over the cap: not read
    (models / "folder").mkdir()
    (models / "folder.card.json").write_text('{"heldout_nats_per_char": 2.5}')
    assert model_cards.card_path("folder").name == "folder.card.json"
    assert arch.heldout_loss("folder") == 2.5


def test_a_guess_reads_the_last_tokens_and_is_cached(models):
    model, tok = load(models / "mine.npz")
    ids = np.array(tok.encode("To be, or not to be, that is the question. " * 8))
    assert len(ids) > arch.MAX_TOKENS
    guess = arch.guess("mine.npz", model, ids)
    alone = next_token(model, ids[-arch.MAX_TOKENS:], arch.TOP_K)
    np.testing.assert_array_equal(guess.ids, alone.ids)
    np.testing.assert_allclose(guess.probs, alone.probs)
    assert guess.tokens_read == arch.MAX_TOKENS
    assert arch.guess("mine.npz", model, ids) is guess


def test_the_shipped_card_states_the_model_cards_number(monkeypatch):
    """models/shakespeare.card.json carries the held-out loss docs/model_card.md reports."""
    from tests.apptest_support import ROOT

    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(ROOT / "models"))
    loss = arch.heldout_loss("shakespeare.npz")
    assert loss is not None
    card = (ROOT / "docs" / "model_card.md").read_text(encoding="utf-8")
    assert f"| **nats per character** | **{loss:.3f}**" in card
