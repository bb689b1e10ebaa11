"""Every input widget with a key is a declared control or is on the list of those that are not
(kit.controls.not_controls.NOT_CONTROLS): read from the code with `ast`, nothing run.

A widget call `st.slider(..., key=...)` (or `column.radio(...)`) outside `control(...)` is
allowed only when its key, read from the code (a text, a module's constant, a constant of a
module it imports, or a loop over a table of constants), is on the list. A `control(...)` call
takes a declaration of kit.controls by its name. A snippet that breaks either rule is caught.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tinygpt_app.kit import controls
from tinygpt_app.kit.controls.not_controls import NOT_CONTROLS

ROOT = Path(__file__).resolve().parents[4]
SCANNED = ("pages", "tinygpt_app", "tinygpt_hosting")
WIDGETS = {"selectbox", "slider", "radio", "number_input", "toggle", "checkbox", "multiselect",
           "text_input", "text_area", "select_slider", "pills", "segmented_control",
           "chat_input", "date_input", "time_input", "color_picker", "file_uploader",
           "feedback", "data_editor", "camera_input", "audio_input"}


def constants(tree: ast.Module) -> dict[str, object]:
    """A module's top-level constants: NAME = "text", A, B = "a", "b", TABLE = [(...), ...]."""
    found: dict[str, object] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for name, value in zip(target.elts, node.value.elts, strict=False):
                    if isinstance(name, ast.Name) and isinstance(value, ast.Constant):
                        found[name.id] = value.value
    return found


def imported_modules(tree: ast.Module, root: Path) -> dict[str, Path]:
    """alias -> file, for `from package import module as alias` of the project's modules."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                path = root / (node.module.replace(".", "/") + f"/{alias.name}.py")
                if path.exists():
                    found[alias.asname or alias.name] = path
    return found


def loop_values(tree: ast.Module, name: str, table: dict[str, object]) -> list[object]:
    """The values a loop variable `name` takes in `for a, name, b in TABLE` (TABLE a constant)."""
    values = []
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Name) \
                and isinstance(node.target, ast.Tuple):
            index = [e.id for e in node.target.elts if isinstance(e, ast.Name)]
            rows = table.get(node.iter.id)
            if name in index and isinstance(rows, (list, tuple)):
                values += [row[index.index(name)] for row in rows]
    return values


def keys_of(expr: ast.expr, tree: ast.Module, path: Path, root: Path) -> list[object]:
    """What a widget's `key=` can be, read from the code; [None] when it cannot be read."""
    table = constants(tree)
    if isinstance(expr, ast.Constant):
        return [expr.value]
    if isinstance(expr, ast.Name):
        if expr.id in table:
            return [table[expr.id]]
        return loop_values(tree, expr.id, table) or [None]
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        module = imported_modules(tree, root).get(expr.value.id)
        if module is not None:
            return [constants(ast.parse(module.read_text(encoding="utf-8"))).get(expr.attr)]
    return [None]


def is_control_call(node: ast.AST) -> bool:
    func = getattr(node, "func", None)
    return isinstance(node, ast.Call) and (getattr(func, "id", None) == "control"
                                           or getattr(func, "attr", None) == "control")


def declares(call: ast.Call, declared: set[str]) -> bool:
    """Whether a control(...) call passes a declaration as its fourth argument: one of
    kit.controls by its name (an upper-case name), or a helper's parameter that holds one
    (kit.state.control refuses anything else when it runs)."""
    if len(call.args) < 4 or not isinstance(call.args[3], (ast.Name, ast.Attribute)):
        return False
    name = getattr(call.args[3], "id", None) or call.args[3].attr
    return name in declared or not name.isupper()


def breaches(root: Path, allowed: dict[str, str], declared: set[str]) -> list[str]:
    """Each widget with a key made outside control(...) and not allowed, and each control(...)
    without a declaration: "path:line what"."""
    found = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = path.relative_to(root)
            for node in ast.walk(tree):
                if is_control_call(node) and not declares(node, declared):
                    found.append(f"{where}:{node.lineno} control(...) without a declaration")
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr in WIDGETS):
                    continue
                key = next((k.value for k in node.keywords if k.arg == "key"), None)
                if key is None:
                    continue
                for value in keys_of(key, tree, path, root):
                    if value not in allowed:
                        found.append(f"{where}:{node.lineno} {node.func.attr} key={value!r}")
    return found


def test_every_keyed_widget_is_a_declared_control_or_listed():
    assert breaches(ROOT, NOT_CONTROLS, set(controls.SPECS)) == []


def test_each_listed_widget_says_why_and_exists():
    assert all(len(reason) > 20 for reason in NOT_CONTROLS.values())
    code = "\n".join(p.read_text(encoding="utf-8") for folder in SCANNED
                     for p in (ROOT / folder).rglob("*.py"))
    for key in NOT_CONTROLS:  # a stale entry goes: every listed key is still in the code
        page, _, name = key.rpartition(".")
        assert key in code or name in code, key


def test_a_widget_outside_control_is_caught(tmp_path):
    page = tmp_path / "pages" / "1_Page.py"
    page.parent.mkdir()
    for folder in SCANNED[1:]:
        (tmp_path / folder).mkdir()
    page.write_text('import streamlit as st\n'
                    'K = "page.view"\n'
                    'st.radio("Show", ["a", "b"], key="page.mode")\n'
                    'left, right = st.columns(2)\n'
                    'left.slider("k", 1, 5, key=K)\n'
                    'st.text_input("Name", key="page.name")\n'
                    'st.button("Go", key="page.go")\n'
                    'control(st.slider, "T", "page.t", SPEC)\n'
                    'control(st.slider, "T", "page.u", 1.0, parse)\n'
                    'control(st.slider, "T", "page.v", OTHER)\n', encoding="utf-8")
    found = breaches(tmp_path, {"page.name": "a form"}, {"SPEC"})
    assert found == ["pages/1_Page.py:3 radio key='page.mode'",
                     "pages/1_Page.py:5 slider key='page.view'",
                     "pages/1_Page.py:9 control(...) without a declaration",
                     "pages/1_Page.py:10 control(...) without a declaration"]
