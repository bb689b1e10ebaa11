"""Speed on a modern shape: tinygpt beside PyTorch / transformers on a SmolLM2-135M-shaped
random Llama model (30 layers, 576 wide, 9 query heads on 3 key/value heads, vocabulary 49,152,
SwiGLU 1536, RMSNorm, rotary positions with theta 100,000, tied output).

What, at each thread count:
  1. tinygpt.load of the folder (config.json, model.safetensors, tokenizer.json);
  2. one forward of T tokens for each T of --tokens (default 64 and 512), tinygpt vs PyTorch
     (transformers' LlamaForCausalLM) on the same weights; then, in the same processes, the
     forward's 211 matrix products alone (each weight times T rows: NumPy's BLAS against
     PyTorch's), what the BLAS library alone makes of the ratio;
  3. greedy decoding of --new-tokens tokens after an 8-token prompt, tinygpt's generate (KV
     cache) vs transformers' generate;
  4. the peak memory (resident set) of a fresh process that loads the folder with tinygpt,
     runs one forward at the longest T and the greedy decoding: tinygpt alone, no PyTorch.
How: the random reference is written with save_pretrained (float32) and read back with
tinygpt.load, so both libraries run the same weights (the largest logit difference is
reported). Each thread count runs in its own process; each library is timed in its own block:
warm-up, then --runs runs, median and spread. The forward goes by --rounds alternating rounds,
each library in a process of its own per round (one that ran PyTorch slows NumPy's next
products); its ratio is the median of the rounds' ratios: this VM's speed drifts by up to 30%
between blocks, and neighbouring blocks see the same conditions.
Results: bench/results/modern_speed.json (then python scripts/speed_table.py). Targets (issue
31), at 1 and 2 threads: forward at most 1.1x PyTorch's time; greedy at least transformers'
tokens/s; load under 10 s.

    python bench/modern_speed.py                              # 1 and 2 threads, 5 runs
    python bench/modern_speed.py --threads 1 --runs 2 --tokens 16 --new-tokens 8 \
        --results-dir /tmp/smoke
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from bench import common  # noqa: E402
from tinygpt import load  # noqa: E402
from tinygpt.decoding.generation import generate  # noqa: E402

SMOLLM2_135M = dict(
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
    rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
    bos_token_id=0, eos_token_id=0, pad_token_id=0,
)  # fmt: skip
PROMPT_LENGTH = 8
SHAPE = "SmolLM2-135M shape"


def parse_args():
    p = common.parser(__doc__, runs=5, warmup=1)
    p.add_argument("--tokens", type=int, nargs="+", default=[64, 512],
                   help="sequence lengths T of the forward (default 64 512)")
    p.add_argument("--new-tokens", type=int, default=64, help="greedy tokens (default 64)")
    p.add_argument("--rounds", type=int, default=10,
                   help="forward: alternating rounds, each library in its own process per "
                        "round (default 10)")
    return p.parse_args()


def write_tokenizer_json(folder: Path, vocab_size: int) -> None:
    """tokenizer.json with exactly vocab_size tokens (the dummy byte-level BPE of
    common.write_dummy_tokenizer, converted by the tokenizers library): tinygpt.load needs one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    common.write_dummy_tokenizer(folder, vocab_size)
    tok = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(str(folder / "tokenizer.json"))
    for name in ("vocab.json", "merges.txt"):
        (folder / name).unlink()


def llama_pair(folder: Path, seed: int = 0):
    """(transformers model, tinygpt model) with the same random weights."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMOLLM2_135M)).eval()
    hf.save_pretrained(folder, safe_serialization=True)
    write_tokenizer_json(folder, SMOLLM2_135M["vocab_size"])
    return hf, load(folder)[0]


# One library per process: a process that has run the other library keeps its threads and
# memory (PyTorch's OpenMP pool beside NumPy's BLAS; measured here: tinygpt's 2-thread T=512
# forward 8-10% slower after PyTorch's in the same process). Neither imports the other.
FORWARD_CHILD = {
    "tinygpt": """
import numpy as np
from tinygpt import load
model = load(folder)[0]
def forward_of(ids):
    return lambda: model.forward(ids)
weights = [w for b in model.blocks for w in (b.attn.W_q, b.attn.W_k, b.attn.W_v, b.attn.W_proj,
                                             b.ffn.W_gate, b.ffn.W_up, b.ffn.W_down)]
