"""Projector mode (issue 17): a toggle kept in the link (?projector=1) that gives larger type,
at most two charts a row and charts with larger fonts, thicker lines and a high-contrast palette."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import NORMAL, assert_clean, charts, open_page, query_param  # noqa: E402
from tinygpt_app.charts.common import PROJECTOR_FONT, PROJECTOR_LINE  # noqa: E402
from tinygpt_app.kit import projector  # noqa: E402
from tinygpt_app.kit.projector import PROJECTOR_CSS, PROJECTOR_SELECTORS  # noqa: E402

pytestmark = pytest.mark.usefixtures("tiny_models")
LAYERNORM = "pages/3_LayerNorm.py"


def toggle(at):
    return at.sidebar.toggle(key=projector.KEY)


def font_sizes(at) -> list:
    return [spec["layout"].get("font", {}).get("size") for spec in charts(at)]


def style_sheets(at) -> list[str]:
    return [el.proto.body for el in at.get("html") if "<style>" in el.proto.body]


def test_off_by_default_with_streamlits_own_chart_fonts():
    at = open_page(LAYERNORM, NORMAL)
    assert_clean(at)
    assert toggle(at).value is False
    assert set(font_sizes(at)) == {None}
    assert not style_sheets(at)


def test_the_link_turns_it_on_for_every_chart():
    at = open_page(LAYERNORM, NORMAL, projector="1")
    assert_clean(at)
    assert toggle(at).value is True
    assert query_param(at, "projector") == "1"
    sizes = font_sizes(at)
    assert sizes and all(size == PROJECTOR_FONT for size in sizes)
    for spec in charts(at):
        layout = spec["layout"]
        assert layout["title"]["font"]["size"] > PROJECTOR_FONT > 12  # Plotly's default: 12
        assert layout["xaxis"]["tickfont"]["size"] >= 16
        assert layout["font"]["color"] == "#000000"
    assert style_sheets(at) == [PROJECTOR_CSS]


def test_at_most_two_charts_a_row():
    """LayerNorm puts three histograms and two bar charts side by side; projected, two a row
    at most (the three histograms: two, then one below; the four metrics stay in their row).
    The Softmax page's controls beside its charts: tests/pages/test_sampling.py."""
    side_by_side = open_page(LAYERNORM, NORMAL)
    projected = open_page(LAYERNORM, NORMAL, projector="1")
    assert len(side_by_side.columns) == 4 + 3 + 2
    assert len(projected.columns) == 4 + 2 + 2
    assert len(charts(projected)) == len(charts(side_by_side))


def test_charts_grow_and_lines_thicken():
    normal = open_page(LAYERNORM, NORMAL)
    projected = open_page(LAYERNORM, NORMAL, projector="1")
    for before, after in zip(charts(normal), charts(projected), strict=True):
        assert after["layout"]["height"] > before["layout"]["height"]
        assert after["layout"]["title"]["text"] == before["layout"]["title"]["text"]
    lines = [trace for spec in charts(projected) for trace in spec["data"]
             if trace["type"] == "scatter"]  # the per-token statistics
    assert lines and all(trace["line"]["width"] == PROJECTOR_LINE for trace in lines)


def test_the_toggle_writes_the_link_and_keeps_its_value_on_another_page():
    at = open_page("app.py", NORMAL)
    toggle(at).set_value(True).run()
    assert_clean(at)
    assert query_param(at, "projector") == "1"
    assert all(size == PROJECTOR_FONT for size in font_sizes(at))
    at.switch_page("pages/1_Lesson.py").run()
    assert_clean(at)
    assert toggle(at).value is True
    assert all(size == PROJECTOR_FONT for size in font_sizes(at))
    toggle(at).set_value(False).run()
    assert query_param(at, "projector") == "0"
    assert set(font_sizes(at)) == {None}


@pytest.mark.parametrize("bad", ["2", "yes please", "[x](https://evil.example)", ""])
def test_a_bad_value_in_the_link_leaves_it_off_with_a_plain_warning(bad):
    at = open_page(LAYERNORM, NORMAL, projector=bad)
    assert_clean(at)
    assert toggle(at).value is False
    warnings = [w.value.replace("\\", "") for w in at.warning]
    assert any("projector" in w for w in warnings), warnings
    assert not any("evil" in w for w in warnings)


@pytest.mark.parametrize("raw, on", [("1", True), ("0", False), ("true", True),
                                     ("False", False), (True, True)])
def test_parse_flag(raw, on):
    assert projector.parse_flag(raw) is on


def test_tables_are_plain_tables_when_projected():
    """st.dataframe draws on a canvas whose font ignores the projector's larger type: projected,
    a short number table is an st.table (HTML, sized by the style sheet), with the same cells."""
    normal = open_page("pages/4_Attention.py", NORMAL)
    projected = open_page("pages/4_Attention.py", NORMAL, projector="1")
    assert_clean(projected)
    assert normal.dataframe and not normal.table
    assert len(projected.table) == len(normal.dataframe)
    shown, data = projected.table[0].value, normal.dataframe[0].value
    assert list(shown.columns) == list(data.columns) and len(shown) == len(data)


def test_the_projector_style_sheet_names_its_selectors():
    for selector in PROJECTOR_SELECTORS:
        assert selector.startswith("[data-testid=") and selector in PROJECTOR_CSS
    assert PROJECTOR_CSS.startswith("<style>") and PROJECTOR_CSS.endswith("</style>")
