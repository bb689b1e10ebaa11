"""tinygpt_app.compute.model_cards: a card file read into its facts (a wrong field left out,
never an error), the models whose card has a part, and the words the picker and Home show."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.compute caches with streamlit")

from tests.apptest_support import ROOT, TINY  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt_app.compute import model_cards as mc  # noqa: E402


@pytest.fixture
def models(tmp_path, monkeypatch):
    for name in ("gpt.npz", "rope.npz", "bare.npz"):
        shutil.copy(TINY, tmp_path / name)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    return tmp_path


def write(folder, name: str, card) -> None:
    (folder / f"{name}.card.json").write_text(json.dumps(card), encoding="utf-8")


def test_a_card_gives_its_facts_and_leaves_out_the_wrong_ones(models):
    write(models, "gpt", {"trained_on": "  the plays\n of Shakespeare ", "parameters": 4273664,
                          "knows": 3, "cannot_know": "", "heldout_nats_per_char": True,
                          "config": {"position": "learned", "n_head": 4, "norm": [1]}})
    card = mc.read_card("gpt.npz")
    assert card.trained_on == "the plays of Shakespeare"
    assert card.parameters == 4273664
    assert card.knows is None and card.cannot_know is None and card.heldout_nats_per_char is None
    assert card.parts == {"position": "learned", "n_head": 4}
    assert mc.card_rows(card) == [("Trained on", "the plays of Shakespeare"),
                                  ("Size", "4.27 million parameters")]
    assert mc.headline(card) == "4.27 million parameters, trained on the plays of Shakespeare"


def test_no_card_or_a_broken_one_is_none(models):
    assert mc.read_card("bare.npz") is None
    for bad in ("[1, 2]", "{not json", json.dumps({"pad": "x" * mc.MAX_CARD_BYTES})):
        (models / "bare.card.json").write_text(bad)
        assert mc.read_card("bare.npz") is None, bad[:20]


def test_a_long_text_is_cut_and_says_so(models):
    write(models, "gpt", {"trained_on": "word " * 500, "parameters": -3})
    card = mc.read_card("gpt.npz")
    assert len(card.trained_on) == mc.MAX_TEXT_CHARS and card.trained_on.endswith("…")
    assert card.parameters is None


def test_a_changed_card_is_read_again(models):
    write(models, "gpt", {"trained_on": "a"})
    assert mc.read_card("gpt.npz").trained_on == "a"
    write(models, "gpt", {"trained_on": "the second text"})
    assert mc.read_card("gpt.npz").trained_on == "the second text"


def test_the_models_having_a_part_are_found_by_their_cards(models):
    write(models, "gpt", {"config": {"position": "learned", "n_head": 4, "n_kv_head": 4}})
    write(models, "rope", {"config": {"position": "rope", "n_head": 4, "n_kv_head": 2}})
    assert mc.models_having(lambda p: p.get("position") == "rope") == ["rope.npz"]
    assert mc.models_having(lambda p: p.get("position") == "rope", but="rope.npz") == []
    assert mc.models_having(lambda p: p.get("n_kv_head", 0) < p.get("n_head", 0)) == ["rope.npz"]


def test_sizes_in_words():
    assert mc.size_words(134_515_008) == "135 million parameters"
    assert mc.size_words(7_000_000_000) == "7 billion parameters"
    assert mc.size_words(52_000) == "52,000 parameters"


@pytest.mark.parametrize("name", ["shakespeare", "shakespeare_llama"])
def test_the_shipped_cards_say_what_their_model_is(name, monkeypatch):
    """Each shipped card's size and parts are its model file's own (scripts/evaluate_models.py
    wrote them from the file), and it says what the model can and cannot know."""
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(ROOT / "models"))
    card = mc.read_card(f"{name}.npz")
    model, _ = load(ROOT / "models" / f"{name}.npz")
    assert card.parameters == model.num_parameters()
    assert card.parts["position"] == model.config.position
    assert card.parts["n_kv_head"] == model.config.kv_heads
    assert card.trained_on and card.knows and card.cannot_know and card.architecture
