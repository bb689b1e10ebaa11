"""Accessibility, keyboard and phone checks in a real browser (issue 17).

One `streamlit run` and one Chromium serve the whole module. Each page is visited once, on a
fresh tab of one browser context (so Plotly's code is loaded from the cache after the first page):

1. at a projector's 1280×720, axe-core runs in three states: as the link opens it, after a prompt
   is typed in the sidebar, and after a control is moved (the position slider, or the page's own
   first slider on a page without it); screenshots of the last state, first screen and full length;
2. the same tab is narrowed to a phone's 390×844 (Streamlit collapses the sidebar, as on a phone
   that opens the link): nothing may stick out sideways; screenshots again.

The numbers go to tests/e2e/.out/axe.json (not tracked); docs/accessibility.md reads them.
Screenshots go to screenshots/devices/ (not tracked), or $TINYGPT_SCREENSHOTS/devices/.

axe-core is the vendored copy in tests/e2e/vendor/axe-core/ (see its README for why a copy),
checked against its digest before use: nothing is fetched at run time. No part of the page is
excluded from the scan. Every check here is a hard test (issue 17's fixes landed: no page has a
serious or critical violation, none scrolls sideways on a phone, focus is visible).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from tests.e2e.browser_support import (
    SHOTS,
    assert_no_error,
    commit_prompt,
    page_name,
    page_paths,
    skip_without_a_browser,
    url_param,
    wait_for_param,
    wait_idle,
)

pytestmark = pytest.mark.browser

skip_without_a_browser()

AXE_JS = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
OUT = Path(__file__).resolve().parent / ".out"
DEVICE_SHOTS = SHOTS / "devices"

PROJECTOR = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}
FULL_HEIGHT_CAP = 12_000  # px: a full-length view is the page's height, at most this
BLOCKING = ("critical", "serious")  # the impacts issue 17 allows none of
IMPACTS = ("critical", "serious", "moderate", "minor")
EXAMPLES = 12  # elements kept per violated rule in the report
SIDEBAR_SLIDER = "[data-testid='stSidebar'] [data-testid='stSlider'] input[type='range']"
MAIN_SLIDER = "[data-testid='stMain'] [data-testid='stSlider'] input[type='range']"
KEYBOARD_PAGE = "Softmax_and_sampling"
MAX_TABS = 60  # Tab presses allowed to reach one control on the keyboard walk


def pages_to_check() -> list[str]:
    """The pages this module checks: every page of the app (one source: browser_support)."""
    return page_paths()


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def axe_source() -> str:
    source = AXE_JS.read_bytes()
    assert hashlib.sha256(source).hexdigest() == AXE_SHA256, (
        f"{AXE_JS} is not axe-core {AXE_VERSION}'s axe.min.js (see the README beside it)")
    return source.decode()


@pytest.fixture(scope="module")
def context(browser):
    """One context: every tab shares the HTTP cache."""
    ctx = browser.new_context(viewport=PROJECTOR)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def visits(server, context, axe_source):
    """visit(path): the page's findings, measured on the first call and kept for the module."""
    done: dict[str, dict | BaseException] = {}

    def visit(path: str) -> dict:
        if path not in done:
            try:
                done[path] = visit_page(context, server, path, axe_source)
            except Exception as exc:  # kept, so the second test of the page fails at once too
                done[path] = exc
            write_report({k: v for k, v in done.items() if isinstance(v, dict)})
        found = done[path]
        if isinstance(found, BaseException):
            raise found
        return found

    return visit


# ----------------------------------------------------------------------------- one visit


def visit_page(context, server: str, path: str, axe_source: str) -> dict:
    name = page_name(path)
    started = time.monotonic()
    axe_seconds = 0.0

    def axe(**kwargs) -> dict:
        nonlocal axe_seconds
        t = time.monotonic()
        rules = run_axe(page, axe_source, **kwargs)
        axe_seconds += time.monotonic() - t
        return rules

    page = context.new_page()
    try:
        page.goto(f"{server}/{path}", timeout=60_000)
        wait_idle(page)
        assert_no_error(page, f"/{path}")
        states = {"default": axe()}
        if page.locator("[data-testid='stSidebar'] textarea").count():
            commit_prompt(page)
            assert_no_error(page, f"/{path} after typing")
            states["prompt"] = axe()
        control = move_a_control(page)
        if control:
            assert_no_error(page, f"/{path} after moving {control}")
            states["control"] = axe(full_shot=f"{name}-projector-full")
        else:
            full_length(page, screenshot=f"{name}-projector-full")
        screenshot(page, f"{name}-projector")
        page.set_viewport_size(PHONE)
        page.wait_for_timeout(500)  # the sidebar collapses and the charts redraw at the new width
        wait_idle(page)
        phone = sideways_overflow(page)
        screenshot(page, f"{name}-phone")
        full_length(page, screenshot=f"{name}-phone-full")
        seconds = {"visit": round(time.monotonic() - started, 1), "axe": round(axe_seconds, 1)}
        return {"page": name, "control": control, "axe": states, "phone": phone,
                "seconds": seconds}
    finally:
        page.close()