weights.append(model.output.W_out)  # (C_in, C_out) each, as functional.linear multiplies
def products_of(T):
    x = {n: np.random.default_rng(n).standard_normal((T, n)).astype(np.float32)
         for n in {w.shape[0] for w in weights}}
    return lambda: [x[w.shape[0]] @ w for w in weights]
""",
    "torch": """
import numpy as np, torch, transformers
transformers.logging.set_verbosity_error()
torch.set_num_threads(threads)
hf = transformers.LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
def forward_of(ids):
    ids_t = torch.from_numpy(ids[None])
    def run():
        with torch.no_grad():
            return hf(ids_t).logits
    return run
weights = [m.weight for layer in hf.model.layers for m in (
    layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
    layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)]
weights.append(hf.lm_head.weight)  # (C_out, C_in) each, as nn.Linear multiplies
def products_of(T):
    x = {n: torch.from_numpy(np.random.default_rng(n).standard_normal((T, n)).astype(np.float32))
         for n in {w.shape[1] for w in weights}}
    def run():
        with torch.no_grad():
            return [torch.nn.functional.linear(x[w.shape[1]], w) for w in weights]
    return run
""",
}
# Each block: the forward at every T, then the forward's matrix products alone (the weights'
# products at T rows, nothing else: what the BLAS library contributes to the forward's time).
FORWARD_TIMING = """
import json, sys, time
from threadpoolctl import threadpool_limits
folder, threads, runs, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
lengths = [int(t) for t in sys.argv[5:]]
threadpool_limits(limits=threads)
{load}
def seconds_of(make):
    got = {{}}
    for T in lengths:
        run = make(T)
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            run()
            if i >= warmup:
                got.setdefault(T, []).append(time.perf_counter() - t0)
    return got
