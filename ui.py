"""Shared pieces of the Streamlit app: page setup, the sidebar, cached models and traces, charts.

Pages import this module (Streamlit puts the folder of app.py on sys.path) and follow one recipe:

    import ui
    ui.page_setup("Attention")
    with ui.guard():                       # any exception -> a short st.error, never a traceback
        state = ui.sidebar()               # prompt, model, position (shared by every page)
        if state.ready:                    # False for an empty prompt (an invitation is shown)
            logits, trace = ui.get_trace(state)          # cached per (model, ids, interventions)
            ui.explain("What this shows ...", r"y = ...")
            z = trace["embed.sum"]                       # (n, d)
            ui.show_chart(ui.heatmap(z, ...), "embed_sum", ui.grid_table(z, labels, dims))

Public helpers
- ``page_setup(title, icon=None)``: st.set_page_config (wide) and the page title. Call first.
- ``sidebar() -> AppState``: draws the shared sidebar and returns the current state
  (model id, model, tokenizer, config, prompt, ids, position, labels, notes, ready, n/d/v/...).
  The prompt, model and position live in ``st.session_state`` (keys in ``KEY_*``) and are
  mirrored into ``st.query_params`` (``?model=...&prompt=...&pos=...``) so a link reproduces a view.
- ``get_trace(state, interventions=None) -> (logits, trace)``: the model's own run_with_trace,
  cached (bounded); every array is read-only.
- ``bpe_replay(state)``: the tokenizer's explain() of the prompt (cached).
- ``available_models()``, ``default_model_id()``, ``load_model(model_id)``: model discovery
  inside the models directory (env ``TINYGPT_MODELS_DIR``, default ``<repo>/models``; default
  model from env ``TINYGPT_DEFAULT_MODEL`` or ``shakespeare.npz``).
- ``guard()``: context manager turning an unexpected exception into ``st.error``.
- ``explain(markdown, latex=None)``: the short explanation (and formula) under a chart.
- ``number_table(df, fmt="%+.4f")``: a dataframe with formatted numbers.
- ``shape(name, *dims)`` -> "name (n=5 × d=64)"-style label text; ``dims_text(state)``.
- ``token_labels(tokenizer, ids)``: "3:·the"-style axis labels, unique per position.
- ``chips_html(items)``: token chips as HTML for ``st.markdown(..., unsafe_allow_html=True)``.
- ``first_row_within_budget(rows, cols)``: keep heatmaps under ``MAX_HEATMAP_CELLS``.
- Chart builders (plain Plotly figures, no model math, no Streamlit): ``heatmap``,
  ``attention_heatmap``, ``histogram``, ``bar``, ``prob_bar``.
- ``show_chart(fig, name, table)``: the one way a page draws a chart. The modebar is always
  shown (its camera button saves name.png, offline) and `table` becomes a CSV download,
  built only when clicked. Tables: ``grid_table`` (a heatmap: rows x columns, labelled),
  ``series_table`` (bars / lines: one column per series), ``lens_table`` (a logit lens).

Sequential colour scale: Cividis; diverging: RdBu centred at 0 (both colour-blind safe).
"""

from __future__ import annotations

import html
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from threadpoolctl import threadpool_limits

from tinygpt.model import GPT, Interventions

ROOT = Path(__file__).resolve().parent
MAX_PROMPT_CHARS = 20_000  # longer pasted text is cut, with a note
MAX_URL_PROMPT_CHARS = 2_000  # longer prompts are not mirrored into the URL
DEFAULT_PROMPT = ("ROMEO:\nBut soft, what light through yonder window breaks?\n"
                  "It is the east, and Juliet is the")
SEQUENTIAL = "Cividis"
DIVERGING = "RdBu"
MASKED_GREY = "#c8c8c8"
MAX_HEATMAP_CELLS = 200_000  # per page: a browser stays responsive below this (read at run time)
# The app inspects at most this many tokens: GPT-2 reads 1024, but a 1024-token trace of it
# holds ~2 GB of attention maps alone.
MAX_APP_TOKENS = 256

# session_state keys shared by every page (the values, not the widgets)
KEY_PROMPT, KEY_MODEL, KEY_POS = "prompt", "model", "pos"
_W_PROMPT, _W_MODEL, _W_POS = "_w_prompt", "_w_model", "_w_pos"  # widget keys
_MODEL_ERROR = "_model_error"
_POS_N = "_pos_n"  # number of positions at the last run
_PROMPT_CUT = "_prompt_cut"  # True when the pasted prompt was too long

log = logging.getLogger("tinygpt.app")

# One BLAS thread per request. A classroom server answers many students at once; letting each
# matrix product spread over every core makes the threads fight (measured here: a forward pass
# 10-15x slower under load than with one thread). TINYGPT_BLAS_THREADS overrides.
threadpool_limits(limits=int(os.environ.get("TINYGPT_BLAS_THREADS", "1")), user_api="blas")

# Every session's script runs in a thread of one Python process. NumPy lets go of the GIL inside
# most of its calls; getting it back means waiting until the thread holding it is made to let go,
# by default every 5 ms. A generation makes thousands of small NumPy calls, so next to one busy
# thread it waited 8.3 s instead of taking 44 ms (bench/load.py shows it as the Decoding tail).
# A shorter switch interval cuts that wait. TINYGPT_SWITCH_INTERVAL_MS overrides.
sys.setswitchinterval(float(os.environ.get("TINYGPT_SWITCH_INTERVAL_MS", "0.5")) / 1000)


# ----------------------------------------------------------------------------- page setup


def page_setup(title: str, icon: str | None = None) -> None:
    """Configure the page (wide layout) and write its title. Call once, first, on every page."""
    st.set_page_config(page_title=f"{title} · tinygpt", page_icon=icon, layout="wide")
    st.title(title)


@contextmanager
def guard() -> Iterator[None]:
    """Run a page body; an unexpected exception becomes a short error box, not a traceback.

    Streamlit's own control flow (st.stop, st.rerun) derives from BaseException and passes.
    """
    try:
        yield
    except Exception as err:  # noqa: BLE001 - a page must never show a raw traceback
        log.exception("page error")
        st.error(f"Sorry, this view could not be drawn ({type(err).__name__}: {err}).")


def number_table(table, fmt: str = "%+.4f", **kwargs) -> None:
    """st.dataframe with every numeric column printed as `fmt` (cheaper than a pandas Styler)."""
    from pandas.api.types import is_numeric_dtype

    config = {str(c): st.column_config.NumberColumn(format=fmt) for c in table.columns
              if is_numeric_dtype(table[c].dtype)}
    st.dataframe(table, column_config=config, width="stretch", **kwargs)


def explain(markdown: str, latex: str | None = None) -> None:
    """A short explanation for a student, with an optional formula underneath."""
    st.markdown(markdown)
    if latex:
        st.latex(latex)


# ----------------------------------------------------------------------------- models


def models_dir() -> Path:
    """The folder whose direct entries are the models a user may choose (set by the server)."""
    return Path(os.environ.get("TINYGPT_MODELS_DIR", ROOT / "models")).resolve()


# files the trainer writes next to a checkpoint (models/x.npz): not models themselves
SIDECARS = (".ids.npz", ".optim.npz", ".tmp.npz")


def available_models() -> list[str]:
    """Names of the entries directly inside models_dir(): *.npz files and GPT-2 style folders."""
    base = models_dir()
    if not base.is_dir():
        return []
    names = []
    for entry in sorted(base.iterdir()):
        if entry.is_file() and entry.suffix == ".npz" and not entry.name.endswith(SIDECARS):
            names.append(entry.name)
        elif entry.is_dir() and (entry / "config.json").is_file():
            names.append(entry.name)
    return names


def default_model_id() -> str | None:
    """TINYGPT_DEFAULT_MODEL if present, else the shipped model, else the first one found."""
    models = available_models()
    for wanted in (os.environ.get("TINYGPT_DEFAULT_MODEL"), "shakespeare.npz"):
        if wanted and wanted in models:
            return wanted
    return models[0] if models else None


def resolve_model_path(model_id: str) -> Path:
    """The path of a listed model; anything not directly inside models_dir() is refused."""
    base = models_dir()
    path = (base / model_id).resolve()
    if path.parent != base or model_id not in available_models():
        raise ValueError(f"unknown model {model_id!r}")
    return path