def move_a_control(page) -> str | None:
    """One step left on the position slider (or the page's first slider); what was moved."""
    for selector, what in ((SIDEBAR_SLIDER, "the position slider"),
                           (MAIN_SLIDER, "the page's first slider")):
        slider = page.locator(selector)
        if slider.count():
            before = slider.first.input_value()
            slider.first.focus()
            slider.first.press("ArrowLeft")
            page.wait_for_function("([s, v]) => document.querySelector(s).value !== v",
                                   arg=[selector, before], timeout=30_000)
            wait_idle(page)
            return what
    return None


# ----------------------------------------------------------------------------- axe


def run_axe(page, axe_source: str, full_shot: str | None = None) -> dict:
    """axe-core's violations for the whole page, by rule.

    The app scrolls inside its main block, so axe would leave what is below the first screen
    unchecked ("incomplete" colour contrast): the viewport is made as tall as the page first.
    """
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=axe_source)
        assert page.evaluate("() => axe.version") == AXE_VERSION
    with_full_length = full_length(page, screenshot=full_shot, then=lambda: page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"))
    rules = {}
    for v in with_full_length:
        rules[v["id"]] = {
            "impact": v["impact"], "help": v["help"], "nodes": len(v["nodes"]),
            "examples": [{"target": " ".join(map(str, n["target"])), "html": n["html"][:200],
                          "why": " ".join((n.get("failureSummary") or "").split())[:240]}
                         for n in v["nodes"][:EXAMPLES]],
        }
    return rules


def full_length(page, screenshot: str | None = None, then=None):
    """Make the viewport as tall as the page (same width), do `then` and/or take a screenshot,
    and put the viewport back."""
    size = page.viewport_size
    height = page.evaluate("""() => {
        const main = document.querySelector("[data-testid='stMain']");
        return Math.max(main ? main.scrollHeight : 0, document.documentElement.scrollHeight);
    }""")
    page.set_viewport_size({"width": size["width"], "height": min(height, FULL_HEIGHT_CAP)})
    try:
        page.wait_for_timeout(200)
        result = then() if then else None
        if screenshot:
            DEVICE_SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(DEVICE_SHOTS / f"{screenshot}.png"))
        return result
    finally:
        page.set_viewport_size(size)


def screenshot(page, name: str) -> None:
    DEVICE_SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DEVICE_SHOTS / f"{name}.png"))


def by_impact(states: dict[str, dict]) -> dict[str, list[str]]:
    """The rules a page violates in any state, by impact."""
    found: dict[str, set[str]] = {impact: set() for impact in IMPACTS}
    for rules in states.values():
        for rule_id, rule in rules.items():
            found.setdefault(rule["impact"] or "minor", set()).add(rule_id)
    return {impact: sorted(ids) for impact, ids in found.items()}


def most_elements(found: dict, rule_id: str) -> int:
    """How many elements break `rule_id` in the page's worst state."""
    return max(rules.get(rule_id, {}).get("nodes", 0) for rules in found["axe"].values())


