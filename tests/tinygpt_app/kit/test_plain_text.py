"""User text never becomes markup: the one escaping helper (kit.plain_text.plain), and a scan of
every message the app writes in markdown, so that a new unescaped call fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tinygpt_app.kit.plain_text import cut, plain, without_paths

ROOT = Path(__file__).resolve().parents[3]
HOSTILE = ("![i](http://e.vl/a.png) **X**[y](http://e.vl) x $y$ z `code` <b>b</b> "
           ":red[red] https://e.vl # title")

# Streamlit calls that render their first argument as markdown (st.X, a column's .X, ...) and
# the app's own wrapper that passes its first argument to st.markdown (kit.widgets.explain,
# called by its bare name: `tokenizer.explain(...)` is another function).
MARKDOWN_CALLS = {"markdown", "success", "info", "warning", "error", "caption", "header",
                  "subheader", "title", "explain"}
# Calls whose result is safe in markdown: the escaping helper, helpers built on it (the lesson's
# bold token), and numbers.
SAFE_CALLS = {"plain", "tok", "at_position", "percent", "len", "int", "float", "round", "min",
              "max", "sum", "abs"}
# Names that hold numbers throughout the app (a count, a position, a size, an id): a value
# under one of these names is an int or a float, never text.
NUMBERS = {"n", "d", "k", "t", "v", "hs", "head", "layer", "shown", "start", "step", "token",
           "first", "full", "own", "room", "new", "top", "biggest", "prompt_length", "shift",
           "position", "not_scored", "rest", "place", "number", "offset", "snapshot_every",
           "n_layer", "n_head", "n_embd", "n_ctx", "head_size", "itemsize", "dims", "shape",
           "positions", "key", "query", "half", "inner_dim", "beams", "hits", "most"}
# The app's own words for a model's parts (readouts.parts: a fixed vocabulary read off a config).
APP_WORDS = {"family", "norm", "norm_stats", "norm_does", "positions_does", "mlp", "mlp_does",
             "tying", "kind", "sizes"}
# Reviewed one by one: text the app writes itself (with any user text inside already escaped
# where it was built), by file and expression. A new entry needs the same review.
REVIEWED = {
    "app.py": {"label", "shapes[i]", "what"},
    "pages/14_Why_this_token.py": {  # "block 3 head 1 adds +2.40"
        "'\\n'.join((f'- {c.sentence}' for c in top))",
        "'\\n'.join((f'- {c.sentence}' for c in top_contributors(att, 3)))", "embeddings"},
    "pages/2_Tokens_and_embeddings.py": {
        "''.join((row_html(tok, *row) for row in rows))"},
    "pages/9_Chat.py": {"ends", "ends > 1"},  # a count of newlines
    "pages/13_Architectures.py": {"c.group_size"},  # an int from the config
    "pages/4_Attention.py": {"note", "text"},
    "pages/8_Decoding.py": {"timing", "extra", "how", "on_demand_note(state)", "best",
                            "s['beams']", "s['new']",
                            "chips_html(items[-1:], highlight=0)"},  # html.escape'd chips
    "pages/10_What_if.py": {"changed"},
    "pages/12_Training.py": {"why"},
    "tinygpt_app/kit/frame.py": {"intro", "section", "title"},
    "tinygpt_app/kit/notices.py": {"type(err).__name__"},
    "tinygpt_app/kit/widgets.py": {"markdown",  # explain(): its callers are scanned
                                   "chips_html(items, highlight, colours)", "url",
                                   "where"},  # part_elsewhere: model names through plain()
    "tinygpt_app/sections/grouped_heads.py": {"', '.join(others)"},  # head numbers
    "tinygpt_app/sections/lesson.py": {"words.format(at=at_position(state), d=state.d, "
                                       "mu=f'{float(stats.mean[t]):+.4f}', "
                                       "sigma=f'{float(stats.std[t]):.4f}', "
                                       "denominator=f'{float(stats.denominator[t]):.4f}')",
                                       "bias", "ends[result.stop_reason]", "where",
                                       "for_model(step.title, state.config)",
                                       "rms_words.format(at=at_position(state), d=state.d, "
                                       "rms=f'{float(rms.rms[t]):.4f}', "
                                       "mu=f'{float(rms.mean[t]):+.4f}')"},
    "tinygpt_app/sections/neurons.py": {"fires"},
}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)


def unescaped(node: ast.AST) -> list[ast.AST]:
    """The parts of a markdown argument that are neither literal, escaped, nor a number."""
    if isinstance(node, ast.Constant):
        return []
    if isinstance(node, ast.Call) and _name(node.func) in SAFE_CALLS | APP_WORDS:
        return []
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        name = _name(node) or ""
        if name.isupper() or name in NUMBERS or name in APP_WORDS:
            return []  # a module's constant text, a number, the app's words for a part
    if isinstance(node, ast.JoinedStr):
        return [part for value in node.values if isinstance(value, ast.FormattedValue)
                and value.format_spec is None  # {x:.3f}, {x:,}: a number
                for part in unescaped(value.value)]
    if isinstance(node, ast.BinOp):
        return unescaped(node.left) + unescaped(node.right)
    if isinstance(node, ast.IfExp):
        return unescaped(node.body) + unescaped(node.orelse)
    return [node]


def app_files() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py")),
            *sorted((ROOT / "tinygpt_app").rglob("*.py"))]


def markdown_arguments(path: Path):
    """(line, first argument) of every call in `path` that renders it as markdown."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Call) and node.args
                and _name(node.func) in MARKDOWN_CALLS
                and (isinstance(node.func, ast.Attribute) or node.func.id == "explain")
                and not (isinstance(node.func, ast.Attribute) and node.func.attr == "explain")):
            yield node.lineno, node.args[0]


def test_every_markdown_message_escapes_what_it_does_not_write_itself():
    found, used = [], set()
    for path in app_files():
        name = path.relative_to(ROOT).as_posix()
        reviewed = REVIEWED.get(name, set())
        for line, argument in markdown_arguments(path):
            for part in unescaped(argument):
                text = ast.unparse(part)
                if text in reviewed:
                    used.add((name, text))
                else:
                    found.append(f"{name}:{line}: {text}")
    assert not found, ("text put into markdown without kit.plain_text.plain (escape it, or "
                       "review it and add it to REVIEWED):\n" + "\n".join(found))
    stale = {(f, e) for f, es in REVIEWED.items() for e in es} - used
    assert not stale, f"REVIEWED entries no longer in the code: {sorted(stale)}"


def test_the_scan_catches_an_unescaped_label_and_passes_an_escaped_one():
    bad = ast.parse('st.success(f"Removed {label}: gone")').body[0].value
    good = ast.parse('st.success(f"Removed {plain(label)}: {n} gone, {p:.2f}")').body[0].value
    assert [ast.unparse(p) for p in unescaped(bad.args[0])] == ["label"]
    assert unescaped(good.args[0]) == []


@pytest.mark.parametrize("markup", ["![i](", "](http", "$y$", "`code`", "<b>", ":red[", "**X**"])
def test_plain_leaves_no_markup(markup):
    assert markup not in plain(HOSTILE)


def test_plain_renders_as_typed():
    """Each escape is a backslash before one punctuation character: removing them gives the
    text back (newlines become spaces)."""
    assert plain(HOSTILE).replace("\\", "") == HOSTILE
    assert plain("a\nb") == "a b"


def test_cut_and_without_paths():
    assert cut("x" * 100, 10) == "x" * 9 + "…"
    assert without_paths("no /srv/app/models/x.npz here") == "no x.npz here"