forwards = seconds_of(lambda T: forward_of(np.random.default_rng(T).integers(0, {vocab}, T)))
print(json.dumps({{"forward": forwards, "products": seconds_of(products_of)}}))
"""


def forward_seconds(library: str, folder: Path, args) -> dict[str, dict[int, list[float]]]:
    """{"forward": seconds of each forward (warm-up dropped) at each T, "products": of the
    forward's matrix products alone}, in a process of `library` alone."""
    code = FORWARD_TIMING.format(load=FORWARD_CHILD[library], vocab=SMOLLM2_135M["vocab_size"])
    done = subprocess.run([sys.executable, "-c", code, str(folder), str(args.threads),
                           str(args.runs), str(args.warmup), *map(str, args.tokens)],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    got = json.loads(done.stdout.splitlines()[-1])
    return {part: {int(T): times for T, times in by_T.items()} for part, by_T in got.items()}


def time_forwards(hf, model, folder: Path, args, torch) -> list[dict]:
    """PyTorch and tinygpt in alternating rounds, each library in a process of its own per
    round (PyTorch first in even rounds, tinygpt first in odd ones). A round's ratio compares
    two neighbouring blocks; the row's ratio is the median of the rounds' ratios, so that a
    machine whose speed drifts between blocks (30% here) moves both sides of each ratio.
    Rows: the forward at each T, then its matrix products alone at each T."""
    parts = ("forward", "products")
    seconds = {(lib, part, T): [] for lib in ("tinygpt", "torch") for part in parts
               for T in args.tokens}
    ratios = {(part, T): [] for part in parts for T in args.tokens}
    for r in range(args.rounds):
        order = ("torch", "tinygpt") if r % 2 == 0 else ("tinygpt", "torch")
        got = {library: forward_seconds(library, folder, args) for library in order}
        for part in parts:
            for T in args.tokens:
                ours, theirs = got["tinygpt"][part][T], got["torch"][part][T]
                seconds["tinygpt", part, T] += ours
                seconds["torch", part, T] += theirs
                ratios[part, T].append(float(np.median(ours) / np.median(theirs)))
    reference = (f"PyTorch (transformers LlamaForCausalLM, {common.attention_kind(hf)} "
                 "attention), same weights")
    how = f"{args.rounds} rounds of {args.runs} runs, each library in its own process"
    rows = []
    for part in parts:
        for T in args.tokens:
            name, ref, target, note = f"forward, {SHAPE}, T={T}", reference, "<= 1.1x", how
            if part == "forward":
                note += f"; max |logits difference| {logits_difference(hf, model, T, torch):.1e}"
            else:
                name = f"the forward's {len(model.blocks) * 7 + 1} matrix products alone, T={T}"
                ref, target = "torch.nn.functional.linear (PyTorch's BLAS), same weights", None
                note += "; NumPy's BLAS against PyTorch's: no target, it bounds the forward's"
            rows.append(common.row(
                name, common.Measure(tuple(seconds["tinygpt", part, T])).in_ms(),
                common.Measure(tuple(seconds["torch", part, T])).in_ms(), ref, target,
                paired_ratios=ratios[part, T], note=note))
    return rows


def logits_difference(hf, model, T: int, torch) -> float:
    """The largest |logit difference| of one forward of T tokens, tinygpt against PyTorch."""
    ids = np.random.default_rng(T).integers(0, model.config.vocab_size, T)
    with torch.no_grad():
        theirs = hf(torch.from_numpy(ids[None])).logits[0].numpy()
    return float(np.abs(model.forward(ids) - theirs).max())


def time_greedy(hf, model, args, torch) -> dict:
    """transformers' generate, then tinygpt's: separate blocks, the same new-token count."""
    prompt = np.arange(PROMPT_LENGTH) * 1000
    n_new = args.new_tokens
    ids = torch.tensor(prompt[None, :])
    last = {}

    def theirs():
        with torch.no_grad():
            out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                              max_new_tokens=n_new, min_new_tokens=n_new, pad_token_id=0)
        last["theirs"] = out[0, PROMPT_LENGTH:].tolist()

    def ours():
        last["ours"] = generate(model, prompt, n_new, record_steps=False).tokens

    their_s = common.timed(theirs, args.runs, args.warmup)
    common.settle()
    our_s = common.timed(ours, args.runs, args.warmup)
    common.settle()
    same = np.mean(np.asarray(last["ours"]) == np.asarray(last["theirs"]))
    return common.row(f"greedy {n_new} tokens, {SHAPE}", our_s.rate(n_new),
                      their_s.rate(n_new), "transformers generate, same weights", ">= 1.0x",
                      note=f"same token at {same:.0%} of positions")


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent (here the bench
# process, PyTorch and both models in it), while VmHWM is this process's own high-water mark.
PEAK_CHILD = """
import sys, numpy as np
from threadpoolctl import threadpool_limits
from tinygpt import load
from tinygpt.decoding.generation import generate
folder, T, n_new, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with threadpool_limits(limits=threads):
    model = load(folder)[0]
    model.forward(np.arange(T) % model.config.vocab_size)
    generate(model, np.arange(8) * 1000, n_new, record_steps=False)
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(int(status["VmHWM"].split()[0]) / 1024)  # kB -> MB
"""


def peak_memory(folder: Path, args) -> dict:
    """Peak RSS of a fresh process: tinygpt.load, one forward at the longest T, greedy."""
    done = subprocess.run([sys.executable, "-c", PEAK_CHILD, str(folder), str(max(args.tokens)),
                           str(args.new_tokens), str(args.threads)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    mb = float(done.stdout.split()[-1])
    return common.row(f"peak memory (RSS) of a process: load, forward T={max(args.tokens)}, "
                      f"greedy {args.new_tokens}, {SHAPE}", common.Measure((mb,), "MB"),
                      note="tinygpt alone (no PyTorch); weights copied at load into own rows")


def measure(args) -> list[dict]:
    import torch

    common.limit_threads(int(args.threads), torch)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        hf, model = llama_pair(folder)
        print(f"{SHAPE}: {model.num_parameters() / 1e6:.0f}M parameters, "
              f"{json.dumps(SMOLLM2_135M)}", flush=True)
        loading = common.timed(lambda: load(folder), runs=3, warmup=1)
        rows = [common.row(f"tinygpt.load, {SHAPE}", loading, target="< 10 s",
                           note="model.safetensors (weights copied into (in, out) rows of "
                                "their own) and the 49,152-token tokenizer.json")]
        rows += time_forwards(hf, model, folder, args, torch)
        rows.append(time_greedy(hf, model, args, torch))
        rows.append(peak_memory(folder, args))
    return rows


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
