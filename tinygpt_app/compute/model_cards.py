"""What each model is, as its card file says: models/<name>.card.json beside models/<name>.npz
(written by scripts/evaluate_models.py for the shipped models, by `python -m tinygpt.models get`
for a fetched one). The pages read the facts here and never type them: trained on what, how
big, what it can and cannot know, and which parts it has (so a page can point to a model that
has a part this one lacks).

Bounded: a card is read only up to MAX_CARD_BYTES, each text cut to MAX_TEXT_CHARS (said so),
and the cards read are kept per (file, modification time, size) in a SharedCache of
CARDS_BYTES.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tinygpt.safe_io import CheckpointError, read_json
from tinygpt_app.compute.models import available_models, is_session_model, models_dir
from tinygpt_app.compute.shared_cache import SharedCache

CARD_SUFFIX = ".card.json"
MAX_CARD_BYTES = 64 * 2**10
MAX_TEXT_CHARS = 600  # a card's sentence: longer ones are cut, with "…"
CARDS_BYTES = 2**18  # a card is a few hundred bytes of text
TEXTS = ("name", "made_by", "licence", "architecture", "trained_on", "knows", "cannot_know")
PART_KEYS = ("norm", "position", "mlp", "n_head", "n_kv_head")  # the parts a page may point to
_cards = SharedCache(CARDS_BYTES)  # (path, mtime, size) -> (ModelCard | None,)


@dataclass(frozen=True)
class ModelCard:
    """The facts of one card; a fact the card does not give is None (or absent from parts)."""

    name: str | None = None
    made_by: str | None = None
    licence: str | None = None
    architecture: str | None = None
    trained_on: str | None = None
    knows: str | None = None
    cannot_know: str | None = None
    parameters: int | None = None
    heldout_nats_per_char: float | None = None
    parts: dict = field(default_factory=dict)  # PART_KEYS -> str | int, from the model's config


def card_path(model_id: str) -> Path:
    """models/<name>.card.json for models/<name>.npz, <name>.gguf or the folder models/<name>."""
    return models_dir() / f"{Path(model_id).stem}{CARD_SUFFIX}"


def _text(value) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    value = " ".join(value.split())
    return value if len(value) <= MAX_TEXT_CHARS else value[:MAX_TEXT_CHARS - 1] + "…"


def _number(value, kind: type):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or (kind is int and (value != int(value) or value < 0)):
        return None
    return kind(value)


def _parts(value) -> dict:
    if not isinstance(value, dict):
        return {}
    kept = {k: value[k] for k in PART_KEYS if k in value}
    return {k: v for k, v in kept.items()
            if isinstance(v, str) or _number(v, int) is not None}


def parse_card(data) -> ModelCard | None:
    """A card's JSON object read into a ModelCard (None: not an object); a field of the wrong
    kind is left out, never an error."""
    if not isinstance(data, dict):
        return None
    return ModelCard(**{k: _text(data.get(k)) for k in TEXTS},
                     parameters=_number(data.get("parameters"), int),
                     heldout_nats_per_char=_number(data.get("heldout_nats_per_char"), float),
                     parts=_parts(data.get("config")))


def read_card(model_id: str) -> ModelCard | None:
    """The model's card, or None: no card file (a model trained on the Training page has none),
    or one that cannot be read as a card."""
    if model_id is None or is_session_model(model_id):
        return None
    path = card_path(model_id)
    try:
        stat = path.stat()
    except OSError:
        return None
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    hit = _cards.get(key)
    if hit is None:
        try:
            card = parse_card(read_json(path, MAX_CARD_BYTES, path.name))
        except (CheckpointError, OSError, ValueError):
            card = None
        hit = _cards.setdefault(key, (card,))
    return hit[0]


def models_having(test: Callable[[dict], bool], but: str | None = None) -> list[str]:
    """The models of the models folder whose card's parts pass `test` (the model `but` left
    out): "which model here has rotary positions?"."""
    found = []
    for model_id in available_models():
        card = read_card(model_id) if model_id != but else None
        if card is not None and card.parts and test(card.parts):
            found.append(model_id)
    return found


NO_CARD = ("No model card: what this model was trained on, and so what it can know, is not "
           "recorded.")


def size_words(parameters: int) -> str:
    """A parameter count as a reader says it: "4.27 million parameters", "135 million"."""
    if parameters >= 10**9:
        return f"{parameters / 1e9:.3g} billion parameters"
    if parameters >= 10**6:
        return f"{parameters / 1e6:.3g} million parameters"
    return f"{parameters:,} parameters"


def headline(card: ModelCard) -> str:
    """The card in a few words: its size and what it was trained on ("" if it gives neither)."""
    size = size_words(card.parameters) if card.parameters is not None else None
    data = f"trained on {card.trained_on}" if card.trained_on else None
    return ", ".join(part for part in (size, data) if part)


def card_rows(card: ModelCard) -> list[tuple[str, str]]:
    """(label, text) for each fact the card gives, in the order a reader asks for them."""
    rows = [("Trained on", card.trained_on), ("Size", card.parameters is not None
                                              and size_words(card.parameters)),
            ("Can know", card.knows), ("Cannot know", card.cannot_know),
            ("Made of", card.architecture), ("Made by", card.made_by),
            ("Licence", card.licence)]
    return [(label, text) for label, text in rows if text]