def write_report(visited: dict[str, dict]) -> None:
    OUT.mkdir(exist_ok=True)
    report = {
        "axe_core": AXE_VERSION,
        "pages": {
            r["page"]: {"by_impact": by_impact(r["axe"]), "control": r["control"],
                        "states": r["axe"], "phone": r["phone"], "seconds": r["seconds"]}
            for r in visited.values()
        },
    }
    (OUT / "axe.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------- phone


SIDEWAYS_JS = """() => {
    const vw = window.innerWidth;
    const main = document.querySelector("[data-testid='stMain']");
    // the outermost elements that stick out (their parent still fits), and what holds them:
    // the nearest box that scrolls them ("own box") or cuts them off ("cut off"), else the page
    const out = [];
    for (const el of main ? main.querySelectorAll('*') : []) {
        if (el.closest('.katex-mathml')) continue;  // KaTeX's copy for screen readers, unseen
        if (el.closest('details:not([open])')) continue;  // a closed expander: not drawn
        const r = el.getBoundingClientRect();
        if (!(r.width > 0 && r.right > vw + 1)) continue;
        if (el.parentElement.getBoundingClientRect().right > vw + 1) continue;
        let held = 'page';
        for (let a = el.parentElement; a && a !== main; a = a.parentElement) {
            const o = getComputedStyle(a).overflowX;
            if (o === 'auto' || o === 'scroll') { held = 'own box'; break; }
            if (o === 'hidden' || o === 'clip') { held = 'cut off'; break; }
        }
        // cut-off shapes without text are drawing details (KaTeX's long strokes, the slider's
        // own input under its thumb); cut-off text is lost to the reader
        if (held === 'cut off' && !(el.textContent || '').trim()) continue;
        const widget = el.closest('[data-testid]');
        out.push({held: held, inside: widget ? widget.dataset.testid : null,
                  element: el.tagName.toLowerCase() + (el.getAttribute('class')
                      ? '.' + el.getAttribute('class').trim().split(/\\s+/)[0] : ''),
                  text: (el.textContent || '').trim().slice(0, 60),
                  right: Math.round(r.right)});
    }
    return {viewport: vw,
            document_scroll_width: document.documentElement.scrollWidth,
            main_scroll_width: main ? main.scrollWidth : 0,
            main_client_width: main ? main.clientWidth : 0,
            sticking_out: out.slice(0, 40), sticking_out_count: out.length};
}"""


def sideways_overflow(page) -> dict:
    """How far the page reaches past the viewport's width, and which elements do.

    The check issue 17 names, document.documentElement.scrollWidth <= innerWidth, cannot fail
    here: Streamlit's app container clips (overflow: hidden) and the page scrolls inside
    [data-testid='stMain']. So a page that is too wide shows as stMain's own sideways scroll;
    both are measured. Elements that stick out inside a box of their own (a formula, a table,
    a chart) are listed, with whether that box scrolls or cuts them off.
    """
    return page.evaluate(SIDEWAYS_JS)


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("path", pages_to_check(), ids=page_name)
def test_no_serious_or_critical_axe_violations(visits, path):
    found = visits(path)
    blocking = {impact: ids for impact, ids in by_impact(found["axe"]).items()
                if impact in BLOCKING and ids}
    counts = ", ".join(f"{rule_id} ({impact}, {most_elements(found, rule_id)} elements)"
                       for impact, ids in blocking.items() for rule_id in ids)
    assert not blocking, f"serious or critical axe violations: {counts} (tests/e2e/.out/axe.json)"


@pytest.mark.parametrize("path", pages_to_check(), ids=page_name)
def test_no_sideways_scroll_on_a_phone(visits, path):
    phone = visits(path)["phone"]
    fits = (phone["document_scroll_width"] <= phone["viewport"]
            and phone["main_scroll_width"] <= phone["main_client_width"])
    assert fits, (f"{phone['main_scroll_width']} px wide at 390 px: "
                  f"{phone['sticking_out'][:3]}")


# ----------------------------------------------------------------------------- keyboard

DESCRIBE_FOCUS_JS = """() => {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const label = el.getAttribute('aria-label')
        || (el.labels && el.labels[0] && el.labels[0].innerText)
        || (el.innerText || '').trim().split('\\n')[0].slice(0, 40);
    return {tag: el.tagName.toLowerCase(), type: el.type || null, label: label,
            sidebar: !!el.closest("[data-testid='stSidebar']")};
}"""


def focused(page) -> dict | None:
    return page.evaluate(DESCRIBE_FOCUS_JS)


def tab_until(page, wanted, walk: list[dict]) -> dict:
    """Press Tab until the focused element satisfies `wanted`; every stop goes into `walk`."""
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        now = focused(page)
        walk.append(now)
        if now and wanted(now):
            return now
    raise AssertionError(f"not reached in {MAX_TABS} Tab presses; stops: {walk[-MAX_TABS:]}")


def widget_box(page) -> dict:
    """The focused control's whole widget (label, track, thumb), a few pixels wider."""
    return page.evaluate("""() => {
        const el = document.activeElement;
        const widget = el.closest("[data-testid='stElementContainer']") || el;
        const r = widget.getBoundingClientRect();
        return {x: Math.max(r.x - 4, 0), y: Math.max(r.y - 4, 0),
                width: r.width + 8, height: r.height + 8};
    }""")


def focus_is_visible(page) -> bool:
    """Does the focused control look different from the same control unfocused?

    Two pictures of its widget: focused, then after Shift+Tab moved focus away (Tab brings it
    back). Any pixel of difference is a visible focus indicator.
    """
    handle = page.evaluate_handle("() => document.activeElement")
    with_focus = page.screenshot(clip=widget_box(page), animations="disabled")
    page.keyboard.press("Shift+Tab")
    box = handle.evaluate("""el => {
        const widget = el.closest("[data-testid='stElementContainer']") || el;
        const r = widget.getBoundingClientRect();
        return {x: Math.max(r.x - 4, 0), y: Math.max(r.y - 4, 0),
                width: r.width + 8, height: r.height + 8};
    }""")
    without_focus = page.screenshot(clip=box, animations="disabled")
    page.keyboard.press("Tab")
    assert page.evaluate("el => document.activeElement === el", handle), "Tab did not come back"
    return with_focus != without_focus


def test_one_page_by_keyboard_alone(server, context):
    """Softmax and sampling with Tab, Shift+Tab, typing and arrow keys only: no mouse."""
    page = context.new_page()
    walk: list[dict] = []
    visible: dict[str, bool] = {}
    try:
        page.goto(f"{server}/{KEYBOARD_PAGE}?temperature=1", timeout=60_000)
        wait_idle(page)

        # the prompt, in the sidebar: type a new one, Ctrl+Enter commits it
        tab_until(page, lambda f: f["tag"] == "textarea" and f["sidebar"], walk)
        visible["prompt"] = focus_is_visible(page)
        page.keyboard.press("Control+A")
        page.keyboard.type("JULIET: O Romeo, Romeo")
        page.keyboard.press("Control+Enter")
        wait_for_param(page, "prompt", "v === 'JULIET: O Romeo, Romeo'")
        assert_no_error(page, "keyboard walk, after typing")

        # the position slider, in the sidebar: one step left
        tab_until(page, lambda f: f["type"] == "range" and f["sidebar"], walk)
        visible["position slider"] = focus_is_visible(page)
        pos = url_param(page, "pos")
        page.keyboard.press("ArrowLeft")
        wait_for_param(page, "pos", f"v !== null && v !== {json.dumps(pos)}")

        # the temperature, the page's first slider: two steps left, and the page follows
        metric = page.locator("[data-testid='stMetricLabel']").nth(1)
        label_before = metric.inner_text()
        tab_until(page, lambda f: f["type"] == "range" and not f["sidebar"], walk)
        visible["temperature slider"] = focus_is_visible(page)
        page.keyboard.press("ArrowLeft")
        page.keyboard.press("ArrowLeft")
        wait_for_param(page, "temperature", "v !== '1'")
        # each arrow key starts its own rerun: wait until the metric shows the link's final value
        page.wait_for_function(
            """() => {
                const t = new URLSearchParams(location.search).get('temperature');
                const label = document.querySelectorAll("[data-testid='stMetricLabel']")[1];
                return t !== null && label && label.innerText.includes(String(parseFloat(t)));
            }""", timeout=60_000)
        wait_idle(page)
        assert_no_error(page, "keyboard walk, after the temperature")
        temperature = float(url_param(page, "temperature"))
        assert temperature < 1.0
        label_after = metric.inner_text()
        assert label_after != label_before and f"{temperature:g}" in label_after, (
            f"the entropy did not follow the slider: {label_before!r} -> {label_after!r}")

        # Shift+Tab goes back one stop
        here = focused(page)
        page.keyboard.press("Shift+Tab")
        assert focused(page) != here, "Shift+Tab did not move the focus"
    finally:
        page.close()
        OUT.mkdir(exist_ok=True)
        (OUT / "keyboard.json").write_text(json.dumps(
            {"page": KEYBOARD_PAGE, "focus_visible": visible, "tab_stops": walk}, indent=1,
            ensure_ascii=False) + "\n")
    hidden = [name for name, seen in visible.items() if not seen]
    assert not hidden, f"focus is not visible on {hidden}"
