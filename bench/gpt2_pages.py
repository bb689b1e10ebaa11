"""Every page of the app on a GPT-2-small-shaped model and on a SmolLM2-135M-shaped one, as
ratios to one plain forward pass.

A GPT-2 folder with random weights (12 layers, 12 heads, 768 dims, v = 50,257; exactly the
files `hf download` fetches), and a Llama folder of SmolLM2-135M's shape (30 layers, 576 dims,
9 query heads on 3 key/value heads, SwiGLU 1,536 wide, v = 49,152, tied; config.json,
model.safetensors and a tokenizer.json), each served to AppTest in its own process. For each
page of tinygpt_app.kit.navigation, timed in its own block: a new ~200-token prompt typed in the
sidebar (a cache miss: a new forward pass with trace), then each other click the page offers
(the position slider by a few places and far away, to positions no view has computed yet;
to positions 3, 9 and 40 right after a new prompt; the layer and head select boxes, the page's
first radio and first slider). The reference, timed
in the same process right before each page's block (the load of a shared machine drifts): one
plain `model.forward` of the same prompt. The last row of each shape: the process's peak
memory (target under 2.5 GB).

Targets (issue 14 section 1): a new prompt at most 2.5 forwards (the Decoding page at most 6),
any other click at most 0.5 forward. The Decoding page's "New tokens" slider is timed both
ways: fewer tokens than a run made before (read off that run: a click, at most 0.5) and 10
more (three new generations of that length: a generation, held to the page's 6).

    python bench/gpt2_pages.py                   # 3 runs of every click, both shapes
    python bench/gpt2_pages.py --runs 2 --warmup 0 --pages Logits Residual_stream
    python bench/gpt2_pages.py --shapes smollm2-135m
    python bench/gpt2_pages.py --shapes smollm2-real --runs 2   # the real SmolLM2 GGUF

`smollm2-real` is not a shape but the real SmolLM2-135M-Instruct GGUF of `python -m
tinygpt.models get smollm2` (bench.common.real_model: from the user's cache folder, fetched
there once), served as the app serves it; its figures go to bench/results/gpt2_pages_real.json,
beside the random shapes' gpt2_pages.json.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere

from bench import common  # noqa: E402

NEW_PROMPT_TARGET = "<= 2.5x"
DECODING_PROMPT_TARGET = "<= 6x"
CLICK_TARGET = "<= 0.5x"
TAKES = iter(range(10_000))  # every new prompt of the run differs from all earlier ones
PEAK_MEMORY_TARGET = "< 2.5 GB"
GPT2_SMALL = {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257,
              "n_positions": 1024}
SMOLLM2_135M = {"num_hidden_layers": 30, "hidden_size": 576, "num_attention_heads": 9,
                "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152,
                "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
                "tie_word_embeddings": True}
SHAPES = ("gpt2-small", "smollm2-135m")
REAL = "smollm2-real"  # the real file (bench.common.real_model), on request only
FAR = (40, 100, 140, 70, 120, 20, 160)  # far moves: each lands on positions not computed yet
# the moves of issue 49: from the last position of a prompt just typed to one near its start,
# one a little further and one far from both ends (each run types a new prompt first, untimed)
LANDINGS = (3, 9, 40)


def parse_args():
    p = common.parser(__doc__, threads="1", runs=3, warmup=1)
    p.add_argument("--tokens", type=int, default=200, help="prompt length (default 200)")
    p.add_argument("--pages", nargs="*", help="only pages whose URL path is listed")
    p.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=(*SHAPES, REAL),
                   help=f"model shapes to time (default both random shapes; {REAL}: the real "
                   "SmolLM2 GGUF, written to gpt2_pages_real.json)")
    return p.parse_args()


def write_tokenizer_json(folder: Path, vocab_size: int) -> None:
    """A byte-level BPE tokenizer.json with exactly `vocab_size` tokens: the dummy GPT-2
    vocabulary of bench.common (bytes, letter strings, <|endoftext|>) in the library's layout."""
    import json

    common.write_dummy_tokenizer(folder, vocab_size)  # vocab.json + merges.txt, read back here
    vocab = json.loads((folder / "vocab.json").read_text())
    merges = (folder / "merges.txt").read_text().splitlines()[1:]
    (folder / "vocab.json").unlink()
    (folder / "merges.txt").unlink()
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    (folder / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "normalizer": None,
        "added_tokens": [{"id": vocab_size - 1, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}],
        "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [m for m in merges if m]}}))


def write_llama_folder(folder: Path, config: dict, seed: int = 0) -> Path:
    """A Llama folder (config.json, model.safetensors, tokenizer.json) with random float32
    weights in Llama's tensor names, written with NumPy alone, tied (no lm_head)."""
    import json

    import numpy as np

    rng = np.random.default_rng(seed)
    C, inner, V = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * C // config["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": (V, C)}
    for i in range(config["num_hidden_layers"]):
        shapes.update({f"model.layers.{i}.{name}": s for name, s in {
            "input_layernorm.weight": (C,), "self_attn.q_proj.weight": (C, C),
            "self_attn.k_proj.weight": (kv, C), "self_attn.v_proj.weight": (kv, C),
            "self_attn.o_proj.weight": (C, C), "post_attention_layernorm.weight": (C,),
            "mlp.gate_proj.weight": (inner, C), "mlp.up_proj.weight": (inner, C),
            "mlp.down_proj.weight": (C, inner)}.items()})
    shapes["model.norm.weight"] = (C,)
    folder.mkdir(parents=True, exist_ok=True)
    common.write_safetensors(folder / "model.safetensors", shapes, rng,
                             is_gain=lambda name: name.endswith("norm.weight"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_act": "silu",
        **config, "rope_scaling": None, "torch_dtype": "float32",
        "bos_token_id": V - 1, "eos_token_id": V - 1}))
    write_tokenizer_json(folder, V)
    return folder


