"""The Why this token? page: the attribution adds up to the logit shown, the picked tokens
travel in the link, the heads link to the Attention page, and which words mattered."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import (  # noqa: E402
    NORMAL,
    assert_clean,
    charts,
    decode,
    open_page,
    query_param,
    title_of,
)

pytestmark = pytest.mark.usefixtures("tiny_models")
PAGE = "pages/14_Why_this_token.py"


def waterfalls(at) -> list[dict]:
    found = []
    for spec in charts(at):
        data = spec["data"][0]
        if data.get("type") == "waterfall":
            found.append(data)
    return found


def test_waterfall_adds_up_to_the_logit_in_its_title():
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    top, difference = waterfalls(at)
    for bars in (top, difference):
        *parts, total = decode(bars["x"], float)
        assert abs(sum(parts) - total) < 1e-3
    caption = next(c.value for c in at.caption if c.value.startswith("Sum of the bars"))
    shown = float(caption.split("logit ")[-1].rstrip("."))
    assert abs(decode(top["x"], float)[-1] - shown) < 1e-3
    assert any("adds +" in m.value for m in at.markdown)


def test_picked_tokens_travel_in_the_link_and_come_back():
    at = open_page(PAGE, NORMAL)
    box = at.selectbox(key="why.token")
    second = int(box.options[1].rsplit("(", 1)[1].rstrip(")"))  # "·is (322)" -> 322
    box.set_value(second).run()
    assert_clean(at)
    token, versus = query_param(at, "token"), query_param(at, "versus")
    assert token == str(second) and token != versus
    again = open_page(PAGE, NORMAL, token=token, versus=versus)
    assert_clean(again)
    assert str(again.selectbox(key="why.token").value) == token
    assert str(again.selectbox(key="why.versus").value) == versus
    assert [decode(w["x"], float)[-1] for w in waterfalls(again)] == \
        [decode(w["x"], float)[-1] for w in waterfalls(at)]


def test_a_bad_token_in_the_link_is_refused_with_a_warning():
    at = open_page(PAGE, NORMAL, token="999999")
    assert_clean(at)
    assert any("token" in w.value for w in at.warning)


def test_heads_link_to_the_attention_page_with_layer_and_head():
    at = open_page(PAGE, NORMAL)
    links = [m.value for m in at.markdown if "](Attention?layer=" in m.value]
    assert links, "the page run alone links with plain links"
    layer = links[0].split("layer=")[1].split("&")[0]
    head = links[0].split("head=")[1].split("&")[0]
    attention = open_page("pages/4_Attention.py", NORMAL, layer=layer, head=head)
    assert_clean(attention)
    assert str(attention.selectbox(key="attention.layer").value) == layer
    assert str(attention.selectbox(key="attention.head").value) == head


def test_attention_follows_a_link_in_the_same_session():
    at = open_page("pages/4_Attention.py", NORMAL)
    assert at.selectbox(key="attention.layer").value == 0
    at.query_params["layer"] = "1"
    at.query_params["head"] = "1"
    at.run()
    assert_clean(at)
    assert at.selectbox(key="attention.layer").value == 1
    assert at.selectbox(key="attention.head").value == 1


def test_occlusion_bars_and_coloured_prompt():
    at = open_page(PAGE, NORMAL)
    bars = [spec for spec in charts(at) if spec["data"][0].get("type") == "bar"]
    assert bars and len(bars[0]["data"][0]["x"]) == at.sidebar.select_slider[0].value + 1
    assert any("<span" in m.value and "background:rgb" in m.value for m in at.markdown)


def test_first_position_explains_without_occlusion():
    at = open_page(PAGE, NORMAL, pos="0")
    assert_clean(at)
    assert any("no earlier words" in i.value for i in at.info)
    assert waterfalls(at)


def test_user_text_in_the_chips_is_escaped():
    at = open_page(PAGE, "<b>bold</b> <script>x</script> and more")
    assert_clean(at)
    html = [m.value for m in at.markdown if "<span" in m.value]
    assert html and all("<script>" not in h and "<b>" not in h for h in html)


def test_costly_occlusion_waits_for_a_click_and_says_what_it_costs(monkeypatch):
    """On a big model (here: a budget of 0) the page says what occlusion costs and runs it
    only when asked; then it stays for this prompt, position and token."""
    from tinygpt_app.compute import explain_caches

    monkeypatch.setattr(explain_caches, "AUTO_OCCLUSION_MACS", 0)
    monkeypatch.setattr(explain_caches, "AUTO_OCCLUSION_FORWARDS", 0)
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    titles = lambda: [title_of(c) for c in charts(at)]  # noqa: E731
    assert not any("without each token" in t for t in titles())
    assert any("forward passes of the prompt" in i.value for i in at.info)
    at.button(key="why.run_occlusion").click().run()
    assert_clean(at)
    assert any("without each token" in t for t in titles())
    at.run()  # a rerun keeps it
    assert any("without each token" in t for t in titles())


def test_the_three_questions_are_tabs():
    """One question at a time (issue 49: long pages become tabs)."""
    at = open_page(PAGE, NORMAL)
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["Where the logit comes from",
                                          "Rather than another token", "Which words mattered"]
    assert [b.key for b in at.tabs[0].selectbox] == ["why.token"]
    assert [b.key for b in at.tabs[1].selectbox] == ["why.versus"]
