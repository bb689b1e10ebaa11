"""Every page of the app on a GPT-2-small-shaped model, as ratios to one plain forward pass.

A GPT-2 folder with random weights (12 layers, 12 heads, 768 dims, v = 50,257; exactly the
files `hf download` fetches) is served to AppTest in this process. For each page of
tinygpt_app.kit.navigation, timed in its own block: a new ~200-token prompt typed in the sidebar
(a cache miss: a new forward pass with trace), then each other click the page offers (the
position slider, the layer and head select boxes, the page's first radio and first slider).
The reference, timed in the same process right before each page's block (the load of a shared
machine drifts): one plain `model.forward` of the same prompt.

Targets (issue 14 section 1): a new prompt at most 2.5 forwards (the Decoding page at most 6),
any other click at most 0.5 forward. The Decoding page's "New tokens" slider is timed both
ways: fewer tokens than a run made before (read off that run: a click, at most 0.5) and 10
more (three new generations of that length: a generation, held to the page's 6).

    python bench/gpt2_pages.py                   # 3 runs of every click
    python bench/gpt2_pages.py --runs 2 --warmup 0 --pages Logits Residual_stream
"""

from __future__ import annotations

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
GPT2_SMALL = {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257,
              "n_positions": 1024}


def parse_args():
    p = common.parser(__doc__, threads="1", runs=3, warmup=1)
    p.add_argument("--tokens", type=int, default=200, help="prompt length (default 200)")
    p.add_argument("--pages", nargs="*", help="only pages whose URL path is listed")
    return p.parse_args()


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
        position.__doc__ = "position"
        out["position"] = position
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


def time_page(page: str, tokenizer, args, forward) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    from tinygpt_app.kit.navigation import url_path

    name = url_path(page)
    at = AppTest.from_file(str(common.ROOT / page), default_timeout=600)
    at.query_params["prompt"] = prompt_text(tokenizer, args.tokens, 1000)
    at.run()
    if at.exception:
        print(f"  {name}: exception {at.exception[0].value}", flush=True)
        return []
    def new_prompt():  # a prompt no page has seen in this process: a trace cache miss
        at.sidebar.text_area[0].input(prompt_text(tokenizer, args.tokens, next(TAKES))).run()

    target = DECODING_PROMPT_TARGET if name == "Decoding" else NEW_PROMPT_TARGET
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
    if at.exception:
        rows[-1]["note"] = f"exception: {at.exception[0].value}"[:300]
    return rows


def measure(args) -> list[dict]:
    import numpy as np

    common.limit_threads(int(args.threads))
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        folder = common.write_gpt2_folder(Path(tmp) / "gpt2", **GPT2_SMALL)
        os.environ["TINYGPT_MODELS_DIR"] = tmp
        os.environ["TINYGPT_DEFAULT_MODEL"] = "gpt2"
        from tinygpt import load
        from tinygpt_app.kit.navigation import PAGE_FILES, url_path

        model, tokenizer = load(folder)
        ids = np.array(tokenizer.encode(prompt_text(tokenizer, args.tokens, 999)))
        first = common.timed(lambda: model.forward(ids), max(args.runs, 3), 1)
        rows = [common.row(f"plain forward, GPT-2 small shape, {len(ids)} tokens", first)]
        forward = first
        for page in PAGE_FILES:
            if args.pages and url_path(page) not in args.pages:
                continue
            common.settle()
            # the reference again right before each page: a shared machine's load drifts
            forward = common.timed(lambda: model.forward(ids), max(args.runs, 3), 1)
            rows += time_page(page, tokenizer, args, forward)
        common.settle()
        after = common.timed(lambda: model.forward(ids), max(args.runs, 3), 1)
        rows.append(common.row("plain forward again, after the pages", after, first,
                               "the same forward before the pages",
                               note="near 1.0x when the machine stayed as busy"))
    return rows


if __name__ == "__main__":
    common.run(__file__, parse_args(), measure)
