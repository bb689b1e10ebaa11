"""A page control declared as data: its shared name, its kind, its default and its range, and
the parser that holds a value to them (a link's text, a widget's value, a lesson file's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tinygpt_app.kit.state import in_range, many, one_of, pair_in, parse_flag

NO_TOP = 2.0**53  # a top bounded by the model, when the model is not known: none checked


@dataclass(frozen=True)
class ControlSpec:
    """One control: its shared name (?name= in a link), kind, default and range.

    kind is int, float, str, bool, list or tuple (a span: two whole numbers in lo … hi, the
    first at most the second, as a range slider gives them). A number is in lo … hi; a word
    is one of `options`; a text has at most `max_chars` characters; a list has at most `cap`
    entries, each a "block.index" pair (`item` names the index: "heads", "neurons") or,
    without `item`, one of the choices or a whole number in lo … hi. A range whose top
    depends on the model or the prompt has hi=None and `bound` says what bounds it; a choice
    among what the page offers (tokens, a prompt's positions, labels of this model's blocks)
    has `choice` set and `bound` says what is offered. The page gives either where it knows
    it (`parse(hi)`, `parse(choices=...)`)."""

    name: str
    kind: type
    default: object
    lo: float = 0
    hi: float | None = None
    options: tuple = ()
    bound: str = ""
    max_chars: int = 0
    cap: int = 0
    item: str = ""
    choice: bool = False

    @property
    def settable(self) -> bool:
        """Whether a lesson file can set it: its range is known without the page (a choice
        among what a page offers, a list or a text is not)."""
        return self.kind not in (list, tuple) and not self.choice and not self.max_chars

    def parse(self, hi: float | None = None, *, choices: Sequence | None = None,
              per: int | None = None) -> Callable[[object], object]:
        """The parser of this control's values (ValueError outside its range). `hi` is the
        page's top for a control declared with hi=None (else no top is checked), or a lower
        top than the declared one (Chat's answer is shorter than a decoding run); `choices`
        what the page offers for a choice; `per` the second bound of a list of pairs."""
        if self.kind is bool:
            return parse_flag
        options = tuple(choices) if choices is not None else self.options
        top = _top(self.hi, hi)
        if self.kind is tuple:
            return _span(in_range(self.lo, top, int))
        if self.kind is list:
            return many(self._item(options, top, per), self.cap, self._entries(top, per))
        if options or self.choice:
            return one_of(options)
        if self.max_chars:
            return self._text
        return in_range(self.lo, top, self.kind)

    def _item(self, options: tuple, top: float, per: int | None) -> Callable:
        if self.item:
            return pair_in(int(min(top, 10**6)), per if per is not None else 10**6)
        return one_of(options) if options or self.choice else in_range(self.lo, top, int)

    def _entries(self, top: float, per: int | None) -> str:
        """What a list's entries may be, in words (for the note on a refused entry)."""
        if self.item:
            return f"blocks 0 … {top - 1:g}, {self.item} 0 … {(per or 10**6) - 1:g}"
        if self.choice:
            return self.bound
        return f"{self.lo:g} … {top:g}"

    def _text(self, raw: object) -> str:
        return str(raw)[:self.max_chars]

    def describe(self) -> str:
        """Its range in words, for docs and error messages."""
        if self.kind is bool:
            return "on or off (true or false)"
        if self.options:
            return "one of " + ", ".join(repr(o) for o in self.options)
        if self.choice:
            return f"one of {self.bound}"
        if self.kind is tuple:
            return (f"two whole numbers from {self.lo:g} to {self.bound}, the first at most "
                    "the second")
        if self.kind is list:
            return f"a list of at most {self.cap} {self.item or self.bound}"
        if self.max_chars:
            return f"a text of at most {self.max_chars:,} characters"
        kind = "a whole number" if self.kind is int else "a number"
        top = _number(self.hi) if self.hi is not None else self.bound
        return f"{kind} from {_number(self.lo)} to {top}"


def _top(declared: float | None, page: float | None) -> float:
    """The top a value is held to: the declared one, lowered by the page's if it gives one."""
    if declared is None:
        return NO_TOP if page is None else page
    return declared if page is None else min(declared, page)


def pairs(entries: list[str]) -> list[tuple[int, int]]:
    """The (block, index) pairs of a list control's "block.index" entries."""
    return [(int(a), int(b)) for a, b in (entry.split(".") for entry in entries)]


def _span(parse_end: Callable[[object], object]) -> Callable[[object], tuple]:
    """A parser for a span "a,b" (or a pair from a range slider), each end by `parse_end`."""

    def parse(raw: object) -> tuple:
        ends = raw.split(",", 2) if isinstance(raw, str) else list(raw)[:3]
        if len(ends) != 2:
            raise ValueError("is not two numbers")
        first, last = (parse_end(end) for end in ends)
        if first > last:
            raise ValueError("starts after it ends")
        return first, last

    return parse


def _number(x: float) -> str:
    """A bound in words: 2,147,483,647, 0.01."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"
