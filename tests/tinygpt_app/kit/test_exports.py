"""Issue 6: every chart can be saved as PNG and the numbers behind it downloaded as CSV.

Each page runs under streamlit.testing with the tiny fixture model. A chart's PNG button is
Plotly's camera in the modebar (config: displayModeBar, toImageButtonOptions.filename = name);
its CSV is a download button whose data is a callable, run only when clicked. The test records
those callables where Streamlit registers them (MediaFileManager.add_deferred), runs them, and
compares the CSV with the numbers drawn in the figure and with the model's own trace.
"""

from __future__ import annotations

import html
import io
import json

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")
pd = pytest.importorskip("pandas", reason="the CSV tables are pandas DataFrames")
from streamlit.runtime.media_file_manager import MediaFileManager  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.apptest_support import (  # noqa: E402
    FIXTURES,
    NORMAL,
    PAGES,
    WITHOUT_CHARTS,
    decode,
    open_page,
)
from tinygpt_app.kit.widgets import csv_bytes, grid_table, series_table  # noqa: E402


@pytest.fixture
def downloads(monkeypatch) -> dict[str, tuple[str, object]]:
    """file_id -> (file name, data callable) of every deferred download the pages register."""
    found: dict[str, tuple[str, object]] = {}
    register = MediaFileManager.add_deferred

    def recording(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        file_id = register(self, data_callable, mimetype, coordinates, file_name=file_name,
                           **kwargs)
        found[file_id] = (file_name, data_callable)
        return file_id

    monkeypatch.setenv("TINYGPT_MODELS_DIR", str(FIXTURES))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", "tiny.npz")
    monkeypatch.setattr(MediaFileManager, "add_deferred", recording)
    return found


def run_page(page: str) -> AppTest:
    at = open_page(page, NORMAL)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def csv_files(at: AppTest, downloads: dict) -> dict[str, bytes]:
    """CSV file name -> content, for the download buttons of the last run (clicked here)."""
    files = {}
    for button in at.get("download_button"):
        if not button.proto.deferred_file_id:
            continue  # data given at once (e.g. a generated text), not a chart's table
        name, make = downloads[button.proto.deferred_file_id]
        if name.endswith(".csv"):
            files[name] = make()
    return files


def figures(at: AppTest) -> list[tuple[str, dict]]:
    """(PNG file name from the camera button, figure) for every Plotly chart on the page."""
    found = []
    for el in at.get("plotly_chart"):
        config = json.loads(el.proto.config)
        assert config["displayModeBar"] is True  # the camera button is always visible
        assert config["toImageButtonOptions"]["format"] == "png"
        spec = json.loads(el.proto.spec)
        title, top = spec["layout"]["title"], spec["layout"]["margin"]["t"]
        assert title["yref"] == "container" and 20 <= title["pad"]["t"] < top  # below the buttons
        found.append((config["toImageButtonOptions"]["filename"], spec))
    return found


def read_csv(data: bytes, **kwargs) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data), keep_default_na=False, na_values=[""], **kwargs)


@pytest.mark.parametrize("page", PAGES)
def test_every_chart_has_a_png_button_and_its_csv(page, downloads):
    at = run_page(page)
    drawn = figures(at)
    files = csv_files(at, downloads)
    if page not in WITHOUT_CHARTS:  # training and class pages draw once something ran
        assert drawn, "the page drew no chart"
    assert len(files) >= len(drawn)
    for name, _ in drawn:
        assert f"{name}.csv" in files, f"chart {name!r} has no CSV download"
        table = read_csv(files[f"{name}.csv"])
        assert len(table) > 0 and len(table.columns) > 0
    assert len({name for name, _ in drawn}) == len(drawn), "two charts would save the same file"


def test_embedding_csv_is_the_heatmap_and_the_trace(downloads):
    """Page 1: the CSV of the heatmap holds its rows x columns, labelled, equal to the trace."""
    from tinygpt.checkpoint.files import load

    at = run_page("pages/2_Tokens_and_embeddings.py")
    at.radio(key="tokens.view").set_value("Sum: the block input x = E[id] + P[t]").run()
    (name, fig), = figures(at)
    assert name == "embed_sum"
    table = read_csv(csv_files(at, downloads)["embed_sum.csv"], index_col=0)
    heat = fig["data"][0]
    z = decode(heat["z"])
    # the columns are the dimensions 0..d-1, drawn on a number axis (no category labels)
    assert list(table.index) == heat["y"] and "x" not in heat
    assert list(table.columns) == [str(j) for j in range(z.shape[1])]
    np.testing.assert_allclose(table.to_numpy(), z, rtol=1e-5, atol=1e-6)

    model, tokenizer = load(FIXTURES / "tiny.npz")  # the model's own numbers, computed here
    ids = np.array(tokenizer.encode(NORMAL))
    _, trace = model.run_with_trace(ids)
    np.testing.assert_allclose(table.to_numpy(), trace["embed.sum"], rtol=1e-5, atol=1e-6)


def test_masked_attention_cells_stay_empty_in_the_csv(downloads):
    """Page 3: masked cells (a later token) are empty in the CSV; each row sums to 1."""
    at = run_page("pages/4_Attention.py")
    files = csv_files(at, downloads)
    table = read_csv(files["attention_weights_layer0_head0.csv"], index_col=0)
    weights = table.to_numpy()
    n = weights.shape[0]
    assert np.isnan(weights[np.triu_indices(n, k=1)]).all()
    np.testing.assert_allclose(np.nansum(weights, axis=1), 1.0, atol=1e-4)


def test_logit_lens_csv_is_one_row_per_cell(downloads):
    """Page 4: the lens grid as a long table: stage, position, top token, its probability."""
    at = run_page("pages/5_Residual_stream.py")
    fig = dict(figures(at))["logit_lens"]
    table = read_csv(csv_files(at, downloads)["logit_lens.csv"])
    heat = fig["data"][0]
    z = decode(heat["z"])  # (positions, stages): the table is stage by stage
    np.testing.assert_allclose(table["p(top token)"].to_numpy(), z.T.ravel(), rtol=1e-5)
    tokens = [html.unescape(t) for row in np.array(heat["customdata"]).T for t in row]  # hover
    assert table["top token"].tolist() == tokens


def test_table_helpers_write_their_labels():
    """grid_table / series_table keep the labels as the CSV's first column; plain tables don't."""
    grid = grid_table(np.array([[1.5, -np.inf], [0.25, 2.0]]), ["0:a", "1:a"], ["x", "y"],
                         "query", "key")
    back = read_csv(csv_bytes(grid), index_col=0)
    assert back.index.name == "query \\ key" and list(back.index) == ["0:a", "1:a"]
    np.testing.assert_array_equal(back.to_numpy(), [[1.5, -np.inf], [0.25, 2.0]])
    series = series_table({"σ": np.array([3.0, 1.0])}, [1, 2], "index")
    assert csv_bytes(series).decode().splitlines() == ["index,σ", "1,3", "2,1"]
    plain = pd.DataFrame({"token": ["a"], "p": [0.5]})
    assert csv_bytes(plain).decode().splitlines() == ["token,p", "a,0.5"]
