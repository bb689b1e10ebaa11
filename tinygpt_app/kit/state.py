"""What a session remembers, and the link that reproduces it.

The prompt, the model and the position are plain session_state values (``KEY_*``), shared by
every page and mirrored into the URL (``?model=...&prompt=...&pos=...``). Page controls
(temperature, seed, ...; each declared once in kit.controls) work the same way through
``control``: a widget whose value survives a change of page and travels in the link.

Widget keys are fixed names prefixed by the page's name ("sampling.temperature",
"sidebar.prompt"): never a key that changes with the prompt, so session_state stays the same
size however many prompts a student tries.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import streamlit as st

from tinygpt.network.model import GPT, GPTConfig
from tinygpt.readouts.parts import ModelParts, parts_of
from tinygpt_app.compute.models import (
    SESSION_MODEL_BYTES,
    default_model_id,
    load_model,
)
from tinygpt_app.kit import (
    link_notes,
    slots,  # noqa: F401 - plugs in where a session keeps its trained models
    wire_check,
)
from tinygpt_app.kit.plain_text import cut, plain

MAX_PROMPT_CHARS = 20_000  # longer pasted text is cut, with a note
MAX_URL_PROMPT_CHARS = 2_000  # longer prompts are not mirrored into the URL
# The app inspects at most this many tokens: GPT-2 reads 1024, but a 1024-token trace of it
# holds ~2 GB of attention maps alone.
MAX_APP_TOKENS = 256
# What one session keeps (st.session_state) is bounded in bytes at its sources, not trimmed
# afterwards: the prompt is cut (MAX_PROMPT_CHARS), every other kept value is a setting, a
# position or a short id, and the models trained in the session are bounded by
# SESSION_MODEL_BYTES. Heavy results (traces, runs, figures) live in the shared caches, bounded
# by bytes for the whole process. So a session weighs at most this plus its trained models
# (tests/tinygpt_app/kit/test_state.py walks the pages and weighs it: 44 kB with the longest
# prompt, twice 20 kB). The bound holds every slot's own bound together (kit.slots: the app's,
# the pages' and the hosting wing's, 4.2 MB, most of it a teacher's three 1 MB slots, the
# class's results, its view and the lesson, and a training's text in line) and the prompt;
# tests/tinygpt_app/kit/test_slots.py adds them up.
SESSION_STATE_BYTES = 8 * 2**20


SESSION_BYTES = SESSION_STATE_BYTES + SESSION_MODEL_BYTES  # one session's own memory, at most
# Two lines of Romeo's balcony speech the shipped model learned well: after the last "it" it is
# sure of "·is" (top-1 about 0.7) while one position back, after ",", it hesitates (about 0.06),
# and greedy decoding writes a long line before it stops. Both are checked on the shipped model
# (tests/tinygpt_app/kit/test_state.py), not assumed.
DEFAULT_PROMPT = ("ROMEO:\nBut soft, what light through yonder window breaks?\n"
                  "It is my lady; O, it")
# What a real model (one trained to chat: its files carry a chat template) starts from: a
# fact it is sure of (SmolLM2-135M-Instruct: "·Paris" at about 0.77, issue 43).
FACT_PROMPT = "The capital of France is"

# session_state values shared by every page (the widgets that edit them are W_*)
KEY_PROMPT, KEY_MODEL, KEY_POS = "prompt", "model", "pos"
W_PROMPT, W_MODEL, W_POS = "sidebar.prompt", "sidebar.model", "sidebar.position"
MODEL_ERROR = "sidebar.model_error"
POS_N = "sidebar.position_count"  # number of positions at the last run
PROMPT_CUT = "sidebar.prompt_cut"  # True when the pasted prompt was too long


def _config_size(name: str, doc: str) -> property:
    """A read-only size of the model, taken from its config by `name`."""
    return property(lambda state: getattr(state.config, name), doc=doc)


@dataclass
class AppState:
    """What every page needs to know: the model, the prompt as token ids, the position: its
    view (`view`: the session's one typed view state) with what it computes to."""

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
        """False for an empty prompt: nothing to inspect yet."""
        return len(self.ids) > 0

    @property
    def config(self) -> GPTConfig:
        return self.model.config

    @property
    def n(self) -> int:
        return len(self.ids)

    # the model's sizes, read off its config under the names the pages' formulas use
    d = _config_size("n_embd", "d: the width of the residual stream")
    v = _config_size("vocab_size", "v: the number of tokens in the vocabulary")
    n_layer = _config_size("n_layer", "the number of blocks")
    n_head = _config_size("n_head", "the number of attention heads in a block")
    head_size = _config_size("head_size", "the width of one head")

    @property
    def parts(self) -> ModelParts:
        """This model's parts in words and formulas (its norm, its MLP, its output layer)."""
        return parts_of(self.config)

    @property
    def view(self) -> View:
        """The view this state shows (its typed, serialisable part: kit.state.View), with the
        page controls as they are now."""
        return View(self.model_id, self.prompt, self.position, control_values())

    def sizes(self) -> str:
        """The live sizes for the current prompt, for captions."""
        return (f"n = {self.n} tokens · d = {self.d} · v = {self.v:,} · "
                f"{self.n_layer} blocks · {self.n_head} heads of size {self.head_size}")


# ----------------------------------------------------------------------------- prompt, model, pos


def init_from_url() -> None:
    """On a session's first run, take prompt / model / position from the URL if given."""
    if KEY_PROMPT in st.session_state:
        return
    params = st.query_params
    st.session_state[KEY_MODEL] = params.get("model") or default_model_id()
    prompt = params.get("prompt")
    if prompt is None:
        prompt = default_prompt(st.session_state[KEY_MODEL])
    st.session_state[KEY_PROMPT] = prompt[:MAX_PROMPT_CHARS]
    try:  # -1: the last position
        st.session_state[KEY_POS] = in_range(-1, 10**9, int)(params.get("pos", -1))
    except ValueError:
        st.session_state[KEY_POS] = -1


def default_prompt(model_id: str) -> str:
    """The prompt a session starts from on this model: a fact for a real chat model, Romeo's
    lines for the Shakespeare models (and for a model that cannot be loaded: the sidebar says
    why)."""
    try:
        _, tokenizer = load_model(model_id)
    except Exception:  # noqa: BLE001 - the sidebar loads it again and shows the error
        return DEFAULT_PROMPT
    return FACT_PROMPT if getattr(tokenizer, "chat_template", None) is not None else DEFAULT_PROMPT


def follow_model(model_id: str) -> None:
    """A new model: a prompt still one of the defaults becomes the new model's default."""
    if st.session_state.get(KEY_PROMPT) in (DEFAULT_PROMPT, FACT_PROMPT):
        st.session_state[KEY_PROMPT] = default_prompt(model_id)


def sync_url(model_id: str, prompt: str, position: int) -> None:
    """Mirror the state into the URL so that copying the link reproduces this view (the page
    controls are mirrored by `control` as each is drawn)."""
    params = View(model_id, prompt, position).url_params()
    for key, value in params.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    if "prompt" not in params and "prompt" in st.query_params:
        del st.query_params["prompt"]


def link_note(prompt: str) -> str | None:
    """What the link leaves out, said once under the prompt: a prompt too long for a URL."""
    if len(prompt) <= MAX_URL_PROMPT_CHARS:
        return None
    return (f"The link keeps the model, the position and the controls but not this prompt: "
            f"it has {len(prompt):,} characters and a link carries at most "
            f"{MAX_URL_PROMPT_CHARS:,}. Share the text itself with the link.")


def use_prompt(text: str) -> None:
    """Make `text` the prompt, inspected at its last token (call from a widget callback)."""
    st.session_state[KEY_PROMPT] = text[:MAX_PROMPT_CHARS]
    st.session_state[W_PROMPT] = st.session_state[KEY_PROMPT]
    st.session_state[KEY_POS] = -1  # -1: the last position (see frame._position_select)


def use_position(position: int) -> None:
    """Inspect `position` (call from a widget callback, before the sidebar is drawn)."""
    st.session_state[KEY_POS] = int(position)


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


def use_model(model_id: str) -> None:
    """Make model_id the current model (call from a widget callback, before the sidebar)."""
    st.session_state[KEY_MODEL] = model_id
    st.session_state[W_MODEL] = model_id
    st.session_state.pop(MODEL_ERROR, None)


@dataclass(frozen=True)
class View:
    """What a link reproduces and a class shares: the model, the prompt, the position (-1: the
    last) and the page controls by shared name. The session's own values are its one copy;
    the URL (`sync_url`, `control`), the sidebar's widgets and the class's publish and follow
    (`current_view`, `take_view`) are serialisations of them."""

    model_id: str | None
    prompt: str
    position: int = -1
    controls: dict[str, object] = field(default_factory=dict)

    def url_params(self) -> dict[str, str]:
        """The view as its link holds it: ?model=&pos=&prompt= (a prompt too long for a link
        left out: `link_note` says so) and each control as ?name=."""
        params = {"model": str(self.model_id), "pos": str(self.position)}
        if len(self.prompt) <= MAX_URL_PROMPT_CHARS:
            params["prompt"] = self.prompt
        return params | {name: url_text(value) for name, value in self.controls.items()}


def current_view() -> View:
    """This session's view now."""
    position = st.session_state.get(KEY_POS, -1)
    return View(st.session_state.get(KEY_MODEL), st.session_state.get(KEY_PROMPT, ""),
                position if isinstance(position, int) else -1, control_values())


def take_view(view: View, *, models: Sequence[str]) -> None:
    """Make `view` this session's (the teacher's, a lesson step's): its prompt, position and
    controls, and its model when it is one of `models` (call before the sidebar is drawn)."""
    st.session_state[KEY_PROMPT] = view.prompt[:MAX_PROMPT_CHARS]
    st.session_state[KEY_POS] = view.position
    st.session_state.pop(POS_N, None)  # the position is the view's, not "the last one"
    for name, value in view.controls.items():
        take_control(name, value)
    if view.model_id in models:
        st.session_state[KEY_MODEL] = view.model_id
        st.session_state.pop(MODEL_ERROR, None)


# ----------------------------------------------------------------------------- page controls


# what a number in a link may look like: ASCII digits only (no "١٢", "1_000", " 3", "inf")
_NUMBER = re.compile(r"[+-]?(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})"
                     r"(?:[eE][+-]?[0-9]{1,3})?")


def parse_number(raw: object) -> float:
    """A finite float from a link's text (or from a widget's number), strictly; ValueError."""
    if isinstance(raw, bool):
        raise ValueError("is not a number")
    if isinstance(raw, numbers.Real):
        number = float(raw)
    elif isinstance(raw, str) and _NUMBER.fullmatch(raw):
        number = float(raw)
    else:
        raise ValueError("is not a number")
    if not math.isfinite(number):
        raise ValueError("is not a finite number")
    return number


def in_range(lo: float, hi: float, kind: type = float) -> Callable[[object], object]:
    """A parser for control values: kind(text), refused (ValueError) outside [lo, hi].

    The messages never repeat the value: they end up in a warning, and the value came from a
    link anyone can write.
    """

    def parse(raw: object) -> object:
        number = parse_number(raw)
        if kind is int and not number.is_integer():
            raise ValueError("is not a whole number")
        if not lo <= number <= hi:
            raise ValueError(f"is outside {lo:g} … {hi:g}")
        return int(number) if kind is int else kind(number)

    return parse


def one_of(options: Sequence) -> Callable[[object], object]:
    """A parser for a choice among options (compared as text, as the URL holds text)."""

    def parse(raw: object) -> object:
        for option in options:
            if str(option) == str(raw):
                return option
        raise ValueError(f"is not one of {', '.join(map(str, options))}")

    return parse


def parse_flag(raw: object) -> bool:
    """On / off from a link ("1" / "0", "true" / "false") or from the toggle (a bool)."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "on"):
        return True
    if text in ("0", "false", "off"):
        return False
    raise ValueError("is not 1 or 0")


class PartlyRefused(ValueError):
    """Some entries of a list control's value were refused: `kept` (the rest) is used."""

    def __init__(self, reason: str, kept: list) -> None:
        super().__init__(reason)
        self.kept = kept


_PAIR = re.compile(r"([0-9]{1,6})\.([0-9]{1,6})")


def pair_in(first: int, second: int) -> Callable[[object], str]:
    """A parser for one "a.b" entry (a block and a head, a block and a neuron) with
    0 <= a < first and 0 <= b < second, given back as its plain text ("03.1" -> "3.1")."""

    def parse(raw: object) -> str:
        match = _PAIR.fullmatch(str(raw))
        if match is None or int(match[1]) >= first or int(match[2]) >= second:
            raise ValueError("is out of range")
        return f"{int(match[1])}.{int(match[2])}"

    return parse


def many(parse_item: Callable[[object], object], cap: int, what: str
         ) -> Callable[[object], list]:
    """A parser for a multiselect control: a list of entries, or a link's text "a,b,c". Each
    entry is parsed by `parse_item`, repeats are dropped and at most `cap` kept. A refused
    entry (out of range, or past the cap) is dropped: PartlyRefused says how many, in terms
    of `what` (e.g. "blocks 0 … 1, heads 0 … 3"), and carries the entries kept."""

    def parse(raw: object) -> list:
        if isinstance(raw, str):
            entries = raw.split(",", cap) if raw else []  # at most cap + 1 parts
        else:
            entries = list(raw)[:cap + 1]
        kept, dropped = [], 0
        for entry in entries[:cap]:
            try:
                item = parse_item(entry)
            except ValueError:
                dropped += 1
                continue
            if item not in kept:
                kept.append(item)
        if dropped:
            noun = "entry" if dropped == 1 else "entries"
            raise PartlyRefused(f"has {dropped} {noun} outside {what} (dropped)", kept)
        if len(entries) > cap:
            raise PartlyRefused(f"has more than {cap} entries (the first {cap} kept)", kept)
        return kept

    return parse


def url_text(value: object) -> str:
    """A control's value as its link holds it: ?projector=1, ?temperature=0.7, ?heads=0.1,2.3"""
    if isinstance(value, bool):  # a toggle: ?projector=1
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):  # a multiselect: its entries, comma-separated
        return ",".join(map(str, value))
    return format(value, ".6g") if isinstance(value, float) else str(value)