def prompt_text(tokenizer, n_tokens: int, take: int) -> str:
    """Words of letters (the dummy tokenizer's merges) until the prompt has n_tokens tokens;
    `take` changes its first word, so every take is new to the trace cache."""
    import numpy as np

    rng = np.random.default_rng(take)
    words = [f"take{take}"]
    while len(tokenizer.encode(" ".join(words))) < n_tokens:
        words.append("".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), rng.integers(2, 7))))
    return " ".join(words)


def new_tokens_clicks(at) -> dict[str, callable]:
    """The Decoding page's "New tokens" both ways: i-th click 10 + i more than the default (a
    count not made yet), then fewer than the longest made (read off it)."""
    default = at.slider(key="decoding.new").value

    def more(i):
        return at.slider(key="decoding.new").set_value(default + 10 + i)

    def fewer(i):
        return at.slider(key="decoding.new").set_value(max(1, default // 2 - i))

    return {"control 'New tokens', 10 more": more, "control 'New tokens', fewer": fewer}


def clicks(at) -> dict[str, callable]:
    """name -> fn(i) that sets the i-th value of one control of the page (not yet run)."""
    out = {}
    if at.sidebar.select_slider:
        def position(i):
            s = at.sidebar.select_slider[0]
            n = len(s.options)  # the options are positions 0..n-1, shown as labels
            return s.set_value(n - 1 - (7 * (i + 1)) % n)

        def far(i):  # from wherever it is to a place no view of the page has computed yet
            s = at.sidebar.select_slider[0]
            return s.set_value(FAR[i % len(FAR)] % len(s.options))
        out["position"] = position
        out["position, far"] = far
    for name, labels in (("layer", ("Layer", "Block")), ("head", ("Head",))):
        if any(b.label in labels for b in at.main.selectbox):
            def pick(i, labels=labels):
                box = next(b for b in at.main.selectbox if b.label in labels)
                return box.select_index((i + 1) % len(box.options))
            out[name] = pick
    if at.main.radio and at.main.radio[0].value in at.main.radio[0].options:  # plain labels
        def radio(i):
            r = at.main.radio[0]
            return r.set_value(r.options[(i + 1) % len(r.options)])
        out[f"control '{at.main.radio[0].label}'"] = radio
    if any(s.key == "decoding.new" for s in at.main.slider):
        out.update(new_tokens_clicks(at))
    elif at.main.slider:
        def slider(i):
            s = at.main.slider[0]
            if isinstance(s.value, tuple):
                return s.set_value((s.min, s.min + (i % 2) + 1))
            return s.set_value(s.max if i % 2 == 0 else s.min)
        out[f"control '{at.main.slider[0].label}'"] = slider
    return out


def time_page(page: str, tokenizer, args, forward, shape: str) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    from tinygpt_app.kit.navigation import url_path

    name = f"{shape}: {url_path(page)}"
    at = AppTest.from_file(str(common.ROOT / page), default_timeout=600)
    at.query_params["prompt"] = prompt_text(tokenizer, args.tokens, 1000)
    at.run()
    if at.exception:
        print(f"  {name}: exception {at.exception[0].value}", flush=True)
        return []
    def new_prompt():  # a prompt no page has seen in this process: a trace cache miss
        at.sidebar.text_area[0].input(prompt_text(tokenizer, args.tokens, next(TAKES))).run()

    target = DECODING_PROMPT_TARGET if url_path(page) == "Decoding" else NEW_PROMPT_TARGET
    rows = [common.row(f"{name}: new prompt", common.timed(new_prompt, args.runs, args.warmup),
                       forward, "one plain forward of the prompt", target)]
    for click_name, set_value in clicks(at).items():
        click_target = DECODING_PROMPT_TARGET if click_name.endswith("more") else CLICK_TARGET
        def click(set_value=set_value, counter=[0]):  # noqa: B006 (the click's own count)
            counter[0] += 1
            set_value(counter[0]).run()

        m = common.timed(click, args.runs, args.warmup)
        rows.append(common.row(f"{name}: {click_name}", m, forward,
                               "one plain forward of the prompt", click_target))
    rows += landings(at, new_prompt, name, args, forward)
    if at.exception:
        rows[-1]["note"] = f"exception: {at.exception[0].value}"[:300]
    return rows


def landings(at, new_prompt, name: str, args, forward) -> list[dict]:
    """The position moved to each of LANDINGS right after a new prompt (typed untimed before
    each run, so each run lands where no view of the page has computed anything yet: the
    first move on a new prompt also pays what a page keeps per prompt)."""
    if not at.sidebar.select_slider:
        return []
    rows = []
    for landing in LANDINGS:
        def land(_, landing=landing):
            s = at.sidebar.select_slider[0]
            s.set_value(min(landing, len(s.options) - 1)).run()

        m = common.timed(land, args.runs, args.warmup, setup=new_prompt)
        rows.append(common.row(f"{name}: position {landing} after a new prompt", m, forward,
                               "one plain forward of the prompt", CLICK_TARGET))
    return rows


def write_model(shape: str, tmp: str) -> Path:
    """The model's path: a random folder of the shape written into tmp, or the real file."""
    if shape == REAL:
        return common.real_model("smollm2")
    if shape == "gpt2-small":
        return common.write_gpt2_folder(Path(tmp) / shape, **GPT2_SMALL)
    return write_llama_folder(Path(tmp) / shape, SMOLLM2_135M)


def measure(args) -> list[dict]:
    """Each shape in a process of its own (its peak memory is its own): the first here, the
    others in children."""
    if len(args.shapes) > 1:
        import subprocess

        rows = []
        for shape in args.shapes:
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "rows.json"
                cmd = [sys.executable, __file__, *sys.argv[1:], "--shapes", shape,
                       "--child-out", str(out)]
                subprocess.run(cmd, check=True)
                rows += json.loads(out.read_text())["rows"]
        return rows
    return measure_shape(args, args.shapes[0])


def measure_shape(args, shape: str) -> list[dict]:
    import resource

    import numpy as np

    common.limit_threads(int(args.threads))
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_model(shape, tmp)
        os.environ["TINYGPT_MODELS_DIR"] = str(folder.parent)
        os.environ["TINYGPT_DEFAULT_MODEL"] = folder.name
        from tinygpt import load
        from tinygpt_app.kit.navigation import PAGE_FILES, url_path

        model, tokenizer = load(folder)
        ids = np.array(tokenizer.encode(prompt_text(tokenizer, args.tokens, 999)))
        first = common.timed(lambda: model.forward(ids), max(args.runs, 3), 1)
        rows = [common.row(f"{shape}: plain forward, {len(ids)} tokens", first)]
        forward = first
        for page in PAGE_FILES:
            if args.pages and url_path(page) not in args.pages:
                continue
            common.settle()
            # the reference again right before each page: a shared machine's load drifts
            forward = common.timed(lambda: model.forward(ids), max(args.runs, 3), 1)
            rows += time_page(page, tokenizer, args, forward, shape)
        common.settle()
        after = common.timed(lambda: model.forward(ids), max(args.runs, 3), 1)
        rows.append(common.row(f"{shape}: plain forward again, after the pages", after, first,
                               "the same forward before the pages",
                               note="near 1.0x when the machine stayed as busy"))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KB -> GB
        rows.append(common.row(f"{shape}: peak memory of the process", common.Measure(
            (peak,), "GB"), target=PEAK_MEMORY_TARGET, note="ru_maxrss, every page run"))
    return rows


if __name__ == "__main__":
    arguments = parse_args()
    common.run(__file__, arguments, measure,
               name="gpt2_pages_real" if REAL in arguments.shapes else None)
