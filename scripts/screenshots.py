"""Take the README's phone and projector screenshots from the running app, so they cannot drift.

    python scripts/screenshots.py              # writes docs/screenshots/devices/*.png
    python scripts/screenshots.py --out /tmp/x

Starts `streamlit run app.py` on loopback with the shipped model and opens each page in Debian's
Chromium under Playwright (the browser tests' own helpers, tests/e2e/browser_support.py), at a
phone's 390×844 or a projector's 1280×720 (with ?projector=1). Each picture is one screen: the
page scrolled so that the part worth seeing (the lesson step, the first chart) is at the top.
A picture over MAX_BYTES is an error: the README should stay light.
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
STEP = "[data-testid='stMain'] h2"  # the lesson's step heading
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots" / "devices")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with streamlit_server() as url, chromium() as browser:
        for name, size in take(browser, url, args.out):
            print(f"{args.out / name}  {size:,} bytes")


if __name__ == "__main__":
    main()
