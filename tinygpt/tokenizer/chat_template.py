"""Chat templates: a conversation turned into the one text a chat model reads.

A chat model never sees "messages". Its tokenizer carries a small Jinja program, the chat
template, that writes the conversation out as text with special markers around each turn
(SmolLM2: ``<|im_start|>user\\nHi<|im_end|>\\n``); the model reads that text like any other.

`render_chat(template, messages, ...)` renders it the way Hugging Face transformers does
(`transformers.utils.chat_template_utils._compile_jinja_template`): Jinja's
`ImmutableSandboxedEnvironment` with trim_blocks, lstrip_blocks and the loop controls, and the
same extras (`raise_exception`, a `tojson` that does not escape HTML, `strftime_now`, a plain
`dict`, a `namespace` that refuses underscore names), so the same template gives the same text.

A template comes with a model file and is untrusted code. The sandbox keeps it away from
Python's insides (no ``__class__``, ``__globals__``...), but bounds neither time nor memory:
``{{ 'a' * 10**9 }}`` or two nested loops over ``range(100000)`` are valid templates. So a
`_Budget` counts every loop step and call and every character written, and each operator, call
and filter is checked before it runs: a result that could grow past `MAX_WORK_CHARS` is refused
first, not measured after. Everything a template can do wrong ends in `ChatTemplateError`.
"""

from __future__ import annotations

import functools
import json
import operator
import re
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes as nodes
import jinja2.sandbox
from jinja2.visitor import NodeTransformer

__all__ = ["MAX_LOOP_STEPS", "MAX_OUTPUT_CHARS", "MAX_TEMPLATE_CHARS", "ChatTemplateError",
           "NoChatTemplateError", "render_chat"]

MAX_TEMPLATE_CHARS = 100_000  # a template's source (real ones: 1-20 thousand)
MAX_OUTPUT_CHARS = 1_000_000  # characters a render may write, and any one value's size
MAX_WORK_CHARS = 10_000_000  # the most one operator, call or filter may build before it is checked
MAX_LOOP_STEPS = 100_000  # loop iterations and calls of one render
MAX_SECONDS = 2.0  # wall-clock time of one render, checked at every step
MAX_INT_BITS = 4096  # the largest integer a template may compute
MAX_MESSAGES = 1_000
MAX_INPUT_CHARS = 100_000  # the messages' text, all together
_WIDTH = re.compile(r"\d+")  # widths written in a format string ('%9999s', '{:9999}')


class ChatTemplateError(ValueError):
    """The template could not be rendered: bad syntax, refused by the sandbox or its caps, or
    a `raise_exception` of the template itself (its message is kept)."""


class NoChatTemplateError(ChatTemplateError):
    """The model's files carry no chat template: it was not trained to chat."""


# ----------------------------------------------------------------------------- the budget


class _Budget:
    """What one render has spent: loop steps and calls, characters written, time."""

    def __init__(self) -> None:
        self.steps, self.chars, self.started = 0, 0, time.monotonic()

    def step(self, chars: int = 0) -> None:
        self.steps += 1
        self.chars += chars
        if self.steps > MAX_LOOP_STEPS:
            raise ChatTemplateError(f"stopped: more than {MAX_LOOP_STEPS:,} loop steps and calls")
        if self.chars > MAX_OUTPUT_CHARS:
            raise ChatTemplateError(f"stopped: more than {MAX_OUTPUT_CHARS:,} characters written")
        if time.monotonic() - self.started > MAX_SECONDS:
            raise ChatTemplateError(f"stopped: longer than {MAX_SECONDS:g} s")


_BUDGET: ContextVar[_Budget | None] = ContextVar("chat_template_budget", default=None)


def _spend(chars: int = 0) -> None:
    budget = _BUDGET.get()
    if budget is not None:  # None: Jinja folding a constant while it compiles
        budget.step(chars)


def _size(value, limit: int = MAX_WORK_CHARS) -> int:
    """How big a value is: a text's characters, a number's value (a width, a repeat count),
    a collection's items and the characters of the texts inside it; stops past `limit`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) if value.bit_length() < 64 else limit + 1
    return _deep_size(value, limit)


def _deep_size(value, limit: int) -> int:
    if isinstance(value, str | range):
        return len(value)
    if isinstance(value, Mapping):
        value = [*value.keys(), *value.values()]
    if not isinstance(value, Sequence | set | frozenset):
        return 0
    total = len(value)
    for item in value:
        if total > limit:
            break
        total += _deep_size(item, limit - total)
    return total


def _refuse_above(bound: int, cap: int = MAX_WORK_CHARS) -> None:
    if bound > cap:
        raise ChatTemplateError(f"refused: a value of more than {cap:,} characters or items")


def _check_call(*operands) -> None:
    """Refuse a call whose result could grow past MAX_WORK_CHARS, before it runs.

    The bound: the operands' sizes added, plus the two largest multiplied (a replace, a join,
    a padding to width n or an indent of every line grows a value at most that much).
    """
    sizes = sorted(_size(value) for value in operands)
    _refuse_above(sum(sizes) + (sizes[-1] * sizes[-2] if len(sizes) > 1 else 0))


def _check_format(text) -> None:
    """A format string's widths ('%9999999s', '{:9999999}') are sizes too."""
    if isinstance(text, str):
        _refuse_above(sum(int(w) for w in _WIDTH.findall(text[:MAX_OUTPUT_CHARS])))