# Where a control lives, written here and nowhere else. A control is a widget "page.key" drawn
# from its declaration (kit.controls: its name, kind, default, range) whose value is shared by
# name by every page (the temperature of pages 7 and 8) and travels in the link as
# ?name=value. The session keeps, per name: control.<name> (its value),
# control.<name>.url (its link value last read or written, see _link_changed) and
# control.<name>.visit (the page visit that last asked the link); per widget:
# <widget key>.refused (the browser sent a value the widget could not take).
_CONTROL = "control."


# widget key -> its control's shared name, as each control is drawn (the keys are fixed names)
_NAMES: dict[str, str] = {}


def _param(key: str) -> str:
    """The URL parameter (and shared name) of a control key: its declaration's name, or the
    key after the page's name ("sampling.seed" -> "seed")."""
    return _NAMES.get(key) or key.split(".", 1)[-1]


def _value_key(key: str) -> str:
    return f"{_CONTROL}{_param(key)}"


def _url_key(name: str) -> str:
    return f"{_CONTROL}{name}.url"


def _visit_key(name: str) -> str:
    return f"{_CONTROL}{name}.visit"


def _refused_key(key: str) -> str:
    return f"{key}.refused"


def control_values() -> dict[str, object]:
    """Every page control this session has a value for, by shared name, sorted: what a view
    carries (kit.state.View)."""
    values = {str(key)[len(_CONTROL):]: value for key, value in st.session_state.items()
              if str(key).startswith(_CONTROL) and "." not in str(key)[len(_CONTROL):]}
    return dict(sorted(values.items()))


