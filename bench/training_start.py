"""How long from pressing Start on the Training page to the first step record (issue 12).

The page run that handles the click (what the student's tab, and the server's GIL, pay) and the
wait until the job has its first StepRecord (what the student waits for the loss curve), on the
tests' tiny model, a 1-block d = 16 model and 20 steps:
  - shipped: the Shakespeare corpus with the current tokenizer (the first run encodes it; the
    server keeps the ids for the next ones),
  - paste: 200,000 characters of the corpus with a fresh vocabulary (a different slice each run),
  - hostile: 200,000 distinct CJK characters with a fresh vocabulary (only the click is timed:
    learning that vocabulary takes minutes; the job is stopped at once).

    python bench/training_start.py --runs 2

Prints every run; writes nothing. The machine's load average is printed with them: the
numbers are only comparable between runs on an equally quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TINYGPT_MODELS_DIR", str(ROOT / "tests" / "fixtures"))
os.environ.setdefault("TINYGPT_DEFAULT_MODEL", "tiny.npz")

import numpy as np  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from tinygpt.train.corpus import load_corpus  # noqa: E402

FRESH = "A fresh one learnt from the training text (v = 512)"


def text_for(kind: str, run: int) -> str | None:
    """The pasted text of a scenario (None: the shipped corpus)."""
    if kind == "paste":
        return load_corpus("train")[run * 200_000:(run + 1) * 200_000]
    if kind == "hostile":
        rng = np.random.default_rng(run)
        return "".join(map(chr, rng.integers(0x4E00, 0x9FFF, size=200_000)))
    return None


def one_start(kind: str, run: int) -> tuple[float, float | None]:
    """(seconds of the click's page run, seconds until the first step record or None)."""
    at = AppTest.from_file(str(ROOT / "pages" / "experiments" / "12_Training.py"),
                           default_timeout=600)
    at.run()
    at.slider(key="training.layers").set_value(1)
    at.select_slider(key="training.heads").set_value(1)
    at.select_slider(key="training.embd").set_value(16)
    at.select_slider(key="training.block").set_value(16)
    at.slider(key="training.batch").set_value(4)
    at.number_input(key="training.steps").set_value(20)
    text = text_for(kind, run)
    if text is not None:
        at.radio(key="training.source").set_value("Text I paste below")
        at.radio(key="training.vocab").set_value(FRESH)
        at.text_area(key="training.text").set_value(text)
    start = time.perf_counter()
    at.button(key="training.start").click().run()
    click = time.perf_counter() - start
    job = at.session_state["training.job"]
    first = None
    if kind != "hostile":
        while not job.records() and not job.done:
            time.sleep(0.005)
        first = time.perf_counter() - start
    job.stop()
    job.wait(120)
    assert job.error is None, job.error
    return click, first


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--kinds", default="shipped,paste,hostile")
    args = p.parse_args()
    for kind in args.kinds.split(","):
        for run in range(args.runs):
            click, first = one_start(kind, run)
            shown = "-" if first is None else f"{first:.2f} s"
            print(f"{kind} run {run + 1}: click {click:.2f} s, first step record {shown} "
                  f"(load average {os.getloadavg()[0]:.2f})", flush=True)


if __name__ == "__main__":
    main()
