"""Hostile model files (issue 45): what each costs to load, or to refuse, and to encode with.

Every case is a small model folder or checkpoint that lies in one place: 150,000 added tokens
(normalized, or special), a layer count of 1e9 (config.json and .npz), floats and booleans of
the wrong kind (eps Infinity, rope_theta 1e308, positions 2^62, tie_word_embeddings "no"),
2.2 million duplicate merges, 150,000 junk tensor entries, and the added tokens that make the
longest walk of the one-pass matcher (every prefix of a long token, each ending differently).

Each case is loaded with `tinygpt.load` (what the app calls) in a child process of its own,
under a memory limit and a timeout; the parent reads the child's peak RSS (VmHWM) from /proc
while it runs. A model that loads is then asked to encode the app's warm-up text, a 7-character
prompt and a 2,000-character one (twice that to see the cost grow with the prompt).

    python bench/hostile_files.py            # every case -> bench/results/other/hostile_files.json
    python bench/hostile.py --model-files    # the same, as one part of the hostile bench
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tinygpt.tokenizer.pretokenizer import bytes_to_unicode  # noqa: E402

OUT = ROOT / "bench" / "results" / "other" / "hostile_files.json"
LIMIT_BYTES = 3 * 2**30  # the child's address space: a runaway stops here, not at the machine's
LLAMA = {"model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
         "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
         "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
         "hidden_act": "silu", "tie_word_embeddings": True}


# ----------------------------------------------------------------------------- the files


def tokenizer_json(added: list[dict] = (), *, merges: list = (), extra_vocab: list[str] = (),
                   nfc: bool = False) -> dict:
    """A byte-level BPE tokenizer.json as a dict: the 256 byte tokens, `extra_vocab` after
    them, then `added` (dicts with at least "content"), each given the next id."""
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    vocab.update({text: 256 + i for i, text in enumerate(extra_vocab)})
    tokens = [dict(token, id=len(vocab) + i) for i, token in enumerate(added)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
            "normalizer": {"type": "NFC"} if nfc else None, "pre_tokenizer": byte_level,
            "post_processor": None, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": list(merges)}}


def added_token(content: str, *, special: bool = False, normalized: bool | None = None,
                short: bool = False) -> dict:
    """One entry of tokenizer.json's added_tokens (normalized: by default, not special).
    `short`: without the flags that default to false (150,000 tokens then fit the file cap)."""
    token = {"content": content, "normalized": (not special) if normalized is None else normalized,
             "special": special}
    return token if short else {**token, "single_word": False, "lstrip": False, "rstrip": False}


def llama_folder(folder: Path, tok: dict, config: dict | None = None,
                 junk_tensors: int = 0) -> Path:
    """A tiny Llama folder (tied, d = 8) whose vocab_size fits `tok`; `config` overrides."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    rows = len(tok["model"]["vocab"]) + len(tok["added_tokens"])
    hf = dict(LLAMA, vocab_size=rows, **(config or {}))
    (folder / "config.json").write_text(json.dumps(hf).replace('"1e400"', "1e400"))
    (folder / "tokenizer.json").write_text(json.dumps(tok, separators=(",", ":")))
    rng = np.random.default_rng(0)
    shapes = {"model.embed_tokens.weight": (rows, 8), "model.norm.weight": (8,)}
    for i in range(LLAMA["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (8,), p + "post_attention_layernorm.weight":
                       (8,), p + "self_attn.q_proj.weight": (8, 8), p + "self_attn.k_proj.weight":
                       (4, 8), p + "self_attn.v_proj.weight": (4, 8), p + "self_attn.o_proj.weight":
                       (8, 8), p + "mlp.gate_proj.weight": (16, 8), p + "mlp.up_proj.weight":
                       (16, 8), p + "mlp.down_proj.weight": (8, 16)})
    tensors = {n: rng.standard_normal(s).astype(np.float32) * 0.1 for n, s in shapes.items()}
    tensors.update({f"junk.{i}": np.zeros(1, np.float32) for i in range(junk_tensors)})
    save_file(tensors, folder / "model.safetensors")
    return folder


def npz_with_layers(path: Path, n_layer: int,
                    source: Path = ROOT / "models" / "shakespeare.npz") -> Path:
    """A copy of the checkpoint `source`, its __config__ rewritten to claim `n_layer` layers."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(path, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "__config__.npy":
                header = json.loads(np.load(io.BytesIO(data)).tobytes())
                header["config"]["n_layer"] = n_layer
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
                data = buf.getvalue()
            out.writestr(info.filename, data)
    return path


def walk_tokens() -> list[str]:
    """The added tokens that make the one-pass matcher walk furthest at every position of a
    text of "a"s: "a"*k + "b" for every k below the cap on an added token's length."""
    from tinygpt.caps import MAX_ADDED_TOKEN_CHARS

    return ["a" * k + "b" for k in range(1, MAX_ADDED_TOKEN_CHARS)]


def build_cases(folder: Path) -> dict[str, Path]:
    """Every hostile case, written into `folder` (the models folder of the run)."""
    cases: dict[str, Path] = {}
    plain = tokenizer_json()
    for kind in ("normalized", "special"):
        many = [added_token(f"<x{i}>", special=kind == "special", short=True)
                for i in range(150_000)]
        cases[f"150k added tokens ({kind})"] = llama_folder(folder / kind, tokenizer_json(many))
    cases["longest matcher walk (255 tokens a..ab)"] = llama_folder(
        folder / "walk", tokenizer_json([added_token(t, special=False) for t in walk_tokens()]))
    for name, change in LIES.items():
        cases[name] = llama_folder(folder / re.sub(r"\W+", "_", name), plain, change)
    merges = ["a b"] * 2_200_000
    cases["2.2M duplicate merges"] = llama_folder(
        folder / "merges", tokenizer_json(merges=merges, extra_vocab=["ab"]))
    cases["150k junk tensor entries"] = llama_folder(folder / "junk", plain, junk_tensors=150_000)
    cases["n_layer 1e9 (.npz)"] = npz_with_layers(folder / "layers.npz", 10**9)
    return cases