@st.cache_resource(max_entries=4, show_spinner="Loading the model…")
def _load_cached(path: str, mtime: float):
    from tinygpt.checkpoint import load  # imported late so the app starts without it

    model, tokenizer = load(path)
    for array in model.parameters().values():
        array.flags.writeable = False  # shared by every user: nobody may change it
    tokenizer.encode("warm up")  # builds the pre-tokenizer regex (0.4 s) now, not on a click
    return model, tokenizer


def load_model(model_id: str):
    """(model, tokenizer) for a listed model: loaded once per server, again if the file changes.

    Models trained in this session (see ``register_session_model``) come from session_state.
    """
    if is_session_model(model_id):
        if model_id not in session_models():
            raise ValueError(f"unknown model {model_id!r}")
        return session_models()[model_id]
    path = resolve_model_path(model_id)
    return _load_cached(str(path), path.stat().st_mtime)


def model_version(model_id: str) -> float:
    """Part of every cache key: the file's mtime (a retrained file is a new model); 0 for
    session models, whose ids are unique already."""
    if is_session_model(model_id):
        return 0.0
    return resolve_model_path(model_id).stat().st_mtime


# ----------------------------------------------------------------------------- traces


def interventions_key(iv: Interventions | None) -> str:
    """A small, stable text key for an Interventions value (used in the trace cache key)."""
    if iv is None or not iv.active:
        return ""
    return repr((sorted(iv.zero_heads), sorted(iv.skip_attn), sorted(iv.skip_ffn),
                 iv.no_layernorm, iv.no_position, iv.no_causal_mask, iv.no_residual))


class _TraceCache:
    """Least-recently-used traces, bounded by their total size in bytes (not by count).

    A trace of the shipped model is a few MB; one of GPT-2 small at 256 tokens is ~200 MB,
    so a count bound alone could not keep a classroom server's memory in check.
    Shared by every session of this server process; entries are read-only.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()  # key -> (logits, trace, nbytes)
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key, logits: np.ndarray, trace: dict, nbytes: int) -> None:
        with self._lock:
            if key in self._items or nbytes > self.max_bytes:
                return  # too big to keep: the caller still gets it, the cache does not
            self._items[key] = (logits, trace, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                _, (_, _, size) = self._items.popitem(last=False)
                self._bytes -= size


TRACE_CACHE = _TraceCache(int(os.environ.get("TINYGPT_TRACE_CACHE_MB", "512")) * 2**20)


def _trace_cached(model_id: str, mtime: float, ids: tuple[int, ...], iv_key: str,
                  model: GPT, iv: Interventions | None):
    key = (model_id, mtime, ids, iv_key)
    hit = TRACE_CACHE.get(key)
    if hit is not None:
        return hit[0], hit[1]
    logits, trace = model.run_with_trace(np.asarray(ids, dtype=np.int64), iv)
    nbytes = 0
    for array in (logits, *trace.values()):
        array.flags.writeable = False  # cached and shared: read-only
        nbytes += array.nbytes
    TRACE_CACHE.put(key, logits, trace, nbytes)
    return logits, trace


def get_trace(state: AppState, interventions: Interventions | None = None):
    """(logits (n, v), trace) for the current prompt: the model's own run_with_trace, cached."""
    mtime = model_version(state.model_id)
    return _trace_cached(state.model_id, mtime, tuple(int(i) for i in state.ids),
                         interventions_key(interventions), state.model, interventions)


@st.cache_resource(max_entries=16, show_spinner=False)
def _bpe_replay_cached(model_id: str, mtime: float, prompt: str, _tokenizer):
    return _tokenizer.explain(prompt)


def bpe_replay(state: AppState) -> list:
    """tokenizer.explain(prompt): the chunks and merges that made the tokens (cached)."""
    mtime = model_version(state.model_id)
    return _bpe_replay_cached(state.model_id, mtime, state.prompt, state.tokenizer)


# ----------------------------------------------------------------------------- the sidebar


@dataclass
class AppState:
    """What every page needs to know: the model, the prompt as token ids, the position."""

    model_id: str
    model: GPT
    tokenizer: object
    prompt: str
    ids: np.ndarray  # (n,) int64, at most n_ctx tokens
    position: int  # the position being inspected, 0 .. n-1
    labels: list[str] = field(default_factory=list)  # one readable label per position
    notes: list[str] = field(default_factory=list)  # e.g. "truncated to the last 128 tokens"

    @property
    def ready(self) -> bool:
        return len(self.ids) > 0

    @property
    def config(self):
        return self.model.config

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def d(self) -> int:
        return self.config.n_embd

    @property
    def v(self) -> int:
        return self.config.vocab_size

    @property
    def n_layer(self) -> int:
        return self.config.n_layer

    @property
    def n_head(self) -> int:
        return self.config.n_head

    @property
    def head_size(self) -> int:
        return self.config.head_size


def _init_state_from_url() -> None:
    """On a session's first run, take prompt / model / position from the URL if given."""
    if KEY_PROMPT in st.session_state:
        return
    params = st.query_params
    st.session_state[KEY_PROMPT] = params.get("prompt", DEFAULT_PROMPT)[:MAX_PROMPT_CHARS]
    st.session_state[KEY_MODEL] = params.get("model") or default_model_id()
    try:
        st.session_state[KEY_POS] = int(params.get("pos", -1))
    except ValueError:
        st.session_state[KEY_POS] = -1  # -1: the last position


def _on_model_change() -> None:
    """Try the newly chosen model; if it cannot be loaded keep the previous one."""
    chosen = st.session_state[_W_MODEL]
    try:
        load_model(chosen)
    except Exception as err:  # noqa: BLE001 - any loading failure is shown, not raised
        st.session_state[_MODEL_ERROR] = f"Could not load {chosen!r}: {err}"
        st.session_state[_W_MODEL] = st.session_state[KEY_MODEL]
        return
    st.session_state[KEY_MODEL] = chosen
    st.session_state.pop(_MODEL_ERROR, None)


def _model_select(models: list[str]) -> str:
    if st.session_state.get(KEY_MODEL) not in models:
        st.session_state[KEY_MODEL] = default_model_id()
    # re-filled from the shared value on every run (as the prompt): after a change of page the
    # widget would otherwise fall back to the first option while the page uses KEY_MODEL
    st.session_state[_W_MODEL] = st.session_state[KEY_MODEL]
    st.selectbox("Model", models, key=_W_MODEL, on_change=_on_model_change,
                 format_func=model_label,
                 help="Models found in the server's models folder, and the ones you trained "
                      "on the Training page (only you see those).")
    if _MODEL_ERROR in st.session_state:
        st.error(st.session_state[_MODEL_ERROR])
    return st.session_state[KEY_MODEL]


def _on_prompt_change() -> None:
    text = st.session_state[_W_PROMPT]
    st.session_state[_PROMPT_CUT] = len(text) > MAX_PROMPT_CHARS
    st.session_state[KEY_PROMPT] = text[:MAX_PROMPT_CHARS]


def _prompt_input() -> tuple[str, list[str]]:
    # the widget is re-filled from the shared value on every run: widget state alone does not
    # survive a change of page, the plain session_state value does
    st.session_state[_W_PROMPT] = st.session_state[KEY_PROMPT]
    st.text_area("Prompt", key=_W_PROMPT, height=120, on_change=_on_prompt_change,
                 help="Type anything. Press Ctrl+Enter (or click outside) to run the model.")
    notes = []
    if st.session_state.get(_PROMPT_CUT):
        notes.append(f"The prompt was cut to its first {MAX_PROMPT_CHARS:,} characters.")
    return st.session_state[KEY_PROMPT], notes


def encode_prompt(tokenizer, text: str, n_ctx: int) -> tuple[np.ndarray, list[str]]:
    """Token ids of the prompt, keeping the last n_ctx tokens (with a note when it cuts)."""
    ids = tokenizer.encode(text)
    notes = []
    if len(ids) > n_ctx:
        notes.append(f"The prompt has {len(ids)} tokens; at most {n_ctx} fit (the model's "
                     f"context, or the app's limit of {MAX_APP_TOKENS}), "
                     f"so only the last {n_ctx} are used.")
        ids = ids[-n_ctx:]
    return np.asarray(ids, dtype=np.int64), notes


