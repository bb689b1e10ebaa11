"""What every bench that times tinygpt against another library shares.

- One process per thread count: the parent (`run`) starts the bench again for each count with
  OPENBLAS_NUM_THREADS & co. set in the child's environment, so they hold before NumPy or
  PyTorch is imported; the child then pins threadpoolctl and torch.set_num_threads as well.
- Each library timed in its own block (`timed`: warm-up, then several runs), never call by
  call in alternation: an idle library's worker threads keep spinning for a while and steal
  the core from the other one. `settle()` between blocks lets them go to sleep.
- Medians with their spread (min, quartiles, max), every figure written to
  bench/results/<bench>.json with the machine it ran on; scripts/speed_table.py turns those
  files into the README's speed table.

This module imports neither NumPy nor PyTorch at the top: the parent never loads them, and a
child has its thread settings in place before it does.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "RAYON_NUM_THREADS")
_limits: list = []  # the live threadpoolctl limiter (dropping it would undo the limits)


# ---- threads


def limit_threads(n: int, torch=None) -> None:
    """Pin every thread pool of this process to n threads: BLAS and OpenMP through
    threadpoolctl, and PyTorch's intra-op pool (inter-op work is not used by these benches)."""
    from threadpoolctl import threadpool_limits

    _limits.append(threadpool_limits(limits=n))
    if torch is not None:
        torch.set_num_threads(n)
    for var in THREAD_VARS:
        if os.environ.get(var) != str(n):
            print(f"warning: {var} is {os.environ.get(var)!r}, not {n}: run the bench "
                  "without --child-out so each thread count gets its own process")


def settle(seconds: float = 0.5) -> None:
    """Let the worker threads of the library timed last stop spinning before the next block."""
    time.sleep(seconds)


def thread_report(torch=None) -> list[dict]:
    """The thread pools as they are now (library, API, threads), to prove the limits held."""
    from threadpoolctl import threadpool_info

    pools = [{"library": p.get("internal_api"), "prefix": p.get("prefix"),
              "version": p.get("version"), "threads": p.get("num_threads")}
             for p in threadpool_info()]
    if torch is not None:
        pools.append({"library": "torch", "prefix": "intra-op", "version": torch.__version__,
                      "threads": torch.get_num_threads()})
    return pools


# ---- timing


@dataclass(frozen=True)
class Measure:
    """Several runs of one quantity, in `unit` ("s", "ms", "tokens/s")."""

    values: tuple[float, ...]
    unit: str = "s"

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def spread(self) -> dict[str, float]:
        """min, quartiles and max (quartiles equal the median when there are < 2 runs)."""
        v = sorted(self.values)
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else v * 3
        return {"min": v[0], "q1": q1, "q3": q3, "max": v[-1]}

    def in_ms(self) -> Measure:
        return Measure(tuple(1000 * s for s in self.values), "ms")

    def rate(self, count: float, unit: str = "tokens/s") -> Measure:
        """count things per second, run by run (so the spread is that of the rate)."""
        return Measure(tuple(count / s for s in self.values), unit)


def timed(fn: Callable, runs: int, warmup: int = 2, setup: Callable | None = None) -> Measure:
    """Seconds of `runs` calls of fn() after `warmup` untimed calls. With `setup`, each call is
    fn(setup()), setup not timed (e.g. a fresh tokenizer for a cold-cache run)."""
    times = []
    for i in range(warmup + runs):
        arg = (setup(),) if setup is not None else ()
        t0 = time.perf_counter()
        fn(*arg)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return Measure(tuple(times))


# ---- results


def fmt(x: float | None) -> str:
    """A measured value to about 3 significant digits, without exponents: 2,713 / 13.5 / 0.233."""
    if x is None:
        return "—"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3g}"


def target_met(target: str | None, value: float | None) -> bool | None:
    """Whether value satisfies a target written "<= 1.1x", ">= 0.9x", "< 10 s"."""
    m = re.fullmatch(r"\s*(<=|>=|<|>)\s*([0-9.]+)\s*\S*\s*", target or "")
    if m is None or value is None:
        return None
    bound = float(m.group(2))
    return {"<=": value <= bound, ">=": value >= bound,
            "<": value < bound, ">": value > bound}[m.group(1)]


