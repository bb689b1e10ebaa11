"""The page controls a page, a link, a class or a lesson file can set: each name declared once,
with its kind and range, so that the Sampling and Decoding pages and the lesson files
(tinygpt_hosting.classroom.lesson.loader) read the same bounds.

A control whose top depends on the model (top-k: at most the vocabulary; a layer: at most the
model's layers) has `hi=None` here and is given its top where the model is known (`parse(hi)`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinygpt_app.kit.state import in_range, one_of

MAX_SEED = 2**31 - 1
MAX_NEW = 100  # new tokens a decoding run writes at most
MAX_BEAMS = 6


@dataclass(frozen=True)
class ControlSpec:
    """One control: its shared name (?name= in a link), kind, default and range."""

    name: str
    kind: type  # int, float or str
    default: object
    lo: float = 0
    hi: float | None = None  # None: bounded by the model (see `bound`)
    options: tuple[str, ...] = ()  # a choice among words (kind str)
    bound: str = ""  # what bounds it above when hi is None, in words

    def parse(self, hi: float | None = None) -> Callable[[object], object]:
        """The parser of this control's values (ValueError outside its range); `hi` is the
        model's bound for a control declared with hi=None (else no bound above is checked)."""
        if self.options:
            return one_of(self.options)
        top = self.hi if self.hi is not None else (hi if hi is not None else 2.0**53)
        return in_range(self.lo, top, self.kind)

    def describe(self) -> str:
        """Its range in words, for docs and error messages."""
        if self.options:
            return "one of " + ", ".join(repr(o) for o in self.options)
        kind = "a whole number" if self.kind is int else "a number"
        top = f"{self.hi:g}" if self.hi is not None else self.bound
        return f"{kind} from {self.lo:g} to {top}"


TEMPERATURE = ControlSpec("temperature", float, 1.0, 0.0, 3.0)
TOP_K = ControlSpec("top_k", int, 0, 0, None, bound="the model's vocabulary size (0 = off)")
TOP_P = ControlSpec("top_p", float, 0.9, 0.01, 1.0)
SEED = ControlSpec("seed", int, 0, 0, MAX_SEED)
NEW = ControlSpec("new", int, 20, 1, MAX_NEW)
BEAMS = ControlSpec("beams", int, 3, 1, MAX_BEAMS)
STRATEGY = ControlSpec("strategy", str, "sample", options=("greedy", "sample"))
LAYER = ControlSpec("layer", int, 0, 0, None, bound="the model's last layer")
HEAD = ControlSpec("head", int, 0, 0, None, bound="the model's last head")
LESSON_STEP = ControlSpec("lesson_step", int, 1, 1, None, bound="the Lesson page's last step")

# the controls a lesson step may set, by their shared name
CONTROLS: dict[str, ControlSpec] = {spec.name: spec for spec in (
    TEMPERATURE, TOP_K, TOP_P, SEED, NEW, BEAMS, STRATEGY, LAYER, HEAD, LESSON_STEP)}