def _check_int(value) -> None:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ChatTemplateError(f"refused: an integer of more than {MAX_INT_BITS} bits")


def _checked_binop(op: str, left, right):
    """`+ - * / // % **` with their operands checked first."""
    if op == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        if right * max(1, abs(left).bit_length()) > MAX_INT_BITS:
            raise ChatTemplateError(f"refused: an integer of more than {MAX_INT_BITS} bits")
    if op == "*":
        _refuse_above((1 + _size(left)) * (1 + _size(right)))
    elif op == "+":
        _refuse_above(_size(left) + _size(right))
    elif op == "%":  # 'text' % value, % (values...) or % {name: value}: any may be a width
        values = list(right.values()) if isinstance(right, Mapping) else right
        values = values if isinstance(values, tuple | list) else [values]
        _refuse_above(_size(left) + sum(_size(v) for v in values))
        _check_format(left)
    result = _BINOPS[op](left, right)
    _check_int(result)
    return result


_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow}


# ----------------------------------------------------------------------------- the sandbox


def _loop_steps(iterable, cost: int = 0):
    """A loop's items, each one step of the budget plus the text its body writes (`cost`)."""
    if isinstance(iterable, int | float):  # Jinja's own error, not ours
        raise ChatTemplateError(f"cannot loop over the number {iterable!r}")
    for item in iterable:
        _spend(cost)
        yield item


def _join_checked(parts: tuple) -> str:
    """The `~` operator (string concatenation), its total size checked first."""
    texts = [str(part) for part in parts]
    if sum(map(len, texts)) > MAX_OUTPUT_CHARS:
        raise ChatTemplateError(f"refused: a text of more than {MAX_OUTPUT_CHARS:,} characters")
    return "".join(texts)


def _literal_chars(node: nodes.Node) -> int:
    """Characters a piece of template writes literally (text between tags, constants)."""
    text = sum(len(n.data) for n in node.find_all(nodes.TemplateData))
    return text + sum(len(str(n.value)) for n in node.find_all(nodes.Const))


class _Guard(NodeTransformer):
    """Rewrites a parsed template so every loop counts its steps and every `~` is checked."""

    def visit_For(self, node: nodes.For) -> nodes.For:
        self.generic_visit(node)
        cost = sum(_literal_chars(child) for child in node.body)
        node.iter = _filter(node.iter, "tinygpt_loop_steps", cost)
        if node.recursive:  # loop(children) starts the body again on new items
            for call in node.find_all(nodes.Call):
                if isinstance(call.node, nodes.Name) and call.node.name == "loop" and call.args:
                    call.args[0] = _filter(call.args[0], "tinygpt_loop_steps", cost)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Filter:
        self.generic_visit(node)
        return _filter(nodes.Tuple(node.nodes, "load"), "tinygpt_join")


def _filter(node: nodes.Expr, name: str, *args: int) -> nodes.Filter:
    return nodes.Filter(node, name, [nodes.Const(a) for a in args], [], None, None,
                        lineno=node.lineno)


def _checked(function):
    """A filter or global, its operands checked before it runs and its result after."""
    @functools.wraps(function)  # keeps Jinja's pass_context / pass_environment marks
    def run(*args, **kwargs):
        plain = [a for a in (*args, *kwargs.values()) if not isinstance(a, _SKIP_SIZE)]
        _check_call(*plain)
        if function.__name__ in ("do_format", "format"):
            _check_format(args[0] if args else None)
        result = function(*args, **kwargs)
        _refuse_above(_size(result), MAX_OUTPUT_CHARS)
        return result
    return run


_SKIP_SIZE = (jinja2.Environment, jinja2.runtime.Context, jinja2.nodes.EvalContext)


