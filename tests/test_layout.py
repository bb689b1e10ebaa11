"""The shape of the project (issues 24, 44): every module of tinygpt/, tinygpt_app/ and
tinygpt_hosting/ has tests
(a test file of its own, mirrored under tests/, or a test that imports it); the core's tests
(tests/tinygpt) import no app code; no module over 600 lines; no function over 60 lines; no
folder of the packages over 15 modules (pages/ holds one script per menu entry, not modules to
group); the pages do no arithmetic (they import no NumPy: they read and draw);
docs/ARCHITECTURE.md names every module.

Read with `ast`, nothing is imported or run. Each check also runs on a small made-up tree, to
see that it fails when it should.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tinygpt", "tinygpt_app", "tinygpt_hosting")
CODE = (*PACKAGES, "pages", "bench", "scripts", "deploy")  # and app.py
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_FOLDER_MODULES = 15  # a folder with more is grouped by concern into subfolders


def modules(root: Path) -> list[str]:
    """The dotted names of the package modules under `root` (not __init__ or __main__)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.stem not in ("__init__", "__main__"):
                found.append(".".join(path.relative_to(root).with_suffix("").parts))
    return found


def own_test_file(root: Path, module: str) -> Path | None:
    """tinygpt/network/norms.py -> tests/tinygpt/network/test_norms.py (or test_norms_*.py)."""
    *folders, name = module.split(".")
    folder = root / "tests" / Path(*folders)
    candidates = [folder / f"test_{name}.py", *sorted(folder.glob(f"test_{name}_*.py"))]
    return next((path for path in candidates if path.is_file()), None)


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth (`from a.b import c` counts a.b.c too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def imported_by_tests(root: Path) -> set[str]:
    return set().union(*(imports_of(path) for path in (root / "tests").rglob("*.py")))


APP_CODE = ("tinygpt_app", "tinygpt_hosting", "streamlit", "tests.apptest_support", "pages")


def core_tests_importing_the_app(root: Path) -> list[str]:
    """Test files under tests/tinygpt that import the app: app tests in the core's place."""
    return [f"{path.relative_to(root)}: {module}"
            for path in sorted((root / "tests" / "tinygpt").rglob("*.py"))
            for module in sorted(imports_of(path))
            if module.split(".")[0] in APP_CODE or module.startswith(APP_CODE)]


def untested(root: Path) -> list[str]:
    imported = imported_by_tests(root)
    return [m for m in modules(root) if own_test_file(root, m) is None and m not in imported]


def code_files(root: Path) -> list[Path]:
    files = [root / "app.py"] if (root / "app.py").is_file() else []
    for folder in CODE:
        files += sorted((root / folder).rglob("*.py"))
    return files


def long_modules(root: Path) -> list[str]:
    return [f"{path.relative_to(root)}: {n} lines" for path in code_files(root)
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]


def long_functions(root: Path) -> list[str]:
    """Functions (and methods) longer than the limit, counted from `def` to their last line."""
    found = []
    for path in code_files(root):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: {n}")
    return found


def crowded_folders(root: Path) -> list[str]:
    """Folders of tinygpt/ and tinygpt_app/ holding more than MAX_FOLDER_MODULES modules (an
    __init__.py not counted). pages/ is not counted: its scripts are the menu's pages, one per
    stage, and must stay directly in pages/ (Streamlit finds a fresh server's first deep link
    there: a page in a subfolder opened "Page not found" over it)."""
    found = []
    for top in PACKAGES:
        for folder in sorted(p for p in (root / top).rglob("*") if p.is_dir()) + [root / top]:
            n = sum(1 for f in folder.glob("*.py") if f.stem != "__init__")
            if n > MAX_FOLDER_MODULES:
                found.append(f"{folder.relative_to(root)}: {n} modules")
    return found


def pages_doing_arithmetic(root: Path) -> list[str]:
    """Pages that import NumPy (and so could compute): their numbers come from tinygpt and
    tinygpt_app.compute, a page only reads and draws."""
    return [f"{path.relative_to(root)}: {module}"
            for path in [root / "app.py", *sorted((root / "pages").rglob("*.py"))]
            if path.is_file()
            for module in sorted(imports_of(path)) if module.split(".")[0] == "numpy"]


SESSION_DOOR = "tinygpt_app/kit/"  # the one folder that touches st.session_state (kit.slots)
STREAMLIT_INTERNAL = "streamlit.runtime.state.session_state"  # a module of Streamlit's own


def session_state_outside_kit(root: Path) -> list[str]:
    """Lines outside tinygpt_app/kit/ that name session_state: every other module, page and
    app.py keeps its session's values through the kit (kit.state, kit.slots), typed and
    bounded in bytes. Streamlit's own module of that name (streamlit_internals) is not one."""
    files = [root / "app.py", *sorted((root / "pages").rglob("*.py"))]
    for package in sorted(root.glob("tinygpt*")):
        files += sorted(package.rglob("*.py")) if package.is_dir() else []
    found = []
    for path in files:
        name = path.relative_to(root).as_posix()
        if not path.is_file() or name.startswith(SESSION_DOOR):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "session_state" in line.replace(STREAMLIT_INTERNAL, ""):
                found.append(f"{name}:{number}")
    return found


def unnamed_in_architecture(root: Path) -> list[str]:
    text = (root / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    return [m for m in modules(root)
            if m not in text and m.replace(".", "/") + ".py" not in text]


# ----------------------------------------------------------------------------- the project


def test_every_module_has_tests():
    assert modules(ROOT), "no modules found"
    assert untested(ROOT) == []


def test_core_tests_import_no_app_code():
    assert core_tests_importing_the_app(ROOT) == []


def test_no_module_is_over_600_lines():
    assert long_modules(ROOT) == []


def test_no_function_is_over_60_lines():
    assert long_functions(ROOT) == []


def test_the_architecture_names_every_module():
    assert unnamed_in_architecture(ROOT) == []


def test_no_folder_holds_more_than_15_modules():
    assert crowded_folders(ROOT) == []


def test_the_pages_do_no_arithmetic():
    assert pages_doing_arithmetic(ROOT) == []


def test_only_the_kit_touches_session_state():
    assert session_state_outside_kit(ROOT) == []


# ----------------------------------------------------------------------------- the checks fail


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def tree(tmp_path) -> Path:
    """A project of three modules: one with a test file of its own, one imported by a test,
    one with neither; an architecture page naming the first two."""
    for name in ("tinygpt/network/norms.py", "tinygpt_app/kit/state.py",
                 "tinygpt_app/kit/lonely.py", "tinygpt/__init__.py"):
        write(tmp_path / name, "x = 1\n")
    write(tmp_path / "tests/tinygpt/network/test_norms.py", "def test_x():\n    pass\n")
    write(tmp_path / "tests/pages/test_home.py", "from tinygpt_app.kit import state\n")
    write(tmp_path / "docs/ARCHITECTURE.md", "tinygpt/network/norms.py, tinygpt_app.kit.state")
    return tmp_path


def test_a_module_without_tests_is_named(tree):
    assert modules(tree) == ["tinygpt.network.norms", "tinygpt_app.kit.lonely",
                             "tinygpt_app.kit.state"]
    assert untested(tree) == ["tinygpt_app.kit.lonely"]
    assert unnamed_in_architecture(tree) == ["tinygpt_app.kit.lonely"]


def test_a_core_test_importing_the_app_is_named(tree):
    assert core_tests_importing_the_app(tree) == []
    write(tree / "tests/tinygpt/network/test_norms.py", "from tests.apptest_support import TINY\n")
    assert core_tests_importing_the_app(tree) == [
        "tests/tinygpt/network/test_norms.py: tests.apptest_support",
        "tests/tinygpt/network/test_norms.py: tests.apptest_support.TINY"]


def test_a_long_module_and_a_long_function_are_named(tree):
    assert long_modules(tree) == [] and long_functions(tree) == []
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))  # def + 60 lines
    write(tree / "pages/1_Long.py", "def draw():\n" + body)
    write(tree / "tinygpt/big.py", "y = 0\n" * (MAX_MODULE_LINES + 1))
    assert long_functions(tree) == [f"pages/1_Long.py:1 draw: {MAX_FUNCTION_LINES + 1}"]
    assert long_modules(tree) == [f"tinygpt/big.py: {MAX_MODULE_LINES + 1} lines"]


