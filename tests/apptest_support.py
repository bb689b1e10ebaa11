"""What the app tests share: where the files are, the page list, the prompts every page must
survive, and small helpers to open a page under streamlit.testing, find its widgets and read the
Plotly figures it drew.

Imported as a module (`from tests.apptest_support import ...`); the fixtures are in conftest.py.
Streamlit is imported only inside open_page, so the tests that skip without streamlit, and the
chart tests that only decode figures, can import this module too.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tinygpt_app.kit.navigation import HOME, PAGE_FILES

if TYPE_CHECKING:
    from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TINY = FIXTURES / "tiny.npz"  # the small model every app test serves
PAGES = [HOME, *PAGE_FILES]  # every page, home first: the app's own list
TRAINING = "pages/12_Training.py"  # draws nothing until a training has run
CLASS = "pages/16_Class.py"  # draws no chart until a class has revealed a round
CHAT = "pages/9_Chat.py"  # no chart; a model without a chat template: one line
WITHOUT_CHARTS = (TRAINING, CLASS, CHAT)

NORMAL = "ROMEO:\nBut soft, what light"
PROMPTS = {
    "normal": NORMAL,
    "empty": "",
    "emoji_cjk": "Hello 👋🏽 世界, 東京へ行きます! 🎭",
    "over_long": "To be, or not to be, that is the question. " * 60,  # far more than n_ctx = 64
}


def open_page(page: str, prompt: str | None = None, **params: str) -> AppTest:
    """Run one page (a path from the project root) with `prompt` and `params` in its link.

    prompt=None leaves the prompt out of the link, so the page starts from its own default.
    """
    from streamlit.testing.v1 import AppTest  # here: see the module docstring

    at = AppTest.from_file(str(ROOT / page), default_timeout=60)
    if prompt is not None:
        at.query_params["prompt"] = prompt
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def query_param(at: AppTest, key: str) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def assert_clean(at: AppTest) -> None:
    """The run raised nothing and showed no error box."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


HOSTILE_MARKUP = re.compile(r"(?<!\\)(?:!\[|\]\(|\$|`|<img)")  # an image, a link, math,
#                                                             code, HTML: not escaped


def markup_left(at: AppTest) -> list[str]:
    """Every message of the run (markdown, captions, boxes, headers) with an unescaped image,
    link, math or code mark: on a page whose own words use none, hostile text that became
    markup (kit.plain_text.plain escapes them all)."""
    kinds = ("markdown", "caption", "success", "info", "warning", "error", "header",
             "subheader", "title")
    values = [str(e.value) for kind in kinds for e in getattr(at, kind)]
    return [v for v in values if HOSTILE_MARKUP.search(v)]


def assert_drawn_for(at: AppTest, kind: str, page: str) -> None:
    """What a page shows for each kind of prompt in PROMPTS (the training page: its form)."""
    assert_clean(at)
    if page == TRAINING:
        assert at.button(key="training.start") and not charts(at)
    elif page == CLASS:
        assert at.button(key="class.start") and not charts(at)
    elif page == CHAT:  # the served test model carries no chat template: one line says so
        assert len(at.info) == 1 and not charts(at)
    elif kind == "empty":
        assert at.info and not charts(at)  # an invitation to type, nothing drawn
    else:
        assert charts(at)
    if kind == "over_long":
        assert any("only the last 64" in w.value for w in at.warning)


def widget(elements, label: str):
    """The first of `elements` (e.g. at.radio) whose label starts with `label`."""
    for el in elements:
        if el.label.startswith(label):
            return el
    raise AssertionError(f"no widget labelled {label!r}")


def metric(at: AppTest, label_start: str) -> float:
    """The number shown by the first metric whose label starts with label_start."""
    for m in at.metric:
        if m.label.startswith(label_start):
            return float(re.match(r"[-\d.,]+", m.value).group().replace(",", ""))
    raise AssertionError(f"no metric {label_start!r}")


def session_keys(at: AppTest) -> list[str]:
    """Every key the session holds: plain values and widget ids (streamlit's internals)."""
    return sorted(at.session_state._state._state._keys())


# ----------------------------------------------------------------------------- figures


def charts(at: AppTest) -> list[dict]:
    """Every Plotly figure on the page, as the JSON the browser receives."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def chart(at: AppTest, title_part: str, index: int = 0) -> dict:
    """The index-th figure whose title contains title_part."""
    found = [spec for spec in charts(at) if title_part in title_of(spec)]
    assert len(found) > index, f"no chart titled like {title_part!r}"
    return found[index]


def title_of(spec: dict) -> str:
    """A chart's title as one line (charts.common.figure wraps long titles with <br>)."""
    return spec["layout"].get("title", {}).get("text", "").replace("<br>", " ")


def chart_title(at: AppTest, title_part: str) -> str:
    """The full title of the first figure whose title contains title_part."""
    return title_of(chart(at, title_part))


def chart_z(at: AppTest, title_part: str) -> np.ndarray:
    """The values (z, as floats) of the first trace of a heatmap, found by its title."""
    return decode(chart(at, title_part)["data"][0]["z"], float)


def decode(value, dtype=None) -> np.ndarray:
    """A figure's data field: a plain list, or Plotly's typed array {dtype, bdata, shape}.

    bdata is the raw buffer in base64; shape ("3, 5") is there for 2-D arrays only.
    dtype=None keeps the sent type; dtype=float converts (a list with nulls gives NaN).
    """
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        arr = flat.reshape([int(s) for s in str(shape).split(",")]) if shape else flat
        return arr if dtype is None else arr.astype(dtype)
    return np.asarray(value, dtype=dtype)


def send_widget_value(at: AppTest, key: str, field: str, value) -> AppTest:
    """Rerun with widget `key`'s value sent in WidgetState field `field` (e.g. "double_value"
    for a selectbox, which sends "string_value"), as a client writing to the websocket can:
    AppTest's own setters only send what the widget's type allows."""
    states = at._tree.get_widget_states()
    found = [w for w in states.widgets if w.id.endswith(f"-{key}")]
    assert found, f"no widget {key!r}"
    for widget_state in found:
        if field.endswith("array_value"):
            getattr(widget_state, field).data[:] = value
        else:
            setattr(widget_state, field, value)
    return at._run(states)
