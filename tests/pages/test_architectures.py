"""Page 14, Architectures: the shipped GPT-style model beside a Llama-style folder. The table
names each one's parts, the parameter bars are the models' own counts, the KV bytes follow the
config, the card's loss is shown (or "no card"), the next-token bars equal a separate forward
of each model, and the two tokenizers' cuts are both shown."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
pytest.importorskip("safetensors.numpy")

from tests.apptest_support import TINY, assert_clean, chart, decode, open_page  # noqa: E402
from tests.tinygpt_app.compute.test_modern_folder import write_llama_folder  # noqa: E402
from tinygpt import load  # noqa: E402
from tinygpt.readouts.modern.architecture import kv_bytes_per_token, parameters_by_part  # noqa: E402

PAGE = "pages/13_Architectures.py"
PROMPT = "Hello, world! It's a test of the tokens"


@pytest.fixture
def side_by_side(tmp_path, monkeypatch):
    """models/: shakespeare.npz (the shipped GPT-style model, with a card) and a Llama folder."""
    shutil.copy(TINY, tmp_path / "shakespeare.npz")
    (tmp_path / "shakespeare.card.json").write_text(json.dumps({"heldout_nats_per_char": 1.5}))
    folder = tmp_path / "smol"
    folder.mkdir()
    write_llama_folder(folder)
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "shakespeare.npz")
    return tmp_path


def open_both():
    at = open_page(PAGE, PROMPT)
    at.multiselect(key="architectures.models").set_value(["shakespeare.npz", "smol"]).run()
    assert_clean(at)
    return at


def test_the_table_names_each_models_parts_and_its_card(side_by_side):
    at = open_both()
    table = at.dataframe[0].value
    assert list(table.columns) == ["shakespeare.npz", "smol"]
    assert table.loc["family"].tolist() == ["GPT-2-style", "Llama-style"]
    assert table.loc["normalisation"].tolist() == ["LayerNorm", "RMSNorm"]
    assert table.loc["positions", "smol"] == "rotary positions inside attention"
    assert table.loc["heads", "smol"] == "4 query heads, 2 key/value heads"
    assert table.loc["held-out loss"].tolist() == [
        "1.500 nats per character", "no card"]


def test_the_numbers_are_the_models_own(side_by_side):
    at = open_both()
    gpt, gpt_tok = load(side_by_side / "shakespeare.npz")
    llama, llama_tok = load(side_by_side / "smol")
    bars = chart(at, "Parameters by part")["data"]
    for trace, model in zip(bars, (gpt, llama), strict=True):
        counts = decode(trace["x"], float)
        np.testing.assert_array_equal(counts, list(parameters_by_part(model.config).values()))
        assert counts.sum() == model.num_parameters()
    said = {m.label: m.value for m in at.metric}
    assert said["smol: bytes per token"] == f"{kv_bytes_per_token(llama.config):,}"
    assert said["shakespeare.npz: bytes per token"] == f"{kv_bytes_per_token(gpt.config):,}"
    for model, tok, name in ((gpt, gpt_tok, "shakespeare.npz"), (llama, llama_tok, "smol")):
        ids = np.array(tok.encode(PROMPT))
        row = model.forward(ids).astype(np.float64)[-1]
        probs = np.exp(row - row.max()) / np.exp(row - row.max()).sum()
        shown = decode(chart(at, f"{name}: after its last")["data"][0]["x"], float)
        np.testing.assert_allclose(shown, np.sort(probs)[::-1][:len(shown)], rtol=1e-4)


def test_both_tokenizers_cuts_are_shown(side_by_side):
    at = open_both()
    _, llama_tok = load(side_by_side / "smol")
    text = "\n".join(m.value for m in at.markdown)
    assert f"**smol**: {len(llama_tok.encode(PROMPT))} tokens" in text
    for token_id in llama_tok.encode(PROMPT):
        assert f"id {token_id}" in text
    assert "cut the text into the same" not in text


def test_a_single_model_page_runs_with_the_defaults(side_by_side):
    at = open_page(PAGE, PROMPT)
    assert_clean(at)
    assert at.multiselect(key="architectures.models").value == ["shakespeare.npz"]