def control_value(name: str, default: object = None) -> object:
    """The value of control `name` in this session (any page's), or `default`."""
    return st.session_state.get(_value_key(name), default)


def has_control(name: str) -> bool:
    return _value_key(name) in st.session_state


def take_control(name: str, value: object) -> None:
    """Give control `name` the value `value` (a teacher's, a lesson step's), as if this session
    had written it to its link: the control's widget starts from it on the next run."""
    st.session_state[_value_key(name)] = value
    st.session_state[_url_key(name)] = url_text(value)


def control(widget: Callable, label: str, key: str, spec, *, hi: float | None = None,
            choices: Sequence | None = None, per: int | None = None, default=None, **kwargs):
    """A widget whose value survives page changes and is mirrored in the URL.

    `key` is the widget key, "page.name"; `spec` the control's declaration
    (kit.controls.ControlSpec): its shared name, kind, default and range, with the page's
    `hi`, `choices` (also the widget's options) or `per` where the declaration leaves them
    to the page (`default` too, when it depends on the prompt). The value lives in the link as
    ?name=value and is shared by every page with a control of that name (the temperature of
    pages 7 and 8). On a session's first run the value comes from the URL when it parses; an
    impossible value is refused with a warning and the default used (a list keeps its entries
    that fit: `many`).
    """
    parse, default = _declared(key, spec, hi, choices, per, default)
    if choices is not None or spec.options:
        kwargs.setdefault("options", list(spec.options if choices is None else choices))
    name, value_key = _param(key), _value_key(key)
    _start(label, key, parse, default)

    def keep() -> None:  # the widget's new value, checked before anything uses it
        try:
            st.session_state[value_key] = parse(st.session_state[key])
        except (ValueError, KeyError):
            st.session_state[value_key] = default
            st.session_state[_refused_key(key)] = True

    value = widget(label, key=key, on_change=keep, **kwargs)
    st.session_state[value_key] = value
    set_url_param(name, value)
    return value