def _on_position_change() -> None:
    st.session_state[KEY_POS] = int(st.session_state[_W_POS])


def _position_select(labels: list[str]) -> int:
    n = len(labels)
    position = st.session_state.get(KEY_POS, -1)
    previous_n = st.session_state.get(_POS_N)
    followed_end = previous_n not in (None, n) and position == previous_n - 1
    if not 0 <= position < n or followed_end:
        position = n - 1  # new prompt: stay on the last token if we were on it
    st.session_state[KEY_POS] = position
    st.session_state[_POS_N] = n
    st.session_state[_W_POS] = position
    if n == 1:
        st.caption(f"Position inspected: 0 ({labels[0]})")
    else:
        st.select_slider("Position inspected", options=list(range(n)), key=_W_POS,
                         format_func=lambda i: labels[i], on_change=_on_position_change,
                         help="The token whose numbers the pages zoom in on.")
    return position


def _sync_url(model_id: str, prompt: str, position: int) -> None:
    """Mirror the state into the URL so that copying the link reproduces this view."""
    params = {"model": model_id, "pos": str(position)}
    if len(prompt) <= MAX_URL_PROMPT_CHARS:
        params["prompt"] = prompt
    for key, value in params.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    if "prompt" not in params and "prompt" in st.query_params:
        del st.query_params["prompt"]


def sidebar() -> AppState | None:
    """Draw the shared sidebar; return the current state (None when no model can be loaded).

    An empty prompt gives a state with ``ready == False`` and an invitation on the page.
    """
    _init_state_from_url()
    with st.sidebar:
        models = available_models() + list(session_models())
        if not models:
            st.error(f"No model found in {models_dir().name}/. Train one or add a checkpoint "
                     "(see the README).")
            st.stop()
        model_id = _model_select(models)
        try:
            model, tokenizer = load_model(model_id)
        except Exception as err:  # noqa: BLE001 - e.g. the default file is damaged
            st.error(f"Could not load {model_id!r}: {err}")
            st.stop()
        prompt, notes = _prompt_input()
        ids, more_notes = encode_prompt(tokenizer, prompt, min(model.config.n_ctx, MAX_APP_TOKENS))
        notes += more_notes
        labels = token_labels(tokenizer, ids)
        position = _position_select(labels) if len(ids) else 0
        cfg = model.config
        st.caption(f"{cfg.n_layer} layers · {cfg.n_head} heads · d = {cfg.n_embd} · "
                   f"v = {cfg.vocab_size:,} · context {cfg.n_ctx}")
    _sync_url(model_id, prompt, position)
    for note in notes:
        st.warning(note)
    if not len(ids):
        st.info("Type a prompt in the sidebar (for example *To be, or not to be*) and the "
                "model will show you, step by step, how it guesses the next token.")
    return AppState(model_id, model, tokenizer, prompt, ids, position, labels, notes)


# ----------------------------------------------------------------------------- labels


def token_text(tokenizer, token_id: int) -> str:
    """A readable form of one token (space as '·', newline as '\\n')."""
    display = getattr(tokenizer, "token_display", None)
    if display is not None:
        return display(int(token_id))
    return tokenizer.decode([int(token_id)])


def token_labels(tokenizer, ids: Sequence[int]) -> list[str]:
    """One axis label per position, "3:·the"; the index keeps labels unique for Plotly."""
    return [f"{i}:{token_text(tokenizer, t)}" for i, t in enumerate(ids)]


def shape(name: str, **dims: int) -> str:
    """Shape text for titles: shape("X", n=5, d=64) -> "X  (n=5 × d=64)"."""
    return f"{name}  ({' × '.join(f'{k}={v:,}' for k, v in dims.items())})"


def dims_text(state: AppState) -> str:
    """The live sizes for the current prompt, for captions."""
    return (f"n = {state.n} tokens · d = {state.d} · v = {state.v:,} · "
            f"{state.n_layer} layers · {state.n_head} heads of size {state.head_size}")


def chips_html(items: Sequence[tuple[str, str]], highlight: int | None = None) -> str:
    """Token chips: items are (text, small caption under it), e.g. ("·the", "id 262")."""
    chips = []
    for i, (text, caption) in enumerate(items):
        border = "2px solid #d1495b" if i == highlight else "1px solid #9aa5b1"
        chips.append(
            f'<span style="display:inline-block;margin:2px;padding:2px 6px;border-radius:6px;'
            f'border:{border};background:{_chip_colour(i)};font-family:monospace;'
            f'text-align:center;line-height:1.25">'
            f'{html.escape(text) or "&nbsp;"}<br><small style="color:#444">'
            f"{html.escape(caption)}</small></span>"
        )
    return '<div style="line-height:2.4">' + "".join(chips) + "</div>"


def _chip_colour(i: int) -> str:
    palette = ("#e8f1fa", "#fdf0d5", "#e6f4ea", "#f3e8f7", "#fde8e4", "#e9eef0")
    return palette[i % len(palette)]


# ----------------------------------------------------------------------------- charts

# No named template: applying one costs ~15 ms per figure, and st.plotly_chart's own theme
# styles every chart anyway.
MODEBAR_ROOM = 26  # px kept free above a chart's title for the modebar, which is always shown
_MARGIN = dict(l=10, r=10, t=50 + MODEBAR_ROOM, b=10)


def figure(traces: Sequence[dict], title: str, height: int, **layout) -> go.Figure:
    """A Plotly figure from plain dicts, built and validated in one call.

    Every chart of the app is made here: one constructor call costs a quarter of the
    add_trace + update_layout + update_axes sequence, which matters when a slider moves.
    The title sits one modebar row down (in a narrow column the buttons would cover it).
    """
    spec = {"margin": _MARGIN, "height": height,
            "title": {"text": title, "yref": "container", "y": 1, "yanchor": "top",
                      "pad": {"t": MODEBAR_ROOM}},
            **layout}
    return go.Figure({"data": list(traces), "layout": spec})


def heatmap(
    z: np.ndarray,
    title: str,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    diverging: bool = True,
    height: int | None = None,
) -> go.Figure:
    """A heatmap of a 2-D array (rows top to bottom), diverging RdBu centred at 0 by default."""
    z = np.asarray(z, dtype=np.float32)
    colours = dict(colorscale=DIVERGING, zmid=0) if diverging else dict(colorscale=SEQUENTIAL)
    trace = dict(
        type="heatmap", z=z,
        x=list(x_labels) if x_labels is not None else None,
        y=list(y_labels) if y_labels is not None else None,
        hovertemplate="row %{y}<br>column %{x}<br>value %{z:.4f}<extra></extra>",
        **colours,
    )
    return figure([trace], title, height or _height(z.shape[0]),
                  xaxis=dict(title=dict(text=x_title),
                             type="category" if x_labels is not None else None),
                  yaxis=dict(title=dict(text=y_title), type="category", autorange="reversed"))


def first_row_within_budget(rows: int, cols: int, budget: int | None = None) -> int:
    """First row to draw so that at most `budget` cells (default MAX_HEATMAP_CELLS) are drawn;
    the last rows are kept."""
    budget = MAX_HEATMAP_CELLS if budget is None else budget
    return max(0, rows - max(1, budget // max(1, cols)))


def _height(rows: int) -> int:
    return int(min(900, max(260, 120 + 22 * rows)))


def attention_heatmap(
    weights: np.ndarray, labels: Sequence[str], title: str, colorbar_title: str = "weight",
    diverging: bool = False, y_labels: Sequence[str] | None = None,
) -> go.Figure:
    """An n x n attention map; NaN / -inf cells (masked: a later token) are drawn grey.

    Sequential colours for weights (0..1); diverging (RdBu at 0) for raw scores.
    y_labels: the query rows drawn, when only the last rows are shown (default: labels).

    The first trace holds the values (masked cells as None), the second paints the masked cells.
    """
    w = np.asarray(weights, dtype=np.float32)
    masked = ~np.isfinite(w)
    shown = np.where(masked, np.nan, w)
    x, y = list(labels), list(y_labels if y_labels is not None else labels)
    traces = [dict(
        type="heatmap", z=shown, x=x, y=y, colorbar=dict(title=dict(text=colorbar_title)),
        hoverongaps=False, **(dict(colorscale=DIVERGING, zmid=0) if diverging
                              else dict(colorscale=SEQUENTIAL)),
        hovertemplate="query %{y}<br>key %{x}<br>%{z:.4f}<extra></extra>",
    )]
    if masked.any():
        traces.append(dict(
            type="heatmap", z=np.where(masked, 1.0, np.nan).astype(np.float32), x=x, y=y,
            colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]], showscale=False, hoverongaps=False,
            hovertemplate="query %{y}<br>key %{x}<br>masked: a later token<extra></extra>",
            name="masked",
        ))
    return figure(traces, title, _height(len(y)) + 40,
                  xaxis=dict(title=dict(text="key (the token looked at)"), type="category"),
                  yaxis=dict(title=dict(text="query (the token looking)"), type="category",
                             autorange="reversed"))


