"""Widgets and labels without a running app: token labels are unique per position, chips are
escaped, every chart gets a PNG button and its CSV."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("streamlit", reason="tinygpt_app.kit.widgets draws with streamlit")
pd = pytest.importorskip("pandas", reason="the CSV export needs pandas")

from tests.apptest_support import TINY  # noqa: E402
from tinygpt.checkpoint.files import load  # noqa: E402
from tinygpt_app.kit.labels import shape, token_label  # noqa: E402
from tinygpt_app.kit.widgets import chips_html, csv_bytes, plot_config  # noqa: E402


def test_labels_are_unique_and_chips_are_escaped():
    _, tok = load(TINY)
    ids = tok.encode("a a a")
    labels = [token_label(tok, t, position=i) for i, t in enumerate(ids)]
    assert len(set(labels)) == len(labels)
    assert token_label(tok, ids[1], show_id=True) == f"{token_label(tok, ids[1])} ({ids[1]})"
    html = chips_html([("<script>", "id 1"), ("·the", "id 2")], highlight=1)
    assert "<script>" not in html and "&lt;script&gt;" in html and "id 2" in html
    assert html.count("font-weight:bold") == 1  # the highlight is not colour alone
    assert shape("X", n=5, d=1024) == "X  (n=5 × d=1,024)"


def test_png_button_and_csv_export():
    config = plot_config("my_chart")
    assert config["displayModeBar"] is True
    # the camera only: each Plotly button is a Tab stop for a keyboard user (issue 17)
    assert config["modeBarButtons"] == [["toImage"]]
    assert config["toImageButtonOptions"]["format"] == "png"
    assert config["toImageButtonOptions"]["filename"] == "my_chart"
    table = pd.DataFrame({"token": ["a", "b,c"], "p": [0.25, 0.75]})
    back = pd.read_csv(io.BytesIO(csv_bytes(table)))
    assert back.equals(table)