def _declared(key: str, spec, hi, choices, per, default) -> tuple[Callable, object]:
    """A control's parser and default from its declaration; the key takes its name."""
    if not isinstance(getattr(spec, "name", None), str) or not hasattr(spec, "parse"):
        raise TypeError(f"control {key!r} takes its declaration (kit.controls), not a parser")
    _NAMES[key] = spec.name
    return (spec.parse(hi, choices=choices, per=per),
            spec.default if default is None else default)


def start_value(label: str, key: str, spec, *, hi: float | None = None,
                choices: Sequence | None = None, per: int | None = None, default=None):
    """The value control `key` starts this run from (the link's, the session's or the
    default, checked, a refused one said once): what `control` gives its widget. A page may
    ask first, e.g. to offer a link's entries among a multiselect's options."""
    return _start(label, key, *_declared(key, spec, hi, choices, per, default))


def _start(label: str, key: str, parse: Callable, default):
    name, value_key = _param(key), _value_key(key)
    if value_key not in st.session_state:  # the link is read once (kit.link_notes: its note)
        st.session_state[value_key] = _from_url(name, default, parse)
        st.session_state[_url_key(name)] = st.query_params.get(name)
    elif _link_changed(name):  # not called on a first run: a later run may still be asked
        st.session_state[value_key] = _from_url(name, default, parse)
    try:  # a value that fit the previous model may not fit this one (e.g. top-k > v)
        st.session_state[value_key] = parse(st.session_state[value_key])
    except ValueError as err:  # a list keeps its entries that still fit
        st.session_state[value_key] = getattr(err, "kept", default)
    if st.session_state.pop(_refused_key(key), False):  # sent with the wrong type or range
        st.session_state[value_key] = default
        say_refused(label, url_text(default) or "none")
    st.session_state[key] = st.session_state[value_key]
    return st.session_state[value_key]


