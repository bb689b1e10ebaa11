"""Every count, float and flag of a model file checked before it is used (issue 45): a layer
count of 1e9 is refused before anything is allocated (peak memory read in a child process),
every float or flag lie is refused by name, 150,000 junk tensor entries are refused from the
header's size, and a tokenizer too slow to serve is refused before the weights are read."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bench.hostile_files import npz_with_layers, tokenizer_json
from tests.core_support import TINY
from tests.tinygpt.checkpoint.test_hf_modern import LLAMA, llama_state, write_folder
from tinygpt.checkpoint.files import load, load_modern_model
from tinygpt.safe_io import CheckpointError

st = pytest.importorskip("safetensors.numpy", reason="the safetensors package writes the file")
ROOT = Path(__file__).resolve().parents[3]


def llama_folder(folder: Path, **change) -> Path:
    """A tiny Llama folder with a byte-level tokenizer.json, config.json changed by `change`."""
    config = {**LLAMA, "vocab_size": 256, **change}
    write_folder(folder, config, llama_state({**LLAMA, "vocab_size": 256}))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json()))
    return folder


CHILD = """
import json, sys, time
start = time.perf_counter()
from tinygpt.checkpoint.files import load, CheckpointError
imported = time.perf_counter()
try:
    load(sys.argv[1], root=sys.argv[2])
    outcome = "loaded"
except CheckpointError as err:
    outcome = str(err)
took = time.perf_counter() - imported
peak = next(int(line.split()[1]) for line in open("/proc/self/status")
            if line.startswith("VmHWM:"))
print(json.dumps({"outcome": outcome, "load_s": took, "peak_mb": peak / 1024}))
"""


def load_in_a_child(path: Path, root: Path) -> dict:
    """load() in a fresh process: its outcome, seconds, and peak resident memory (MB)."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(root)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["config.json", ".npz"])
def test_a_billion_layers_are_refused_before_anything_is_allocated(tmp_path, kind):
    """Before: num_hidden_layers 1e9 took the server from 74 MB to 2,994 MB in 60 s, and an
    .npz with n_layer 1e9 1.1 GB in 20 s (every layer was listed before the size cap)."""
    if kind == ".npz":
        path = npz_with_layers(tmp_path / "layers.npz", 10**9, source=TINY)
    else:
        path = llama_folder(tmp_path / "layers", num_hidden_layers=10**9)
    result = load_in_a_child(path, tmp_path)
    assert "1,000,000,000" in result["outcome"] or "1000000000" in result["outcome"]
    assert "1,024" in result["outcome"]  # the cap, named
    assert result["load_s"] < 1.0  # measured: 1 ms
    assert result["peak_mb"] < 200  # measured: 31 MB, most of it Python and NumPy


LIES = [
    ({"rms_norm_eps": float("inf")}, "rms_norm_eps inf is not a finite number"),
    ({"rms_norm_eps": "1e400"}, "rms_norm_eps inf is not a finite number"),
    ({"rms_norm_eps": 0}, "rms_norm_eps 0 is outside the range"),
    ({"rope_theta": float("inf")}, "rope_theta inf is not a finite number"),
    ({"rope_theta": 1e308}, "rope_theta 1e[+]308 is outside the range"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": "1e4"}}, "rope_theta '1e4'"),
    ({"max_position_embeddings": 10**30}, "max_position_embeddings 1000000000000000000000"),
    ({"max_position_embeddings": 2**62}, "max_position_embeddings 4611686018427387904"),
    ({"max_position_embeddings": 1e30}, "max_position_embeddings 1e[+]30 is not an integer"),
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings 'no' is not true or false"),
    ({"attention_bias": 0}, "attention_bias 0 is not true or false"),
    ({"mlp_bias": None}, "mlp_bias None is not true or false"),
    ({"use_sliding_window": "false"}, "use_sliding_window 'false' is not true or false"),
    ({"hidden_size": 2**40}, "hidden_size 1099511627776 is outside 1 .. 65,536"),
    ({"vocab_size": 2**31}, "vocab_size 2147483648 is outside"),
    ({"intermediate_size": 10**9}, "intermediate_size 1000000000 is outside"),
    ({"num_attention_heads": 10**6}, "num_attention_heads 1000000 is outside"),
]


@pytest.mark.parametrize("change, message", LIES)
def test_every_float_and_flag_lie_is_refused_by_name(tmp_path, change, message):
    """Before: eps Infinity or 1e400 loaded (RMSNorm then gave zeros), rope_theta 1e308
    loaded, 2^62 positions loaded (the Attention page failed later), "no" read as true."""
    folder = llama_folder(tmp_path / "m", **change)
    config = folder / "config.json"
    config.write_text(config.read_text().replace('"1e400"', "1e400"))
    with pytest.raises(CheckpointError, match=message) as err:
        load(folder, tmp_path)
    assert str(err.value).startswith("m/config.json: ")


def test_junk_tensor_entries_are_refused_from_the_header_size(tmp_path):
    """Before: 150,000 junk entries took 5.5 s and 290 MB before their refusal."""
    folder = llama_folder(tmp_path / "junk")
    state = llama_state({**LLAMA, "vocab_size": 256})
    state.update({f"junk.{i}": np.zeros(1, np.float32) for i in range(150_000)})
    st.save_file(state, folder / "model.safetensors")
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match=r"junk/model.safetensors: a header of [\d,]+ "
                                              r"bytes; the limit is [\d,]+ for this model"):
        load_modern_model(folder, tmp_path)  # the weights alone (load warms the tokenizer up)
    assert time.perf_counter() - start < 0.5  # measured: 0.01 s


def test_a_few_junk_entries_under_the_header_cap_are_refused_by_their_count(tmp_path):
    folder = llama_folder(tmp_path / "junk")
    state = llama_state({**LLAMA, "vocab_size": 256})
    state.update({f"j{i}": np.zeros(0, np.float32) for i in range(200)})
    st.save_file(state, folder / "model.safetensors")
    with pytest.raises(CheckpointError, match="tensor entries; the limit is"):
        load(folder, tmp_path)


def test_a_config_larger_than_its_weights_file_is_refused_before_reading_it(tmp_path):
    folder = llama_folder(tmp_path / "m", num_hidden_layers=500, hidden_size=256,
                          num_attention_heads=4, num_key_value_heads=2)
    with pytest.raises(CheckpointError, match="more than the weights' [\\d,]+ bytes can hold"):
        load(folder, tmp_path)


def test_a_tokenizer_too_slow_to_serve_is_refused_by_its_file_name(tmp_path, monkeypatch):
    from tinygpt.tokenizer import warm_up

    llama_folder(tmp_path / "models" / "m")
    monkeypatch.setattr(warm_up, "WARM_UP_CPU_SECONDS", 0.0)  # any encode is too slow now
    with pytest.raises(CheckpointError, match="too slow to serve") as err:
        load(tmp_path / "models" / "m", tmp_path / "models")
    assert str(err.value).startswith("m/tokenizer.json: ")
    assert str(tmp_path) not in str(err.value)


def test_the_docs_table_is_what_the_results_files_say():
    """docs/modern_models.md's table of hostile files is written by bench/hostile_files.py."""
    from bench.hostile_files import BEFORE, DOCS, OUT, docs_table

    if not OUT.is_file():
        pytest.skip("bench/hostile_files.py has not been run here")
    before = json.loads(BEFORE.read_text()) if BEFORE.is_file() else None
    assert docs_table(json.loads(OUT.read_text()), before) in DOCS.read_text(encoding="utf-8")