class _TemplateDict:
    """`dict(...)` in a template, as transformers offers it (no attribute to climb through)."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """`namespace(...)`, refusing underscore names as transformers' does."""

    def __init__(*args, **kwargs):  # Jinja's own signature trick: namespace(self=...) works
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"a namespace name may not start with _: {name!r}")


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (marks the assistant's part): rendered as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


class _BoundedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """transformers' sandbox, with every operator, call and filter checked against the caps."""

    intercepted_binops = frozenset(_BINOPS)

    def call_binop(self, context, operator_name, left, right):
        return _checked_binop(operator_name, left, right)

    def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (Jinja's signature)
        _spend()
        method_of = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        operands = [a for a in (*args, *kwargs.values()) if not isinstance(a, _SKIP_SIZE)]
        if isinstance(method_of, str | list | tuple | dict):
            operands.append(method_of)
        _check_call(*operands)
        if getattr(__obj, "__name__", "") in ("format", "format_map"):
            _check_format(method_of)
        result = super().call(__context, __obj, *args, **kwargs)
        _refuse_above(_size(result), MAX_OUTPUT_CHARS)
        _check_int(result)
        return result


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


def _finalize(value):
    """Every `{{ value }}` written: its characters counted."""
    text = str(value) if not isinstance(value, jinja2.Undefined) else ""
    _spend(len(text))
    return text


def _environment() -> _BoundedSandbox:
    env = _BoundedSandbox(trim_blocks=True, lstrip_blocks=True, finalize=_finalize,
                          extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.filters = {name: _checked(f) for name, f in env.filters.items()}
    env.filters["tinygpt_loop_steps"] = _loop_steps
    env.filters["tinygpt_join"] = _join_checked
    del env.globals["lipsum"]  # lipsum(n) writes n paragraphs
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now,
                       dict=_TemplateDict(), namespace=_TemplateNamespace)
    env.globals["range"] = _checked(env.globals["range"])
    return env


@functools.lru_cache(maxsize=8)
def _compile(source: str) -> jinja2.Template:
    env = _environment()
    tree = _Guard().visit(env.parse(source))
    return env.from_string(tree)


# ----------------------------------------------------------------------------- rendering


def _plain_messages(messages) -> list[dict]:
    """The messages as plain dicts of text (keys whose value is None dropped, as there)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise ValueError("messages must be a list of {'role': ..., 'content': ...} dicts")
    if len(messages) > MAX_MESSAGES:
        raise ValueError(f"at most {MAX_MESSAGES:,} messages")
    plain = []
    for message in messages:
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValueError("each message must be a dict with a 'role' text")
        plain.append({str(k): v for k, v in message.items() if v is not None})
    if _size(plain, MAX_INPUT_CHARS) > MAX_INPUT_CHARS:
        raise ValueError(f"the messages hold more than {MAX_INPUT_CHARS:,} characters")
    return plain


def render_chat(template: str | None, messages: Sequence[Mapping], *,
                add_generation_prompt: bool = False, special_tokens: Mapping | None = None,
                ) -> str:
    """The text a chat model reads for `messages` (each {"role": ..., "content": ...}).

    template: the model's chat template (None: `NoChatTemplateError`).
    add_generation_prompt: end with the header of an assistant turn, so the model's next
    tokens are its answer.
    special_tokens: names the template may use, e.g. {"bos_token": "<|im_start|>"}.
    Raises ChatTemplateError when the template fails or passes a cap; ValueError for
    malformed messages.
    """
    if template is None:
        raise NoChatTemplateError("this model's files carry no chat template")
    if not isinstance(template, str) or len(template) > MAX_TEMPLATE_CHARS:
        raise ChatTemplateError(f"a chat template is text of at most {MAX_TEMPLATE_CHARS:,} "
                                "characters")
    context = {**(special_tokens or {}), "messages": _plain_messages(messages), "tools": None,
               "documents": None, "add_generation_prompt": bool(add_generation_prompt)}
    token = _BUDGET.set(_Budget())
    try:
        return _render(_compile(template), context)
    except ChatTemplateError:
        raise
    except jinja2.exceptions.TemplateSyntaxError as err:
        raise ChatTemplateError(f"the chat template is not valid Jinja (line {err.lineno}): "
                                f"{err.message}") from None
    except jinja2.exceptions.SecurityError as err:
        raise ChatTemplateError(f"refused by the sandbox: {str(err)[:200]}") from None
    except jinja2.exceptions.TemplateError as err:
        raise ChatTemplateError(f"the chat template stopped: {str(err)[:200]}") from None
    except (RecursionError, MemoryError):
        raise ChatTemplateError("the chat template nests too deep") from None
    except Exception as err:  # a template is a program: any Python error may come out
        raise ChatTemplateError(f"the chat template failed: {type(err).__name__}: "
                                f"{str(err)[:200]}") from None
    finally:
        _BUDGET.reset(token)


def _render(template: jinja2.Template, context: dict) -> str:
    """Rendered piece by piece, stopped past MAX_OUTPUT_CHARS."""
    pieces, total = [], 0
    for piece in template.generate(**context):
        total += len(piece)
        if total > MAX_OUTPUT_CHARS:
            raise ChatTemplateError(f"stopped: more than {MAX_OUTPUT_CHARS:,} characters written")
        pieces.append(piece)
    return "".join(pieces)