KEY_PAGE, KEY_VISIT = "page.current", "page.visit"


def begin_page_run(page_id: str) -> None:
    """Count page visits: a run of another page than the last one starts a new visit.
    Also where every page checks the widget values the browser sent (kit.wire_check)."""
    wire_check.install()
    for widget_key in wire_check.take_refused():
        if _value_key(widget_key) in st.session_state:  # a control: it says so, at its default
            st.session_state[_refused_key(widget_key)] = True
        else:  # the prompt, the model, the position: they keep what they had
            say_refused(widget_key, "its previous value")
    if st.session_state.get(KEY_PAGE) != page_id:
        st.session_state[KEY_PAGE] = page_id
        st.session_state[KEY_VISIT] = st.session_state.get(KEY_VISIT, 0) + 1


def say_refused(label: str, value: str) -> None:
    """One plain note: a value sent for a control could not be used (never repeated: anyone
    can send one), so the control is back at `value`."""
    st.warning(plain(f"A value sent for {cut(label)} could not be used, so it is back at "
                     f"{value}."))


def _link_changed(name: str) -> bool:
    """True when the URL holds a value for `name` this session did not write: an in-app link
    (st.page_link(..., query_params=...)) asks for it, e.g. "open block 3 head 1".

    A link can only ask on the first run of a page visit. Later reruns of the same page carry
    the browser's query string as it was when the rerun was requested, which can lag behind
    what the previous run wrote (two quick arrow-key presses on a slider): read then, it would
    put the control back to the old value.
    """
    visit, seen = st.session_state.get(KEY_VISIT), _visit_key(name)
    if st.session_state.get(seen) == visit:
        return False
    st.session_state[seen] = visit
    raw = st.query_params.get(name)
    return raw is not None and raw != st.session_state.get(_url_key(name))


