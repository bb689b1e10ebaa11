"""Link values (issue 12, findings 7 and 8): every value from a link is parsed strictly (a
finite number in range, or the default, with a plain-text warning and the URL corrected), and
no text a user controls is ever rendered as markdown (no link, no image, no formula)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from markdown_it import MarkdownIt  # noqa: E402

from tests.apptest_support import PAGES, assert_clean, open_page, query_param  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
SAMPLING, DECODING = "pages/7_Softmax_and_sampling.py", "pages/8_Decoding.py"
# (page, link parameter, widget key, default)
NUMBERS = [(SAMPLING, "seed", "sampling.seed", 0), (SAMPLING, "top_k", "sampling.top_k", 0),
           (SAMPLING, "temperature", "sampling.temperature", 1.0),
           (SAMPLING, "top_p", "sampling.top_p", 0.9),
           (DECODING, "new", "decoding.new", 40), (DECODING, "beams", "decoding.beams", 3),
           (DECODING, "seed", "decoding.seed", 0)]
BAD = ["inf", "-inf", "1e309", "NaN", "9" * 40, "١٢", "1_0 "]
INJECTED = "[Log in again](https://evil.example/login) ![t](https://evil.example/t.png)"


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(("page", "name", "key", "default"), NUMBERS)
def test_a_bad_number_in_a_link_gives_the_default_and_a_corrected_link(page, name, key,
                                                                       default, bad):
    at = open_page(page, prompt="Hello there", **{name: bad})
    assert_clean(at)
    widget = at.slider(key=key) if key in {w.key for w in at.slider} else at.number_input(key=key)
    assert widget.value == default
    assert query_param(at, name) == format(default, ".6g") if isinstance(default, float) else (
        query_param(at, name) == str(default))
    warnings = [w.value.replace("\\", "") for w in at.warning]  # markdown escapes removed
    warnings = [w for w in warnings if name in w]
    assert warnings and all(bad.strip() not in w for w in warnings if bad.strip())
    at.run()  # every rerun stays clean (an inf used to break each one)
    assert_clean(at)


def test_the_decoding_step_from_a_link_is_parsed_strictly():
    at = open_page(DECODING, prompt="Hello there", strategy="greedy", step="inf")
    assert_clean(at)
    assert query_param(at, "step") != "inf"


def rendered_markdown(at) -> list[str]:
    """Every piece of text the page renders as markdown: bodies and widget labels."""
    texts = []
    for kind in ("markdown", "caption", "warning", "error", "info", "success", "subheader",
                 "title", "header"):
        texts += [el.value for el in getattr(at, kind)]
    for kind in ("slider", "select_slider", "selectbox", "number_input", "radio", "toggle",
                 "button", "text_area", "text_input", "multiselect", "checkbox"):
        texts += [el.label for el in getattr(at, kind)]
    return [t for t in texts if isinstance(t, str)]


def assert_no_link_or_image(at) -> None:
    md = MarkdownIt("commonmark")
    for text in rendered_markdown(at):
        tokens = md.parse(text)
        children = [child for tok in tokens for child in (tok.children or [])]
        assert not any(child.type == "image" for child in children), text
        for child in children:  # the app's own links to its pages are relative; nothing else
            if child.type == "link_open":
                href = str(child.attrs.get("href", ""))
                assert "://" not in href and not href.startswith("//"), text
                assert href.split("?")[0].replace("_", "").isalnum(), text
        assert "https://evil" not in text, text  # a bare URL would become a link (GFM)


@pytest.mark.parametrize("page", PAGES)
def test_an_injected_prompt_is_never_rendered_as_a_link_or_image(page):
    at = open_page(page, prompt=INJECTED)
    assert_clean(at)
    assert_no_link_or_image(at)


OWN = {SAMPLING: ["temperature", "top_k", "top_p", "seed", "pos"],
       DECODING: ["temperature", "top_k", "top_p", "seed", "new", "beams", "strategy", "pos"]}


@pytest.mark.parametrize("page", [SAMPLING, DECODING])
def test_injected_control_values_are_never_rendered_as_a_link_or_image(page):
    at = open_page(page, prompt="Hello", **dict.fromkeys(OWN[page], INJECTED))
    assert_clean(at)
    assert at.warning  # the bad values were noticed...
    assert_no_link_or_image(at)  # ...and none of them became a link...
    for name in OWN[page]:  # ...and the link now holds a usable value instead
        assert "evil" not in query_param(at, name), name


def test_a_lagging_query_string_does_not_put_a_moved_control_back():
    """Two quick arrow-key presses: the second rerun can carry the query string from before
    the first rerun wrote its value. The control keeps the value it was moved to, and the link
    follows it (it used to jump back to the old value while the link kept the new one)."""
    at = open_page(SAMPLING, prompt="Hello there", temperature="1")
    at.slider(key="sampling.temperature").set_value(0.95).run()
    assert query_param(at, "temperature") == "0.95"
    at.query_params["temperature"] = "1"  # what the browser still sent
    at.slider(key="sampling.temperature").set_value(0.9).run()
    assert_clean(at)
    assert at.slider(key="sampling.temperature").value == 0.9
    assert query_param(at, "temperature") == "0.9"
