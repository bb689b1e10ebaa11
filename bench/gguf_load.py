"""Loading a GGUF file: the first load (dequantize, write the float32 copy) and a later one
(map the copy), each in a fresh process; and the peak memory of a process that has the model
loaded and has run every page of the app on it (Streamlit's AppTest, one page after another).

The model is the real SmolLM2-135M-Instruct (Q4_1), as `python -m tinygpt.models get smollm2`
puts it into a folder (given with --gguf, else fetched into a temporary folder). Each round
copies the file into a fresh temporary models folder, so the first load really has no copy.
Threads: 1 (OPENBLAS/OMP/MKL_NUM_THREADS set for the child processes). Results:
bench/results/other/gguf_load.json (medians and every run).

    python bench/gguf_load.py --gguf models/SmolLM2-135M-Instruct.Q4_1.gguf --rounds 3
    python bench/gguf_load.py --gguf ... --rounds 1 --no-pages --results-dir /tmp/smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THREADS = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}

LOAD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
import tinygpt
t = time.perf_counter()
model, tok = tinygpt.load(sys.argv[1])
seconds = time.perf_counter() - t
print(json.dumps({{"seconds": seconds, "from_copy": model.metadata["from_copy"],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

PAGES = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from tests.apptest_support import PAGES, open_page
prompt = "The capital of France is"
peaks = {{}}
for page in PAGES:
    t = time.perf_counter()
    at = open_page(page, prompt)
    peaks[page] = {{"seconds": round(time.perf_counter() - t, 1),
                   "errors": [str(e.value)[:200] for e in [*at.exception, *at.error]],
                   "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}
print(json.dumps(peaks))
"""


def run(script: str, *args: str, env: dict | None = None, timeout: int = 3600):
    done = subprocess.run([sys.executable, "-c", script.format(root=str(ROOT)), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, **THREADS, **(env or {})))
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_rounds(gguf: Path, rounds: int) -> dict:
    first, later = [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / gguf.name
            shutil.copy(gguf, target)
            env = {"XDG_CACHE_HOME": str(Path(tmp) / "xdg")}
            first.append(run(LOAD, str(target), env=env))
            later.append(run(LOAD, str(target), env=env))
            assert not first[-1]["from_copy"] and later[-1]["from_copy"]
    summary = {name: {"median_seconds": statistics.median(r["seconds"] for r in runs),
                      "median_peak_mb": statistics.median(r["peak_mb"] for r in runs),
                      "runs": runs} for name, runs in (("first", first), ("later", later))}
    return summary


def pages_peak(gguf: Path) -> dict:
    """Every page on the model, in one process (its copy written beforehand)."""
    run(LOAD, str(gguf))
    env = {"TINYGPT_MODELS_DIR": str(gguf.parent), "TINYGPT_DEFAULT_MODEL": gguf.name}
    per_page = run(PAGES, env=env)
    return {"peak_mb": max(p["peak_mb"] for p in per_page.values()), "pages": per_page}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-pages", action="store_true")
    parser.add_argument("--results-dir", type=Path, default=ROOT / "bench" / "results" / "other")
    args = parser.parse_args()
    results = {"file": args.gguf.name, "threads": 1, "load": load_rounds(args.gguf, args.rounds)}
    if not args.no_pages:
        results["every_page"] = pages_peak(args.gguf.resolve())
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / "gguf_load.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    load = results["load"]
    print(f"first load {load['first']['median_seconds']:.2f} s, later "
          f"{load['later']['median_seconds']:.2f} s; peaks {load['first']['median_peak_mb']:.0f}"
          f" / {load['later']['median_peak_mb']:.0f} MB"
          + (f"; every page {results['every_page']['peak_mb']:.0f} MB"
             if "every_page" in results else ""))


if __name__ == "__main__":
    main()
