"""The trainer's command line: trains, saves beside the checkpoint, resumes exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from tinygpt.checkpoint import files as checkpoint
from tinygpt.train import cli
from tinygpt.train.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_cli_trains_saves_and_resumes(tmp_path, capsys):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 60, encoding="utf-8")
    out = tmp_path / "m.npz"
    common = ["--corpus", str(corpus), "--out", str(out), "--eval-interval", "3",
              "--sample-interval", "3", "--save-interval", "2", "--eval-batches", "1"]
    args = common + ["--vocab-size", "270", "--n-layer", "1", "--n-head", "2", "--n-embd", "8",
                     "--n-ctx", "16", "--batch-size", "2", "--block-size", "16", "--steps", "4"]
    assert main(args) == 0
    model, tok = checkpoint.load(out)
    assert model.metadata["step"] == 4
    assert "nats_per_char" in model.metadata["validation"]
    assert (tmp_path / "m.optim.npz").is_file() and (tmp_path / "m.ids.npz").is_file()
    log = [json.loads(line) for line in (tmp_path / "m.log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]

    assert main(common + ["--resume", "--steps", "6"]) == 0
    model, _ = checkpoint.load(out)
    assert model.metadata["step"] == 6
    log = [json.loads(line) for line in (tmp_path / "m.log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]
    assert "step 6/6" in capsys.readouterr().out


def test_python_m_tinygpt_train_still_runs_the_cli():
    """README and docs say `python -m tinygpt.train ...`: it is the command line (train/cli.py)."""
    for module in ("tinygpt.train", "tinygpt.train.cli"):
        done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "--resume" in done.stdout and "usage: python -m tinygpt.train" in done.stdout


def _blas_threads_now() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_threads_sets_blas_threads_for_the_run_in_this_process(tmp_path, monkeypatch):
    """--threads N: BLAS uses N threads while the run trains, in this process (no restart),
    and its count is given back afterwards."""
    import numpy  # noqa: F401 - loads BLAS, so that threadpool_info sees it

    before = _blas_threads_now()
    if not before:
        pytest.skip("no BLAS library that threadpoolctl can see")
    wanted = 1 if before[0] != 1 else 2
    seen = []
    monkeypatch.setattr(cli, "_train", lambda run: seen.append(_blas_threads_now()) or 0)
    monkeypatch.setattr(os, "execv",
                        lambda *a: pytest.fail("the run must not start the program again"))
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 60, encoding="utf-8")
    args = ["--corpus", str(corpus), "--out", str(tmp_path / "m.npz"), "--vocab-size", "260",
            "--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--n-ctx", "8", "--block-size", "8",
            "--threads", str(wanted)]
    assert main(args) == 0
    assert seen == [[wanted] * len(before)]
    assert _blas_threads_now() == before


def test_threads_must_be_at_least_one(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--out", "x.npz", "--threads", "0"])
    assert stopped.value.code == 2
    assert "--threads: must be 1 or more" in capsys.readouterr().err


def _llama_run(tmp_path: Path, name: str, tokenizer: Path, steps: int, resume: bool = False):
    corpus = tmp_path / "tiny.txt"
    out = tmp_path / name
    args = ["--corpus", str(corpus), "--out", str(out), "--steps", str(steps),
            "--eval-interval", "0", "--sample-interval", "0", "--save-interval", "2"]
    if resume:
        return main(args + ["--resume"]), out
    args += ["--tokenizer", str(tokenizer), "--arch", "llama", "--n-layer", "2", "--n-head", "4",
             "--n-kv-head", "2", "--n-embd", "16", "--n-inner", "24", "--rope-theta", "500",
             "--n-ctx", "16", "--batch-size", "2", "--block-size", "16"]
    return main(args), out


def test_arch_llama_trains_the_modern_parts_and_resumes_exactly(tmp_path, capsys):
    """--arch llama: RMSNorm, rotary positions, grouped-query attention, SwiGLU, no biases;
    the tokenizer comes from another checkpoint; 4 steps + resume to 6 = 6 steps at once."""
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 60, encoding="utf-8")
    source = tmp_path / "gpt.npz"
    assert main(["--corpus", str(corpus), "--out", str(source), "--vocab-size", "270",
                 "--n-layer", "1", "--n-head", "2", "--n-embd", "8", "--n-ctx", "16",
                 "--batch-size", "2", "--block-size", "16", "--steps", "1"]) == 0
    _, gpt_tok = checkpoint.load(source)

    assert _llama_run(tmp_path, "a.npz", source, 4)[0] == 0
    assert _llama_run(tmp_path, "a.npz", source, 6, resume=True)[0] == 0
    assert _llama_run(tmp_path, "b.npz", source, 6)[0] == 0
    resumed, tok = checkpoint.load(tmp_path / "a.npz")
    straight, _ = checkpoint.load(tmp_path / "b.npz")

    c = resumed.config
    assert (c.norm, c.position, c.mlp, c.n_kv_head, c.n_inner, c.rope_theta) == (
        "rmsnorm", "rope", "swiglu", 2, 24, 500.0)
    assert not (c.attn_bias or c.proj_bias or c.mlp_bias)
    assert tok.to_json_dict() == gpt_tok.to_json_dict()  # the same vocabulary
    assert resumed.metadata["step"] == straight.metadata["step"] == 6
    a, b = resumed.parameters(), straight.parameters()
    assert a.keys() == b.keys() and not any("pos" in name for name in a)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_each_part_can_override_the_arch_preset():
    args = cli._parser().parse_args(["--out", "x.npz", "--arch", "llama", "--norm", "layernorm",
                                     "--bias", "--n-embd", "32", "--n-head", "4"])
    c = cli.model_config(args, vocab_size=300)
    assert (c.norm, c.position, c.mlp, c.attn_bias, c.mlp_bias) == (
        "layernorm", "rope", "swiglu", True, True)
    gpt2 = cli.model_config(cli._parser().parse_args(["--out", "x.npz"]), vocab_size=300)
    assert (gpt2.norm, gpt2.position, gpt2.mlp, gpt2.n_kv_head, gpt2.attn_bias) == (
        "layernorm", "learned", "gelu", None, True)