def test_a_crowded_folder_and_a_page_computing_are_named(tree):
    assert crowded_folders(tree) == [] and pages_doing_arithmetic(tree) == []
    for i in range(MAX_FOLDER_MODULES + 1):
        write(tree / f"tinygpt/readouts/r{i}.py", "x = 1\n")
    write(tree / "tinygpt/readouts/__init__.py", "")
    write(tree / "pages/4_Attention.py", "import numpy as np\nx = np.zeros(3)\n")
    assert crowded_folders(tree) == [f"tinygpt/readouts: {MAX_FOLDER_MODULES + 1} modules"]
    assert pages_doing_arithmetic(tree) == ["pages/4_Attention.py: numpy"]


def test_session_state_outside_the_kit_is_named(tree):
    assert session_state_outside_kit(tree) == []
    write(tree / "tinygpt_app/kit/slots.py", "import streamlit as st\nx = st.session_state\n")
    write(tree / "tinygpt_hosting/classroom/seat.py", "import streamlit as st\n\n"
                                                     "store = st.session_state\n")
    write(tree / "pages/16_Class.py", 'import streamlit as st\nst.session_state["a"] = 1\n')
    write(tree / "tinygpt_app/streamlit_internals.py",
          "from streamlit.runtime.state.session_state import WStates\n")
    assert session_state_outside_kit(tree) == ["pages/16_Class.py:2",
                                               "tinygpt_hosting/classroom/seat.py:3"]