# config.json lies, one a case: the value and the key it replaces
LIES = {
    "num_hidden_layers: 1e9": {"num_hidden_layers": 10**9},
    "num_hidden_layers: 300k": {"num_hidden_layers": 300_000},
    "rms_norm_eps: Infinity": {"rms_norm_eps": float("inf")},
    "rms_norm_eps: 1e400": {"rms_norm_eps": "1e400"},  # written as the number 1e400
    "rope_theta: 1e308": {"rope_theta": 1e308},
    "max_position_embeddings: 1e30": {"max_position_embeddings": 10**30},
    "max_position_embeddings: 2^62": {"max_position_embeddings": 2**62},
    "tie_word_embeddings: \"no\"": {"tie_word_embeddings": "no"},
}


# ----------------------------------------------------------------------------- one load


CHILD = r"""
import json, sys, time
from pathlib import Path
path, root = Path(sys.argv[1]), Path(sys.argv[2])
from tinygpt.checkpoint.files import load, CheckpointError
out = {}
start = time.perf_counter()
try:
    model, tok = load(path, root=root)
except CheckpointError as err:
    out.update(outcome="refused", message=str(err)[:200])
except MemoryError:
    out.update(outcome="MemoryError")
else:
    out["outcome"] = "loaded"
out["load_s"] = round(time.perf_counter() - start, 3)
print(json.dumps(out), flush=True)
if out["outcome"] == "loaded":
    for name, text in (("warm_up", "warm up"), ("7_chars", "Hi <|x|"), ("2000_chars", None),
                       ("4000_chars", None)):
        n = int(name.split("_")[0]) if text is None else 0
        text = text or ("Hello <x1> world " + "a" * 300 + " ") * (n // 67 + 1)
        text = text[:n] if n else text
        start = time.perf_counter()
        tok.encode(text)
        out[f"encode_{name}_s"] = round(time.perf_counter() - start, 4)
        print(json.dumps(out), flush=True)
"""


def measure(path: Path, root: Path, timeout: float) -> dict:
    """Load `path` in a child (memory-limited); its last report, peak RSS, and wall time."""
    def limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))

    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(root)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=limit)
    peak = 0
    while child.poll() is None and time.perf_counter() - start < timeout:
        peak = max(peak, _vm_hwm(child.pid))
        time.sleep(0.05)
    timed_out = child.poll() is None
    if timed_out:
        peak = max(peak, _vm_hwm(child.pid))
        child.kill()
    stdout, stderr = child.communicate()
    lines = stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {
        "outcome": "still loading" if timed_out else "crashed", "stderr": stderr[-300:]}
    if timed_out:
        result["timed_out_after_s"] = timeout
    result.update(wall_s=round(time.perf_counter() - start, 2), peak_rss_mb=round(peak / 2**20))
    return result


def _vm_hwm(pid: int) -> int:
    """The process's peak resident memory (bytes), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(only: str | None = None, timeout: float = 60.0, out: Path = OUT) -> dict:
    """Every case (or those whose name contains `only`), measured; written to `out`."""
    with tempfile.TemporaryDirectory(prefix="tinygpt-hostile-files-") as tmp:
        folder = Path(tmp) / "models"
        folder.mkdir()
        cases = build_cases(folder)
        rows = {}
        for name, path in cases.items():
            if only and only not in name:
                continue
            rows[name] = measure(path, folder, timeout)
            print(f"{name:44s} {json.dumps(rows[name])}", flush=True)
    result = {"command": "python bench/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "timeout_s": timeout, "memory_limit_mb": LIMIT_BYTES // 2**20, "cases": rows}
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return result


DOCS = ROOT / "docs" / "modern_models.md"
BEFORE = ROOT / "bench" / "results" / "other" / "hostile_files_before.json"


def docs_table(after: dict, before: dict | None) -> str:
    """The docs' table: each case before (main before issue 45, if that file is there) and
    now: what happened, seconds, peak memory."""
    def cell(row: dict | None) -> str:
        if not row:
            return "not run"
        what = row["outcome"]
        if "timed_out_after_s" in row:
            doing = "encoding" if what == "loaded" else "loading"
            what = f"still {doing} after {row['timed_out_after_s']:.0f} s (stopped)"
        elif what == "loaded":
            encode = row.get("encode_4000_chars_s")
            what += f", 4,000 chars in {encode * 1000:.1f} ms" if encode is not None else ""
        return f"{what}; {row['wall_s']:.2f} s, {row['peak_rss_mb']} MB"

    lines = ["| hostile file | before (main) | now |", "|---|---|---|"]
    for name, row in after["cases"].items():
        old = (before or {}).get("cases", {}).get(name)
        lines.append(f"| {name} | {cell(old)} | {cell(row)} |")
    return "\n".join(lines)


def write_docs(after: dict) -> None:
    """Put the table between the docs' hostile-files markers."""
    before = json.loads(BEFORE.read_text()) if BEFORE.is_file() else None
    text = DOCS.read_text(encoding="utf-8")
    start, end = "<!-- hostile-files -->", "<!-- /hostile-files -->"
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    DOCS.write_text(f"{head}{start}\n{docs_table(after, before)}\n{end}{tail}", encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="run only the cases whose name contains this")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    result = run(args.only, args.timeout, args.out)
    if args.out == OUT and not args.only:
        write_docs(result)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
