"""Take the README's phone and projector screenshots from the running app, so they cannot drift.

    python scripts/screenshots.py              # writes docs/screenshots/devices/*.png
    python scripts/screenshots.py --out /tmp/x
    python scripts/screenshots.py --modern /tmp/models   # the modern parts on the real model

Starts `streamlit run app.py` on loopback with the shipped model and opens each page in Debian's
Chromium under Playwright (the browser tests' own helpers, tests/e2e/browser_support.py), at a
phone's 390×844 or a projector's 1280×720 (with ?projector=1). Each picture is one screen: the
page scrolled so that the part worth seeing (the lesson step, the first chart) is at the top.
A picture over MAX_BYTES is an error: the README should stay light.

With --modern FOLDER (a models folder holding SmolLM2-135M-Instruct.Q4_1.gguf, which
`python -m tinygpt.models get smollm2` fetches) it takes the README's screenshots of the modern
parts instead, on that real model: RMSNorm (Normalisation), rotary positions and grouped-query
heads (Attention), SwiGLU (Residual stream), each on a desktop (1440×900), a phone and a
projector, into docs/screenshots/modern_*.png.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
from tests.e2e.browser_support import chromium, streamlit_server, wait_idle  # noqa: E402

PHONE = {"width": 390, "height": 844}
PROJECTOR = {"width": 1280, "height": 720}
MAX_BYTES = 300_000
CHART = "[data-testid='stPlotlyChart']"
DESKTOP = {"width": 1440, "height": 900}
STEP = "[data-testid='stMain'] h2"  # the lesson's step heading
REAL_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the modern parts: (file stem, page, its tab to open or None, the heading scrolled to the top or
# None for the page's top)
ROPE, GQA = "Rotary positions", "Shared keys and values"  # the Attention page's tabs
NEURONS = "4 · Neurons"  # the Residual stream page's tab
MODERN = [
    ("modern_rmsnorm", "LayerNorm", None, None),
    ("modern_rmsnorm_vs_layernorm", "LayerNorm", None, "What LayerNorm would have done"),
    ("modern_rope_pair", "Attention", ROPE, "Rotary positions (RoPE)"),
    ("modern_rope_check", "Attention", ROPE, "Live check"),
    ("modern_rope_without", "Attention", ROPE, "What if: no RoPE"),
    ("modern_gqa", "Attention", GQA, "Grouped-query attention"),
    ("modern_swiglu", "Residual_stream", NEURONS, "SwiGLU: a gate"),
]
# (file, link, viewport, what to scroll to the top of the screen or None for the page's top)
SHOTS = [
    ("phone-lesson.png", "Lesson?lesson_step=1", PHONE, None),
    ("phone-attention.png", "Attention", PHONE, CHART),
    ("phone-softmax.png", "Softmax_and_sampling", PHONE, CHART),
    ("projector-lesson.png", "Lesson?lesson_step=8&projector=1", PROJECTOR, STEP),
    ("projector-attention.png", "Attention?projector=1", PROJECTOR, CHART),
]
# what the header bar hides at the top of the main block: keep the scrolled-to part below it
SCROLL_JS = """(selector) => {
    const main = document.querySelector("[data-testid='stMain']");
    const target = document.querySelector(selector);
    if (!main || !target) return false;
    const header = document.querySelector("[data-testid='stHeader']");
    const below = header ? header.getBoundingClientRect().height + 8 : 60;
    main.scrollTop += target.getBoundingClientRect().top - below;
    return true;
}"""
HEADING = "[data-testid='stMain'] :is(h1, h2, h3)"


def take(browser, url: str, out: Path) -> list[tuple[str, int]]:
    """Every shot of SHOTS from the app at `url`, into `out`; (file, bytes) of each."""
    written = []
    for name, link, viewport, scroll_to in SHOTS:
        page = browser.new_page(viewport=viewport)
        try:
            page.goto(f"{url}/{link}", timeout=60_000)
            wait_idle(page)
            if scroll_to and not page.evaluate(SCROLL_JS, scroll_to):
                raise SystemExit(f"{link}: nothing matches {scroll_to}")
            page.wait_for_timeout(300)
            path = out / name
            page.screenshot(path=str(path))
        finally:
            page.close()
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise SystemExit(f"{name} is {size:,} bytes, more than {MAX_BYTES:,}")
        written.append((name, size))
    return written


def modern_shots() -> list[tuple[str, str, dict, str | None, str | None]]:
    """MODERN on the three screens: (file, link, viewport, tab or None, heading or None)."""
    screens = [("desktop", "", DESKTOP), ("phone", "", PHONE),
               ("projector", "&projector=1", PROJECTOR)]
    return [(f"{stem}_{screen}.png", f"{page}?model={REAL_MODEL}{extra}", viewport, tab,
             heading) for stem, page, tab, heading in MODERN
            for screen, extra, viewport in screens]


def scroll_to_heading(page, text: str) -> None:
    """Scroll the main block so that the heading holding `text` is at the top."""
    heading = page.locator(HEADING, has_text=text).first
    heading.wait_for(timeout=60_000)
    heading.evaluate("e => e.setAttribute('data-shot', '1')")
    if not page.evaluate(SCROLL_JS, "[data-shot='1']"):
        raise SystemExit(f"no heading {text!r}")


def take_modern(browser, url: str, out: Path) -> list[tuple[str, int]]:
    """Every shot of modern_shots() from the app at `url` (a phone at twice its pixels)."""
    written = []
    for name, link, viewport, tab, heading in modern_shots():
        phone = viewport is PHONE
        page = browser.new_page(viewport=viewport, device_scale_factor=2 if phone else 1,
                                is_mobile=phone, has_touch=phone)
        try:
            page.goto(f"{url}/{link}", timeout=120_000)
            wait_idle(page, timeout=300_000)
            if tab:
                page.get_by_role("tab", name=tab).first.click()
                wait_idle(page, timeout=300_000)
            if heading:
                scroll_to_heading(page, heading)
            page.wait_for_timeout(500)
            page.screenshot(path=str(out / name))
        finally:
            page.close()
        written.append((name, (out / name).stat().st_size))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--modern", type=Path, metavar="MODELS_DIR",
                        help="the modern parts' screenshots, on the real model of this folder")
    args = parser.parse_args()
    shots = ROOT / "docs" / "screenshots"
    args.out = args.out or (shots if args.modern else shots / "devices")
    args.out.mkdir(parents=True, exist_ok=True)
    env = ({"TINYGPT_MODELS_DIR": str(args.modern.resolve()),
            "TINYGPT_DEFAULT_MODEL": REAL_MODEL} if args.modern else None)
    with streamlit_server(timeout=300, env=env) as url, chromium() as browser:
        for name, size in (take_modern if args.modern else take)(browser, url, args.out):
            print(f"{args.out / name}  {size:,} bytes")


if __name__ == "__main__":
    main()