def histogram(values: np.ndarray, title: str, x_title: str = "value",
              mean: float | None = None, std: float | None = None, nbins: int = 40) -> go.Figure:
    """Histogram of a vector's entries, with dashed lines at the mean and mean ± std if given."""
    v = np.asarray(values, dtype=np.float32).ravel()
    trace = dict(type="histogram", x=v, nbinsx=nbins, marker=dict(color="#3b6ea5"),
                 hovertemplate="%{x}<br>count %{y}<extra></extra>")
    shapes, notes = [], []
    if mean is not None:  # layout shapes are much cheaper to build than add_vline
        shapes.append(_vline(mean, "dash", "#d1495b"))
        notes.append(dict(x=float(mean), y=1, yref="paper", text="mean", showarrow=False,
                          yanchor="bottom", font=dict(color="#d1495b")))
        if std is not None:
            shapes += [_vline(mean - std, "dot", "#E69F00"), _vline(mean + std, "dot", "#E69F00")]
    return figure([trace], title, 300, showlegend=False, bargap=0.05, shapes=shapes,
                  annotations=notes, xaxis=dict(title=dict(text=x_title)),
                  yaxis=dict(title=dict(text="count")))


def _vline(x: float, dash: str, colour: str) -> dict:
    return dict(type="line", x0=float(x), x1=float(x), y0=0, y1=1, yref="paper",
                line=dict(dash=dash, color=colour, width=2))


def bar(values: np.ndarray, title: str, x_labels: Sequence | None = None,
        x_title: str = "", y_title: str = "", color: str = "#3b6ea5",
        height: int = 280) -> go.Figure:
    """A bar per entry of a 1-D array (e.g. the LayerNorm scale gamma, one bar per dimension)."""
    v = np.asarray(values, dtype=np.float32).ravel()
    x = list(x_labels) if x_labels is not None else list(range(len(v)))
    trace = dict(type="bar", x=x, y=v, marker=dict(color=color),
                 hovertemplate="%{x}: %{y:.4f}<extra></extra>")
    return figure([trace], title, height, xaxis=dict(title=dict(text=x_title)),
                  yaxis=dict(title=dict(text=y_title)))


def prob_bar(tokens: Sequence[str], probs: Sequence[float], title: str) -> go.Figure:
    """Horizontal bars of next-token probabilities, the most likely on top."""
    p = np.asarray(probs, dtype=np.float32)
    trace = dict(type="bar", x=p, y=list(tokens), orientation="h", marker=dict(color="#3b6ea5"),
                 text=[f"{x:.1%}" for x in p], textposition="auto",
                 hovertemplate="%{y}: %{x:.4f}<extra></extra>")
    return figure([trace], title, max(240, 60 + 28 * len(p)),
                  yaxis=dict(autorange="reversed", type="category"),
                  xaxis=dict(title=dict(text="probability"),
                             range=[0, max(1e-9, float(p.max()) * 1.15)]))


# colour-blind-safe qualitative colours (Okabe-Ito) for charts with a few named series
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")