def row(name: str, ours: Measure, ref: Measure | None = None, reference: str = "—",
        target: str | None = None, note: str = "", threads: int | None = None,
        paired_ratios: list[float] | None = None) -> dict:
    """One line of the results: our median, the reference's, ratio = ours / reference (for
    times lower is faster, for rates higher), the target on that ratio (or, without a
    reference, on our value), and both spreads. paired_ratios: the ratios of alternating
    rounds (each ours / reference of neighbouring blocks); the row's ratio is their median."""
    if ref is not None and ref.unit != ours.unit:
        raise ValueError(f"{name}: units differ ({ours.unit} vs {ref.unit})")
    ratio = ours.median / ref.median if ref is not None else None
    if paired_ratios:
        ratio = float(statistics.median(paired_ratios))
    out = {
        "name": name, "reference": reference,
        "value": ours.median, "reference_value": ref.median if ref is not None else None,
        "unit": ours.unit, "ratio": ratio,
        "better": "higher" if ours.unit.endswith("/s") else "lower",
        "target": target, "met": target_met(target, ratio if ref is not None else ours.median),
        "runs": len(ours.values),
        "spread": {"value": ours.spread(), "reference": ref.spread() if ref else None},
        "threads": threads if threads is not None else int(os.environ.get(THREAD_VARS[0], 0)),
        "note": note,
    }
    if paired_ratios:
        out["round_ratios"] = [float(r) for r in paired_ratios]
    shown = f"{fmt(out['value'])} {ours.unit}"
    if ref is not None:
        shown += f" vs {fmt(out['reference_value'])} {ref.unit}: {ratio:.2f}x"
    print(f"  {name}: {shown}" + (f" (target {target})" if target else "")
          + (f"; {note}" if note else ""), flush=True)
    return out


