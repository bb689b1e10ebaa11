"""Figures shared by every session of one server process.

A class asks for the same views at once: thirty students follow the teacher to the same page,
prompt and position, or open the lesson's default prompt. Each of their page runs computes the
same readouts (cached already) and then builds the same Plotly figures, and building a figure
(Plotly checks every property) and turning it into a dict cost more than the model's forward.

So the app builds a figure once. `charts.common.figure` is the one constructor of every chart;
once `install()` has run it asks this store first, keyed on a digest of exactly what it was
given (every array's dtype, shape and bytes, every string and number). Two calls with equal
inputs make equal figures, so a hit is the figure the call would have built. A hit is a
`SharedFigure`: the built figure's dict, which st.plotly_chart sends as it is. It is read-only;
a copy (`go.Figure(fig.to_dict())`) can be changed.

The store is bounded by bytes (TINYGPT_FIGURE_CACHE_MB) and forgets the least recently used.
Charts built outside the app (a notebook, the chart tests) are ordinary Plotly figures.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

import numpy as np
from plotly.basedatatypes import BaseFigure

from tinygpt_app.charts import common
from tinygpt_app.compute.shared_cache import SharedCache

_KINDS = {str: b"s", int: b"i", float: b"f", bool: b"b", type(None): b"n"}


class SharedFigure(BaseFigure):
    """A figure built before: its validated dict, shown as it is (st.plotly_chart asks a
    BaseFigure for `to_dict()` and sends that). Plotly's own constructor is not run."""

    def __init__(self, spec: dict, nbytes: int) -> None:  # noqa: D107 - no BaseFigure.__init__
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "nbytes", nbytes)

    def to_dict(self) -> dict:
        return self._spec

    def __repr__(self) -> str:
        return f"SharedFigure({self.nbytes:,} bytes)"


def digest(value, h=None) -> bytes:
    """A digest of a figure's inputs: dicts, lists, tuples, arrays, strings, numbers, None.

    Anything else raises TypeError (the figure is then built without the store)."""
    top = h is None
    h = hashlib.blake2b(digest_size=20) if top else h
    if isinstance(value, np.ndarray):
        h.update(b"a" + str(value.dtype).encode() + repr(value.shape).encode())
        h.update(np.ascontiguousarray(value).data if value.dtype != object else
                 digest(value.tolist()))
    elif isinstance(value, dict):
        h.update(b"d%d" % len(value))
        for key, item in value.items():
            digest(key, h)
            digest(item, h)
    elif isinstance(value, (list, tuple)):
        h.update(b"l%d" % len(value))
        if all(type(item) in _KINDS for item in value):  # labels, ticks: one repr, in C
            h.update(repr(list(value)).encode())  # exact: 1, 1.0, True and '1' differ
        else:
            for item in value:
                digest(item, h)
    elif isinstance(value, np.generic):
        digest(value.item(), h)
    elif type(value) in _KINDS:
        text = repr(value).encode()
        h.update(_KINDS[type(value)] + b"%d:" % len(text) + text)
    else:
        raise TypeError(f"cannot digest {type(value).__name__}")
    return h.digest() if top else b""


def spec_bytes(value) -> int:
    """Roughly the memory a figure dict holds: its arrays' bytes and its strings' lengths."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes) + 100
    if isinstance(value, dict):
        return sum(spec_bytes(k) + spec_bytes(v) for k, v in value.items()) + 100
    if isinstance(value, (list, tuple)):
        return sum(spec_bytes(v) for v in value) + 60
    if isinstance(value, str):
        return len(value) + 50
    return 32


class FigureStore:
    """Built figures by digest of their inputs, least recently used forgotten past `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        # the figures, weighed by their specs' bytes (figures.nbytes <= figures.max_bytes)
        self.figures = SharedCache(max_bytes, sizeof=lambda shared: shared.nbytes)
        self.hits = self.misses = 0  # counted without a lock: a close count is enough

    def get(self, inputs, build: Callable[[], BaseFigure]) -> BaseFigure:
        try:
            key = digest(inputs)
        except TypeError:
            return build()
        shared = self.figures.get(key)
        if shared is not None:
            self.hits += 1
            return shared
        self.misses += 1
        spec = build().to_dict()  # built outside the lock: other sessions go on meanwhile
        return self.figures.setdefault(key, SharedFigure(spec, spec_bytes(spec)))

    def __len__(self) -> int:
        return len(self.figures)


_installed: FigureStore | None = None
_install_lock = threading.Lock()


def install(max_bytes: int) -> FigureStore:
    """Share figures in this process from now on (once; later calls return the same store)."""
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = FigureStore(max_bytes)
            common.share_figures(_installed.get)
        return _installed


def store() -> FigureStore | None:
    return _installed