def _from_url(name: str, default, parse: Callable):
    raw = st.query_params.get(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except ValueError as err:
        start = getattr(err, "kept", default)  # a list starts from its entries that fit
        # the value is not repeated (anyone can write a link); the rest is the app's own text
        link_notes.say(f"The link's value for {name} {err}, so {name} starts at "
                       f"{url_text(start) or 'none'}.", st.session_state.get(KEY_VISIT))
        return start


def set_control(key: str, value) -> None:
    """Change a control's value from a button callback (e.g. "next step")."""
    st.session_state[_value_key(key)] = value
    st.session_state[key] = value


def set_url_param(name: str, value) -> None:
    text = url_text(value)
    st.session_state[_url_key(name)] = text  # what we wrote
    if st.query_params.get(name) != text:
        st.query_params[name] = text


def start_from(key: str, default, origin: object, spec=None) -> None:
    """Set widget `key` to `default` whenever `origin` changes (what the default depends on).

    A fixed widget key keeps its value across reruns; this resets it when, say, a new prompt
    or position makes another default the natural start. `origin` must be a small value.
    For a control (its declaration `spec`), its value too, but not on its first run: a link
    may still ask for another.
    """
    origin_key = f"{key}.origin"
    if spec is not None:
        _NAMES[key] = spec.name
    if st.session_state.get(origin_key) != origin or key not in st.session_state:
        if spec is not None and origin_key in st.session_state:
            st.session_state[_value_key(key)] = default
        st.session_state[origin_key] = origin
        st.session_state[key] = default