# ---- the machine


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numpy_blas() -> str:
    """NumPy's BLAS as its build reports it, e.g. "scipy-openblas 0.3.31 (Haswell, pthreads)"."""
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except (TypeError, KeyError, ValueError):
        name = "unknown BLAS"
    from threadpoolctl import threadpool_info

    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    pools.sort(key=lambda p: p.get("version") not in name)  # NumPy's own first
    if pools:
        return f"{name} ({pools[0].get('architecture')}, {pools[0].get('threading_layer')})"
    return name


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("numpy", "torch", "transformers", "tokenizers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def machine_info() -> dict[str, Any]:
    """Where figures came from: CPU, cores usable by this process, BLAS, library versions."""
    return {
        "cpu": cpu_model(),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "numpy_blas": numpy_blas(),
        "versions": library_versions(),
        "platform": platform.platform(terse=True),
    }


def busy_cpu_seconds() -> float | None:
    """CPU seconds all cores have spent busy since boot (/proc/stat), None where unknown."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


# ---- the same weights in both libraries


def write_dummy_tokenizer(folder: Path, vocab_size: int) -> None:
    """vocab.json + merges.txt with exactly `vocab_size` tokens (256 bytes, letter strings,
    <|endoftext|>), so tinygpt.load accepts the folder. The tokens themselves do not matter."""
    import itertools
    import string

    from tinygpt.tokenizer.bpe import bytes_to_unicode

    byte_str = bytes_to_unicode()
    encoder = {byte_str[b]: b for b in range(256)}
    merges = []
    letters = string.ascii_lowercase
    words = ("".join(w) for n in itertools.count(2) for w in itertools.product(letters, repeat=n))
    while len(encoder) < vocab_size - 1:
        word = next(words)  # every prefix of `word` is already a token
        merges.append(f"{word[:-1]} {word[-1]}")
        encoder[word] = len(encoder)
    encoder["<|endoftext|>"] = len(encoder)
    (folder / "vocab.json").write_text(json.dumps(encoder))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")


GPT2_FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt")  # `hf download`'s


def write_safetensors(path: Path, shapes: dict, rng, *, is_gain) -> None:
    """float32 tensors in a safetensors file, written one at a time (a 135M model never sits in
    memory twice): the norms' gains (`is_gain(name)`) 1, every other weight N(0, 0.02)."""
    import numpy as np

    header, offset = {}, 0
    for name, s in shapes.items():
        size = 4 * int(np.prod(s))
        header[name] = {"dtype": "F32", "shape": list(s), "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for name, s in shapes.items():
            values = np.ones(s) if is_gain(name) else 0.02 * rng.standard_normal(s)
            f.write(values.astype("<f4").tobytes())


def write_gpt2_folder(folder: Path, n_layer: int = 12, n_head: int = 12, n_embd: int = 768,
                      vocab_size: int = 50257, n_positions: int = 1024, seed: int = 0) -> Path:
    """A GPT-2 folder with exactly the files `hf download` fetches (GPT2_FILES), random float32
    weights in GPT-2's tensor names, written with NumPy alone (no PyTorch needed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    C = n_embd
    shapes = {"wte.weight": (vocab_size, C), "wpe.weight": (n_positions, C)}
    for i in range(n_layer):
        shapes.update({f"h.{i}.{name}": s for name, s in {
            "ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
            "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
            "ln_2.weight": (C,), "ln_2.bias": (C,), "mlp.c_fc.weight": (C, 4 * C),
            "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,),
        }.items()})
    shapes.update({"ln_f.weight": (C,), "ln_f.bias": (C,)})
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", shapes, rng,
                      is_gain=lambda name: name.endswith(("ln_1.weight", "ln_2.weight",
                                                          "ln_f.weight")))
    config = {"model_type": "gpt2", "vocab_size": vocab_size, "n_positions": n_positions,
              "n_embd": C, "n_head": n_head, "n_layer": n_layer,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
              "bos_token_id": vocab_size - 1, "eos_token_id": vocab_size - 1}
    (folder / "config.json").write_text(json.dumps(config))
    write_dummy_tokenizer(folder, vocab_size)
    return folder


def gpt2_pair(hf_config, folder: Path, seed: int = 0):
    """(transformers model, tinygpt model) with the same random weights: the first written
    with save_pretrained into `folder`, the second read back with tinygpt.load (memory-mapped:
    keep the folder while the model is in use)."""
    import torch
    import transformers

    from tinygpt import load

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(seed)
    hf = transformers.GPT2LMHeadModel(hf_config).eval()
    hf.save_pretrained(folder, safe_serialization=True)
    write_dummy_tokenizer(folder, hf_config.vocab_size)
    model, _ = load(folder)
    return hf, model


def attention_kind(hf) -> str:
    """Which attention code transformers runs ("sdpa": PyTorch's fused kernel, "eager")."""
    return getattr(hf.config, "_attn_implementation", None) or "default"


def shape(config) -> str:
    """A transformers GPT2Config or a tinygpt GPTConfig in words."""
    c = config.to_dict()
    return (f"{c.get('n_layer')} layers, {c.get('n_embd')} dims, {c.get('n_head')} heads, "
            f"vocab {c.get('vocab_size')}")


# ---- parent and child


def real_model(name: str = "smollm2") -> Path:
    """The real model `name` of `python -m tinygpt.models get` (tinygpt.models.fetch), in the
    user's cache folder the tests fetch it into ($XDG_CACHE_HOME/tinygpt/test-models, kept
    between runs); fetched by that command's code only when the file or its card is missing."""
    from tinygpt.models.fetch import MODELS, get

    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(cache) / "tinygpt" / "test-models"
    pin = MODELS[name]
    if not ((folder / pin.file_name).is_file() and (folder / pin.card_name).is_file()):
        get(name, folder)
    return folder / pin.file_name


def parser(doc: str, threads: str = "1,2", runs: int = 15, warmup: int = 2):
    """The arguments every bench takes; the bench adds its own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(doc.splitlines()[1:]))
    p.add_argument("--threads", default=threads,
                   help=f"thread counts, each in its own process (default {threads})")
    p.add_argument("--runs", type=int, default=runs, help=f"timed runs (default {runs})")
    p.add_argument("--warmup", type=int, default=warmup, help="untimed runs before")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR,
                   help="where <bench>.json goes (default bench/results)")
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    return p


def run(script: str, args: argparse.Namespace, measure: Callable[[argparse.Namespace], list],
        name: str | None = None):
    """The bench's main: as the parent, run each thread count in a child process and write
    the results file (<name>.json, by default the script's name); as a child (--child-out),
    measure and hand the rows back."""
    if args.child_out is not None:
        n = int(args.threads)
        print(f"[{n} thread{'s' * (n > 1)}] pid {os.getpid()}", flush=True)
        rows = measure(args)
        pools = thread_report(sys.modules.get("torch"))
        args.child_out.write_text(json.dumps({"rows": rows, "thread_pools": pools}))
        return
    counts = [int(t) for t in str(args.threads).split(",")]
    bench = Path(script).stem
    start = {"wall": time.perf_counter(), "busy": busy_cpu_seconds(),
             "ours": own_cpu_seconds(), "load": os.getloadavg()[0]}
    rows: list[dict] = []
    pools: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            out = Path(tmp) / f"{n}.json"
            cmd = [sys.executable, script, *sys.argv[1:], "--threads", str(n),
                   "--child-out", str(out)]
            env = os.environ | {var: str(n) for var in THREAD_VARS}
            subprocess.run(cmd, env=env, check=True)
            child = json.loads(out.read_text())
            rows += child["rows"]
            pools[str(n)] = child["thread_pools"]
    payload = {
        "bench": bench,
        "command": shlex.join(["python", f"bench/{bench}.py", *measuring_args(sys.argv[1:])]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_info(),
        "conditions": conditions(start),
        "thread_pools": pools,
        "rows": rows,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    path = args.results_dir / f"{name or bench}.json"
    path.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {path} ({len(rows)} rows, {payload['conditions']['seconds']:.0f} s); "
          "update docs/speed.md with python scripts/speed_table.py")


def measuring_args(argv: list[str]) -> list[str]:
    """The command-line arguments without --results-dir (where the figures went, not how)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--results-dir":
            skip = True
        elif not arg.startswith("--results-dir="):
            out.append(arg)
    return out


def conditions(start: dict) -> dict[str, float | None]:
    """How quiet the machine was: the load average before, and the cores that processes other
    than this bench kept busy on average while it ran (0 on a quiet machine)."""
    wall = time.perf_counter() - start["wall"]
    busy = busy_cpu_seconds()
    other = None
    if busy is not None and start["busy"] is not None:
        ours = own_cpu_seconds() - start["ours"]
        other = max(0.0, (busy - start["busy"] - ours) / wall)
    return {"seconds": wall, "load_before": start["load"], "other_cores_busy": other}