def lines(series: dict[str, np.ndarray], x_labels: Sequence[str], title: str,
          y_title: str = "", height: int = 320) -> go.Figure:
    """One line with markers per named 1-D series, over the same x labels (e.g. positions)."""
    traces = [dict(type="scatter", x=list(x_labels), y=np.asarray(values, dtype=np.float32),
                   name=name, mode="lines+markers", line=dict(color=colour),
                   hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>")
              for (name, values), colour in zip(series.items(), SERIES_COLOURS, strict=False)]
    return figure(traces, title, height, legend=dict(orientation="h", y=-0.25),
                  xaxis=dict(type="category"), yaxis=dict(title=dict(text=y_title)))


def grouped_bars(series: dict[str, np.ndarray], title: str, x_title: str = "",
                 height: int = 320) -> go.Figure:
    """Bars of several same-length vectors side by side, one group per index (e.g. q, k, q*k)."""
    traces = []
    for (name, values), colour in zip(series.items(), SERIES_COLOURS, strict=False):
        v = np.asarray(values, dtype=np.float32)
        traces.append(dict(type="bar", x=list(range(len(v))), y=v, name=name,
                           marker=dict(color=colour),
                           hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"))
    return figure(traces, title, height, barmode="group", legend=dict(orientation="h", y=-0.25),
                  xaxis=dict(title=dict(text=x_title)))


# ============================================================================================
# Chart builders for pages 4 (residual stream), 5 (logits) and 8 (what if)  -- app part 1B
# Plain functions: arrays in, Plotly figure out. No model math here (that is tinygpt.inspect).
# ============================================================================================

MAX_TEXT_CELLS = 600  # above this many cells a heatmap shows colour only, no per-cell text


def _position_ticks(labels: list[str]) -> dict:
    """Numbered ticks with token text: repeated tokens stay separate (categories would merge)."""
    n = len(labels)
    step = max(1, n // 40)  # at most ~40 tick labels so they stay readable
    ticks = list(range(0, n, step))
    return dict(tickmode="array", tickvals=ticks, ticktext=[labels[i] for i in ticks])


def residual_norms_figure(
    norms: np.ndarray, stage_labels: list[str], token_labels: list[str], d: int
) -> go.Figure:
    """Heatmap (S stages x n tokens) of ||x_t|| at each stage of the residual stream."""
    S, T = norms.shape
    trace = dict(
        type="heatmap",
        z=norms.astype(np.float32),
        x=list(range(T)),
        y=list(range(S)),
        colorscale=SEQUENTIAL,
        colorbar=dict(title=dict(text="‖x‖")),
        customdata=np.array([list(token_labels)] * S, dtype=object),
        hovertemplate="stage %{y}<br>token %{customdata}<br>‖x‖ = %{z:.3f}<extra></extra>",
    )
    return figure(
        [trace],
        f"Residual norm ‖x‖ per token: {S} stages × n = {T} tokens (each x has d = {d})",
        max(260, 40 + 28 * S),
        xaxis=dict(title=dict(text="token position"), **_position_ticks(token_labels)),
        yaxis=dict(tickmode="array", tickvals=list(range(S)), ticktext=stage_labels,
                   autorange="reversed"),
    )


def residual_norm_lines_figure(
    norms: np.ndarray, stage_labels: list[str], token_labels: list[str], positions: list[int]
) -> go.Figure:
    """One line per chosen token: how long its residual vector is after each stage."""
    traces = [dict(type="scatter", x=stage_labels, y=norms[:, t].astype(np.float32),
                   mode="lines+markers", name=f"{t}: {token_labels[t]}")
              for t in positions]
    return figure(
        traces,
        f"‖x‖ of {len(positions)} token(s) as the stream passes each sublayer",
        340,
        xaxis=dict(title=dict(text="stage")),
        yaxis=dict(title=dict(text="‖x‖")),
    )


def sublayer_writes_figure(
    writes: np.ndarray, sublayer_labels: list[str], token_labels: list[str], d: int
) -> go.Figure:
    """Heatmap (2L sublayers x n tokens) of ||what the sublayer adds|| for each token."""
    S, T = writes.shape
    trace = dict(
        type="heatmap",
        z=writes.astype(np.float32),
        x=list(range(T)),
        y=list(range(S)),
        colorscale="Viridis",
        colorbar=dict(title=dict(text="‖Δx‖")),
        hovertemplate="sublayer %{y}<br>token %{x}<br>‖Δx‖ = %{z:.3f}<extra></extra>",
    )
    return figure(
        [trace],
        f"What each sublayer writes: ‖Δx‖, {S} sublayers × n = {T} tokens (Δx has d = {d})",
        max(240, 40 + 28 * S),
        xaxis=dict(title=dict(text="token position"), **_position_ticks(token_labels)),
        yaxis=dict(tickmode="array", tickvals=list(range(S)), ticktext=sublayer_labels,
                   autorange="reversed"),
    )


def logit_lens_figure(
    probs: np.ndarray,
    top_tokens: list[list[str]],
    stage_labels: list[str],
    token_labels: list[str],
    positions: list[int],
    v: int,
) -> go.Figure:
    """Logit lens grid (S stages x shown positions): colour = p(top token), text = the token.

    probs (S, m) and top_tokens (S lists of m strings) are for the columns `positions`.
    """
    S, m = probs.shape
    show_text = S * m <= MAX_TEXT_CELLS
    trace = dict(
        type="heatmap",
        z=probs.astype(np.float32),
        x=list(range(m)),
        y=list(range(S)),
        zmin=0.0,
        zmax=1.0,
        colorscale=SEQUENTIAL,
        colorbar=dict(title=dict(text="p(top)")),
        text=top_tokens,
        texttemplate="%{text}" if show_text else None,
        textfont=dict(size=11),
        hovertemplate="%{y}<br>top token: %{text}<br>p = %{z:.3f}<extra></extra>",
    )
    return figure(
        [trace],
        f"Logit lens: top next token read after each stage ({S} stages × {m} positions, "
        f"over v = {v} tokens)",
        max(280, 60 + 34 * S),
        xaxis=dict(title=dict(text="position: the token it sees"), tickmode="array",
                   tickvals=list(range(m)), ticktext=[token_labels[t] for t in positions],
                   tickangle=-45 if m > 8 else 0),
        yaxis=dict(tickmode="array", tickvals=list(range(S)), ticktext=stage_labels,
                   autorange="reversed"),
    )


def logits_heatmap_figure(
    logits: np.ndarray, column_labels: list[str], row_labels: list[str], v: int
) -> go.Figure:
    """The logits as a heatmap: rows = positions (n), columns = vocabulary tokens shown (m <= v)."""
    T, m = logits.shape
    lim = float(np.max(np.abs(logits))) if logits.size else 1.0
    trace = dict(
        type="heatmap",
        z=logits.astype(np.float32),
        # labels as categories: m + n strings, not an n x m hover array (that cost 0.3 s)
        x=list(column_labels),
        y=list(row_labels),
        colorscale=DIVERGING,
        reversescale=True,
        zmid=0.0,
        zmin=-lim,
        zmax=lim,
        colorbar=dict(title=dict(text="logit")),
        hovertemplate="row %{y}<br>token %{x}<br>logit %{z:.3f}<extra></extra>",
    )
    which = "the whole vocabulary" if m == v else f"{m} of the v = {v} tokens"
    return figure(
        [trace],
        f"Logits: n = {T} positions × {which}",
        max(320, min(900, 80 + 18 * T)),
        xaxis=dict(title=dict(text="vocabulary token (column)"), type="category"),
        yaxis=dict(type="category", autorange="reversed"),
    )


def logit_row_figure(row: np.ndarray, highlight: list[tuple[int, str]], position: int) -> go.Figure:
    """All v logits of one position, token id on x (a full-row overview; Scattergl for speed)."""
    v = row.shape[0]
    traces = [dict(
        type="scattergl",
        x=np.arange(v),
        y=row.astype(np.float32),
        mode="markers",
        marker=dict(size=3, color="#4c72b0"),
        name="every token",
        hovertemplate="id %{x}<br>logit %{y:.3f}<extra></extra>",
    )]
    if highlight:
        ids = [i for i, _ in highlight]
        traces.append(dict(
            type="scatter",
            x=ids,
            y=row[ids].astype(np.float32),
            mode="markers+text",
            marker=dict(size=9, color="#dd8452"),
            text=[label for _, label in highlight],
            textposition="top center",
            name="top tokens",
        ))
    return figure(
        traces,
        f"Row {position}: all v = {v} logits, by token id",
        320,
        xaxis=dict(title=dict(text="token id")),
        yaxis=dict(title=dict(text="logit")),
    )


HIT_COLOURS = {True: "#0072b2", False: "#e69f00"}  # Okabe-Ito blue / orange


def shift_hits_figure(
    p_next: np.ndarray, hits: np.ndarray, row_labels: list[str], predicted: list[str]
) -> go.Figure:
    """Bar per position t: probability given to the real token t+1; colour = argmax hit or not."""
    n = len(p_next)
    trace = dict(
        type="bar",
        x=list(range(n)),
        y=p_next.astype(np.float32),
        marker=dict(color=[HIT_COLOURS[bool(h)] for h in hits]),
        customdata=np.array([[row_labels[t], predicted[t]] for t in range(n)], dtype=object)
        if n
        else None,
        hovertemplate="%{customdata[0]}<br>argmax: %{customdata[1]}"
        "<br>p(real next) = %{y:.3f}<extra></extra>",
    )
    n_hits = int(np.sum(hits))
    return figure(
        [trace],
        f"Shift by one: row t is scored on token t+1 — {n_hits} of {n} hits "
        "(blue = the top guess was right, orange = wrong)",
        340,
        xaxis=dict(title=dict(text="row t: sees → should predict"),
                   **_position_ticks(row_labels)),
        yaxis=dict(title=dict(text="p(real next token)"),
                   range=[0, min(1.0, max(0.05, 1.15 * float(np.max(p_next, initial=0.0))))]),
    )


def tying_products_figure(products: np.ndarray, dot: float, token_label: str) -> go.Figure:
    """The d terms h_i * E[token, i] whose sum is the logit."""
    d = products.shape[0]
    trace = dict(
        type="bar",
        x=list(range(d)),
        y=products.astype(np.float32),
        marker=dict(color=np.where(products >= 0, "#0072b2", "#d55e00").tolist()),
        hovertemplate="i = %{x}<br>h_i·E_i = %{y:.4f}<extra></extra>",
    )
    return figure(
        [trace],
        f"logit({token_label}) = Σ over d = {d} dimensions of h_i · E[token]_i = {dot:.4f}",
        300,
        xaxis=dict(title=dict(text="dimension i")),
        yaxis=dict(title=dict(text="h_i · E_i")),
    )


def singular_values_figure(s: np.ndarray, v: int) -> go.Figure:
    """Singular values of W_out (d of them), largest first, on a log scale."""
    d = s.shape[0]
    trace = dict(
        type="scatter",
        x=list(range(1, d + 1)),
        y=s.astype(np.float32),
        mode="lines+markers",
        marker=dict(size=4),
        hovertemplate="#%{x}: σ = %{y:.4g}<extra></extra>",
    )
    return figure(
        [trace],
        f"Singular values of W_out (d × v = {d} × {v}): only d = {d} of them",
        320,
        xaxis=dict(title=dict(text="index (largest first)")),
        yaxis=dict(title=dict(text="σ"), type="log"),
    )


def prediction_change_figure(
    tokens: list[str], p_before: np.ndarray, p_after: np.ndarray, position: int
) -> go.Figure:
    """Next-token probabilities of the same tokens, normal vs switched: two bars per token."""
    top = float(max(np.max(p_before, initial=0.0), np.max(p_after, initial=0.0)))
    traces = [dict(
        type="bar",
        y=list(tokens),
        x=np.asarray(probs, dtype=np.float32),
        orientation="h",
        name=name,
        marker=dict(color=colour),
        text=[f"{p:.3f}" for p in probs],
        textposition="outside",
        hovertemplate="%{y}: %{x:.4f}<extra>" + name + "</extra>",
    ) for name, probs, colour in (("normal", p_before, HIT_COLOURS[True]),
                                  ("with the switches", p_after, HIT_COLOURS[False]))]
    return figure(
        traces,
        f"Next token after position {position}: normal vs with the switches "
        f"({len(tokens)} tokens of v)",
        max(300, 80 + 34 * len(tokens)),
        barmode="group",
        xaxis=dict(title=dict(text="probability"), range=[0, min(1.0, top * 1.3) or 1.0]),
        yaxis=dict(autorange="reversed", type="category"),
    )


@st.cache_resource(max_entries=4, show_spinner="Computing the singular values of W_out…")
def _singular_values_cached(model_id: str, mtime: float, _model: GPT) -> np.ndarray:
    from tinygpt.readouts import output_singular_values

    s = output_singular_values(_model)
    s.flags.writeable = False
    return s


def singular_values(state: AppState) -> np.ndarray:
    """Singular values of the current model's W_out (d,), computed once per model."""
    mtime = model_version(state.model_id)
    return _singular_values_cached(state.model_id, mtime, state.model)


# ============================================================================================
# App part 2 (pages 6 softmax & sampling, 7 decoding, 9 training): session models, controls
# mirrored in the URL, chart export (PNG + CSV), cached generation, background training, and
# their chart builders. Model math stays in tinygpt (decoding, inspect, train).
# ============================================================================================

import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable  # noqa: E402

# ----------------------------------------------------------------------------- session models

SESSION_PREFIX = "session:"  # ids of models trained in the browser: "session:name #a1b2c3"
MAX_SESSION_MODELS = 3  # per session; the oldest is forgotten first
_SESSION_MODELS = "_session_models"  # session_state: model id -> (model, tokenizer)


def is_session_model(model_id: str | None) -> bool:
    return bool(model_id) and model_id.startswith(SESSION_PREFIX)


def session_models() -> dict:
    """The models this user trained in this session: id -> (model, tokenizer)."""
    return st.session_state.get(_SESSION_MODELS, {})


def register_session_model(name: str, model: GPT, tokenizer) -> str:
    """Offer a model trained in this session on every page (for this user only).

    The id carries a random suffix, so cached traces of two models with the same name never
    mix. The parameters become read-only: from now on the model is shared by the caches.
    """
    for array in model.parameters().values():
        array.flags.writeable = False
    model_id = f"{SESSION_PREFIX}{name} #{uuid.uuid4().hex[:6]}"
    models = dict(session_models())
    models[model_id] = (model, tokenizer)
    while len(models) > MAX_SESSION_MODELS:
        models.pop(next(iter(models)))
    st.session_state[_SESSION_MODELS] = models
    return model_id


def use_model(model_id: str) -> None:
    """Make model_id the current model (call from a widget callback, before the sidebar)."""
    st.session_state[KEY_MODEL] = model_id
    st.session_state[_W_MODEL] = model_id
    st.session_state.pop(_MODEL_ERROR, None)


def model_label(model_id: str) -> str:
    """How the model selector shows an id."""
    if is_session_model(model_id):
        return f"{model_id.removeprefix(SESSION_PREFIX)} (trained here)"
    return model_id


# ----------------------------------------------------------------------------- URL controls


def in_range(lo: float, hi: float, kind: type = float) -> Callable[[object], object]:
    """A parser for control values: kind(text), refused (ValueError) outside [lo, hi]."""

    def parse(raw: object) -> object:
        try:
            value = kind(float(raw)) if kind is int else kind(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{raw!r} is not a number") from None
        if kind is int and float(raw) != value:
            raise ValueError(f"{raw!r} is not a whole number")
        if not lo <= value <= hi:  # also refuses NaN
            raise ValueError(f"{raw!r} is outside {lo:g} … {hi:g}")
        return value

    return parse


def one_of(options: Sequence) -> Callable[[object], object]:
    """A parser for a choice among options (compared as text, as the URL holds text)."""

    def parse(raw: object) -> object:
        for option in options:
            if str(option) == str(raw):
                return option
        raise ValueError(f"{raw!r} is not one of {', '.join(map(str, options))}")

    return parse


def _url_text(value: object) -> str:
    return format(value, ".6g") if isinstance(value, float) else str(value)


def control(widget: Callable, label: str, key: str, default, parse: Callable, **kwargs):
    """A widget whose value survives page changes and is mirrored in the URL as ?key=value.

    On a session's first run the value comes from the URL when it parses (an impossible value
    is refused with a warning and the default used). Pages sharing a key share the value
    (e.g. the temperature of pages 6 and 7).
    """
    value_key, widget_key = f"_v_{key}", f"_w_{key}"
    if value_key not in st.session_state:
        value = default
        raw = st.query_params.get(key)
        if raw is not None:
            try:
                value = parse(raw)
            except ValueError as err:
                st.warning(f"The link asked for {key} = {raw}, which cannot be used: {err}. "
                           f"Using {_url_text(default)} instead.")
        st.session_state[value_key] = value
    try:  # a value that fit the previous model may not fit this one (e.g. top-k > v)
        st.session_state[value_key] = parse(st.session_state[value_key])
    except ValueError:
        st.session_state[value_key] = default
    st.session_state[widget_key] = st.session_state[value_key]

    def keep() -> None:
        st.session_state[value_key] = st.session_state[widget_key]

    value = widget(label, key=widget_key, on_change=keep, **kwargs)
    st.session_state[value_key] = value
    set_url_param(key, value)
    return value


def set_control(key: str, value) -> None:
    """Change a control's value from a button callback (e.g. "next step")."""
    st.session_state[f"_v_{key}"] = value
    st.session_state[f"_w_{key}"] = value


def set_url_param(key: str, value) -> None:
    text = _url_text(value)
    if st.query_params.get(key) != text:
        st.query_params[key] = text


# ----------------------------------------------------------------------------- export

PLOT_CONFIG = {
    "displayModeBar": True,  # always visible, so students find the camera (PNG) button
    "displaylogo": False,
    # fewer buttons: the row stays short, and the camera is easy to spot
    "modeBarButtonsToRemove": ["lasso2d", "select2d", "zoomIn2d", "zoomOut2d", "autoScale2d"],
}
def plot_config(name: str) -> dict:
    """Plotly config: the camera button saves `name`.png at twice the screen resolution."""
    return {**PLOT_CONFIG, "toImageButtonOptions": {"format": "png", "filename": name,
                                                    "scale": 2}}


def csv_bytes(table: pd.DataFrame) -> bytes:
    """A table as UTF-8 CSV; the index is written when it labels the rows (tokens, stages...)."""
    labelled = table.index.name is not None or not isinstance(table.index, pd.RangeIndex)
    return table.to_csv(index=labelled, float_format="%.6g").encode("utf-8")


def show_chart(fig: go.Figure, name: str, table: pd.DataFrame | None = None,
               key: str | None = None) -> None:
    """Draw a chart with its PNG button; `table` (a DataFrame) becomes a CSV download.

    Every chart of the app goes through here. `name` is the file name (name.png, name.csv)
    and must be unique on the page (or pass a `key`).
    """
    st.plotly_chart(fig, width="stretch", config=plot_config(name), key=key)
    if table is not None:
        st.download_button(
            f"Numbers behind this chart (CSV, {len(table):,} rows)",
            lambda: csv_bytes(table),  # the CSV is built only when clicked
            file_name=f"{name}.csv", mime="text/csv", key=f"csv_{key or name}",
            on_click="ignore", icon=":material/download:",
        )


def grid_table(z: np.ndarray, row_labels: Sequence, col_labels: Sequence,
               rows: str = "row", columns: str = "column") -> pd.DataFrame:
    """A heatmap's numbers as a wide table: one row per y label, one column per x label.

    The corner cell of the CSV names both axes ("query \\ key"). Masked cells stay NaN / -inf.
    """
    index = pd.Index([str(label) for label in row_labels], name=f"{rows} \\ {columns}")
    return pd.DataFrame(np.asarray(z, dtype=np.float32), index=index,
                        columns=[str(label) for label in col_labels])


def series_table(columns: dict[str, np.ndarray], index: Sequence,
                 index_name: str) -> pd.DataFrame:
    """Same-length 1-D series side by side (the numbers of a bar or line chart), rows labelled."""
    return pd.DataFrame({name: np.asarray(values).ravel() for name, values in columns.items()},
                        index=pd.Index(list(index), name=index_name))


def lens_table(probs: np.ndarray, top_tokens: Sequence[Sequence[str]],
               stage_labels: Sequence[str], position_labels: Sequence[str]) -> pd.DataFrame:
    """A logit-lens grid as a long table: one row per (stage, position) cell.

    probs (S, m) = p(top token) and top_tokens (S lists of m strings), as logit_lens_figure.
    """
    S, m = probs.shape
    return pd.DataFrame({
        "stage": np.repeat(list(stage_labels), m),
        "position": list(position_labels) * S,
        "top token": [token for row in top_tokens for token in row],
        "p(top token)": np.asarray(probs, dtype=np.float32).ravel(),
    })


def text_download(text: str, name: str, label: str = "Download the text") -> None:
    st.download_button(label, text.encode("utf-8"), file_name=f"{name}.txt",
                       mime="text/plain", key=f"txt_{name}", on_click="ignore",
                       icon=":material/download:")


# ----------------------------------------------------------------------------- generation cache


@st.cache_resource(max_entries=8, show_spinner=False)
def _sequence_logits_cached(model_id: str, version: float, ids: tuple[int, ...], _model: GPT):
    logits = _model.forward(np.asarray(ids, dtype=np.int64)).astype(np.float32)  # (T, V)
    logits.flags.writeable = False
    return logits


def sequence_logits(state: AppState, ids: Sequence[int]) -> np.ndarray:
    """Logits (T, V) of the current model over any token sequence (cached, read-only)."""
    return _sequence_logits_cached(state.model_id, model_version(state.model_id),
                                   tuple(int(i) for i in ids), state.model)


# One generation at a time per process. A generation is thousands of tiny NumPy calls, each
# letting go of the GIL and taking it back; several at once in different sessions' threads
# queue for the GIL at every call, so all of them crawl and use more CPU than one after the
# other (bench/load.py, 100 students after a class of 60: p95 15.4 s without the lock,
# 1.1-2.4 s with it in two runs; server CPU 55 s -> 31-37 s). Students wait in line instead.
_GENERATION_LOCK = threading.Lock()


# a result is small (7 KB greedy, ~160 KB for 6 beams x 100 tokens): room for a whole class
@st.cache_resource(max_entries=128, show_spinner="Generating…")
def _generation_cached(model_id: str, version: float, ids: tuple[int, ...], settings: tuple,
                       _model: GPT):
    from tinygpt.decoding import generate

    with _GENERATION_LOCK:
        t0 = time.perf_counter()
        result = generate(_model, np.asarray(ids, dtype=np.int64), record_steps=False,
                          **dict(settings))
        return result, time.perf_counter() - t0


def generation(state: AppState, ids: Sequence[int] | None = None, **settings):
    """(GenerationResult, seconds) of tinygpt.decoding.generate on `ids` (default: the prompt),
    cached per (model, prompt ids, settings). Steps keep the chosen token and the draw u, not
    the vocabulary-sized arrays (those are recomputed for the one step being looked at)."""
    ids = state.ids if ids is None else ids
    return _generation_cached(state.model_id, model_version(state.model_id),
                              tuple(int(i) for i in ids), tuple(sorted(settings.items())),
                              state.model)


# ----------------------------------------------------------------------------- training jobs

# At most this many trainings run at once on the server (all sessions together): a class of
# students shares a few CPU cores, and the pages must stay quick for everyone.
MAX_TRAININGS = int(os.environ.get("TINYGPT_MAX_TRAININGS", "1"))
_TRAINING_LOCK = threading.Lock()
_trainings_running = 0


def trainings_running() -> int:
    return _trainings_running


def _take_training_slot() -> bool:
    global _trainings_running
    with _TRAINING_LOCK:
        if _trainings_running >= MAX_TRAININGS:
            return False
        _trainings_running += 1
        return True


def _give_back_training_slot() -> None:
    global _trainings_running
    with _TRAINING_LOCK:
        _trainings_running -= 1


class TrainingJob:
    """One training run in a background thread, owned by one session.

    The thread only calls `Trainer.run`; its callback appends each StepRecord here. The page
    reads `records()` on a timer, so the server keeps answering other users meanwhile (NumPy
    releases the GIL inside its matrix products).
    """

    def __init__(self, name: str, trainer, tokenizer, about: str = "") -> None:
        self.name = name
        self.trainer = trainer
        self.tokenizer = tokenizer
        self.about = about  # what it trains on, for the page
        self.max_steps = trainer.config.max_steps
        self.time_limit = trainer.config.time_limit or float("inf")
        self.params = trainer.model.num_parameters()
        self.vocab = trainer.model.config.vocab_size
        self.error: str | None = None
        self.stopped = False  # the user pressed stop
        self.model_id: str | None = None  # set once the model is registered
        self.started = self.ended = 0.0
        self._records: list = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start training; False (and nothing started) when the server is at its limit."""
        if not _take_training_slot():
            return False
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"train-{self.name}",
                                        daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        try:
            self.trainer.run(self._keep)
        except Exception as err:  # noqa: BLE001 - shown on the page, never lost in a thread
            log.exception("training failed")
            self.error = f"{type(err).__name__}: {err}"
        finally:
            self.ended = time.monotonic()
            _give_back_training_slot()
            self._done.set()

    def _keep(self, record) -> None:
        with self._lock:
            self._records.append(record)

    def records(self) -> list:
        with self._lock:
            return list(self._records)

    def stop(self) -> None:
        self.stopped = True
        self.trainer.stop()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def seconds(self) -> float:
        if not self.started:
            return 0.0
        return (self.ended or time.monotonic()) - self.started  # frozen once it ends


# ----------------------------------------------------------------------------- part 2 charts

KEPT_COLOUR, REMOVED_COLOUR, PICKED_COLOUR = "#0072B2", "#E69F00", "#D55E00"  # Okabe-Ito
FADED = "#c8c8c8"


def sampling_bars_figure(labels: Sequence[str], probs: np.ndarray, kept: np.ndarray,
                         title: str, picked: int | None = None,
                         y_title: str = "probability") -> go.Figure:
    """Bars of ranked probabilities: blue = can still be picked, orange = cut by top-k/top-p.

    labels, probs, kept: (m,) in rank order; picked: index (in those m) of the chosen token.
    """
    p = np.asarray(probs, dtype=np.float32)
    kept = np.asarray(kept, dtype=bool)
    traces = []
    for name, mask, colour in (("kept", kept, KEPT_COLOUR),
                               ("removed", ~kept, REMOVED_COLOUR)):
        idx = np.flatnonzero(mask)
        traces.append(dict(
            type="bar", x=[labels[i] for i in idx], y=p[idx], name=name,
            marker=dict(color=colour),
            hovertemplate="%{x}: p = %{y:.4f}<extra>" + name + "</extra>",
        ))
    notes = []
    if picked is not None and 0 <= picked < len(p):
        notes.append(dict(x=labels[picked], y=float(p[picked]), text="picked", showarrow=True,
                          arrowhead=2, ax=0, ay=-30, font=dict(color=PICKED_COLOUR)))
    return figure(
        traces, title, 340, barmode="overlay", annotations=notes,
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        xaxis=dict(type="category", categoryorder="array", categoryarray=list(labels),
                   tickangle=-60, title=dict(text="token, most likely first")),
        yaxis=dict(title=dict(text=y_title), rangemode="tozero"),
    )


def cumulative_figure(cumulative: np.ndarray, top_p: float | None, n_kept: int,
                      title: str) -> go.Figure:
    """Cumulative probability by rank (what top-p reads): the p line and the cutoff marked.

    cumulative (m,): running sum over the ranked tokens (m may be fewer than v); the first
    n_kept ranks survive the filters.
    """
    c = np.asarray(cumulative, dtype=np.float32)
    ranks = np.arange(1, len(c) + 1)
    k = int(min(max(n_kept, 1), len(c)))
    traces = [dict(type="scatter", x=ranks[:k], y=c[:k], name="kept", mode="lines+markers",
                   fill="tozeroy", line=dict(color=KEPT_COLOUR), marker=dict(size=4),
                   hovertemplate="rank %{x}: cumulative %{y:.4f}<extra>kept</extra>")]
    if k < len(c):
        traces.append(dict(type="scatter", x=ranks[k - 1:], y=c[k - 1:], name="removed",
                           mode="lines", line=dict(color=REMOVED_COLOUR),
                           hovertemplate="rank %{x}: cumulative %{y:.4f}<extra>removed</extra>"))
    shapes = [_vline(k + 0.5, "dot", PICKED_COLOUR)]
    notes = [dict(x=k + 0.5, y=0.02, yref="y", text=f"cutoff after rank {k}", showarrow=False,
                  xanchor="left", font=dict(color=PICKED_COLOUR))]
    if top_p is not None:
        shapes.append(dict(type="line", x0=0, x1=1, xref="paper", y0=top_p, y1=top_p,
                           line=dict(dash="dash", color="#444", width=1.5)))
        notes.append(dict(x=1, xref="paper", y=top_p, text=f"top-p = {top_p:g}",
                          showarrow=False, xanchor="right", yanchor="bottom"))
    return figure(traces, title, 320, shapes=shapes, annotations=notes,
                  legend=dict(orientation="h", y=-0.3),
                  xaxis=dict(title=dict(text="rank (1 = most likely)")),
                  yaxis=dict(title=dict(text="cumulative probability"), range=[0, 1.05]))


def renormalised_figure(labels: Sequence[str], before: np.ndarray, after: np.ndarray,
                        title: str) -> go.Figure:
    """The kept tokens' probability before the cut and after renormalising (sum back to 1)."""
    traces = [dict(type="bar", x=list(labels), y=np.asarray(values, dtype=np.float32),
                   name=name, marker=dict(color=colour),
                   hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>")
              for name, values, colour in (("before the cut", before, FADED),
                                           ("after renormalising", after, KEPT_COLOUR))]
    return figure(traces, title, 320, barmode="group",
                  legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                  xaxis=dict(type="category", tickangle=-60),
                  yaxis=dict(title=dict(text="probability"), rangemode="tozero"))


def draw_bar_figure(starts: np.ndarray, widths: np.ndarray, labels: Sequence[str], u: float,
                    picked_segment: int, title: str) -> go.Figure:
    """The cumulative bar [0, 1): one segment per token (small ones merged, grey), the draw u
    as a line, and the segment it falls in highlighted."""
    n = len(widths)
    colours = [FADED if lab.startswith("…") else ("#56B4E9" if i % 2 else KEPT_COLOUR)
               for i, lab in enumerate(labels)]
    if 0 <= picked_segment < n:
        colours[picked_segment] = PICKED_COLOUR
    trace = dict(
        type="bar", y=["draw"] * n, x=np.asarray(widths, dtype=np.float32),
        base=np.asarray(starts, dtype=np.float32), orientation="h",
        marker=dict(color=colours, line=dict(color="white", width=0.5)),
        customdata=np.asarray(labels, dtype=object),
        hovertemplate="%{customdata}<br>from %{base:.4f}, width %{x:.4f}<extra></extra>",
    )
    return figure(
        [trace], title, 200, showlegend=False, barmode="overlay",
        shapes=[dict(type="line", x0=u, x1=u, y0=-0.6, y1=0.6,
                     line=dict(color="black", width=3))],
        annotations=[dict(x=u, y=0.6, text=f"u = {u:.4f}", showarrow=False,
                          yanchor="bottom")],
        xaxis=dict(range=[0, 1], title=dict(text="cumulative probability (tokens in id order)")),
        yaxis=dict(showticklabels=False),
    )


BEAM_STYLE = {  # status -> (colour, symbol, opacity)
    "running": (KEPT_COLOUR, "circle", 1.0),
    "finished": ("#009E73", "star", 1.0),
    "finished_discarded": ("#009E73", "star-open", 0.35),
    "dropped": ("#999999", "circle-open", 0.35),
}


def beam_tree_figure(steps: np.ndarray, ranks: np.ndarray, parents: np.ndarray,
                     statuses: Sequence[str], texts: Sequence[str], scores: np.ndarray,
                     winning: np.ndarray, title: str, root_text: str = "prompt") -> go.Figure:
    """The beam tree: x = step, y = rank among the candidates kept at that step.

    One node per candidate (from tinygpt.readouts.beam_tree); parents[i] = -1 links to the
    prompt. Running beams are blue, finished hypotheses green stars, pruned ones faded; the
    returned hypothesis's path is drawn thick.
    """
    steps = np.asarray(steps)
    ranks = np.asarray(ranks)
    root_x = int(steps.min()) - 1 if len(steps) else -1  # the prompt (or the steps before)
    traces = []
    for kind in ("pruned", "kept", "winner"):  # edges, faint first so strong ones sit on top
        xs, ys = [], []
        for i, parent in enumerate(parents):
            is_kind = ("winner" if winning[i] else
                       "kept" if statuses[i] in ("running", "finished") else "pruned")
            if is_kind != kind:
                continue
            x0, y0 = (steps[parent], ranks[parent]) if parent >= 0 else (root_x, 0)
            xs += [float(x0), float(steps[i]), None]
            ys += [float(y0), float(ranks[i]), None]
        width, colour = {"pruned": (1, FADED), "kept": (1.5, "#7aa6c9"),
                         "winner": (4, PICKED_COLOUR)}[kind]
        traces.append(dict(type="scatter", x=xs, y=ys, mode="lines",
                           line=dict(width=width, color=colour), hoverinfo="skip",
                           showlegend=kind == "winner",
                           name={"winner": "returned hypothesis"}.get(kind, f"{kind} edge")))
    for status, (colour, symbol, opacity) in BEAM_STYLE.items():
        idx = [i for i, s in enumerate(statuses) if s == status]
        if not idx:
            continue
        traces.append(dict(
            type="scatter", x=steps[idx], y=ranks[idx], mode="markers+text",
            name=status.replace("_", " "), text=[texts[i] for i in idx],
            textposition="top center", textfont=dict(size=10), opacity=opacity,
            marker=dict(color=colour, symbol=symbol, size=11 if status != "dropped" else 8),
            customdata=np.asarray([[texts[i], scores[i]] for i in idx], dtype=object),
            hovertemplate="%{customdata[0]}<br>score (sum of log p) %{customdata[1]:.3f}"
                          "<extra>" + status + "</extra>",
        ))
    traces.append(dict(type="scatter", x=[root_x], y=[0], mode="markers+text", text=[root_text],
                       textposition="middle left", marker=dict(color="black", size=10),
                       showlegend=False, hoverinfo="skip"))
    last = int(steps.max()) if len(steps) else 0
    return figure(traces, title, max(320, 70 * (int(ranks.max(initial=0)) + 2)),
                  legend=dict(orientation="h", y=-0.2),
                  xaxis=dict(title=dict(text="step (new token number)"),
                             range=[root_x - 0.7, last + 0.5]),
                  yaxis=dict(title=dict(text="rank at that step"), autorange="reversed",
                             dtick=1))


def loss_curve_figure(steps: np.ndarray, train_loss: np.ndarray, val_steps: np.ndarray,
                      val_loss: np.ndarray, title: str, floor: float | None = None) -> go.Figure:
    """Training loss per step (thin) and validation loss at its checkpoints (markers)."""
    traces = [
        dict(type="scatter", x=np.asarray(steps), y=np.asarray(train_loss, dtype=np.float32),
             mode="lines", name="training batch", line=dict(color=KEPT_COLOUR),
             hovertemplate="step %{x}: %{y:.3f}<extra>train</extra>"),
        dict(type="scatter", x=np.asarray(val_steps), y=np.asarray(val_loss, dtype=np.float32),
             mode="lines+markers", name="validation",
             line=dict(color=REMOVED_COLOUR, width=3),
             hovertemplate="step %{x}: %{y:.3f}<extra>validation</extra>"),
    ]
    shapes, notes = [], []
    if floor is not None:  # the loss of guessing uniformly over the vocabulary
        shapes.append(dict(type="line", x0=0, x1=1, xref="paper", y0=floor, y1=floor,
                           line=dict(dash="dot", color="#888")))
        notes.append(dict(x=0, xref="paper", y=floor, text="uniform guess: ln v",
                          showarrow=False, xanchor="left", yanchor="bottom"))
    return figure(traces, title, 360, shapes=shapes, annotations=notes,
                  legend=dict(orientation="h", y=-0.25),
                  xaxis=dict(title=dict(text="step"), rangemode="tozero"),
                  yaxis=dict(title=dict(text="cross-entropy (nats per token)")))
