"""The import arrows of the project (.importlinter): pages -> tinygpt_app -> tinygpt, the hosting
wing -> tinygpt_app and never back, no cycles, the classroom behind the wing's plug, Streamlit's
internals in one module.

import-linter checks the packages; pages/ and app.py are scripts (not importable by name), so
their imports are read here with `ast`. Each check is also run on a copy of the code with one
bad import added, to see that it fails when it should.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="pip install import-linter (requirements-dev.txt)")

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".importlinter"
INTERNALS = "tinygpt_hosting/streamlit_internals.py"
# Streamlit beyond its public API (st.*, streamlit.errors, streamlit.testing)
PRIVATE_STREAMLIT = ("streamlit.runtime", "streamlit.navigation", "streamlit.config",
                     "streamlit.proto", "streamlit.web", "streamlit.elements")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Run import-linter on the packages under `root` with the project's contracts."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(CONFIG)!r}, no_cache=True))")
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": ""})


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (at any depth: inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def scripts() -> list[Path]:
    return [ROOT / "app.py", *sorted((ROOT / "pages").rglob("*.py"))]


def test_every_contract_is_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize("file, bad_import, contract", [
    ("tinygpt_hosting/serving/turn.py", "from tinygpt_hosting.classroom import session",
     "Nothing imports the classroom"),
    ("tinygpt_app/compute/caches.py", "from tinygpt_hosting.steps import lockstep",
     "tinygpt_app never imports the hosting wing"),
    ("tinygpt_hosting/steps/lockstep.py", "import streamlit", "NumPy only"),
    ("tinygpt_app/compute/caches.py", "from tinygpt_app.kit import state", "tinygpt_app:"),
    ("tinygpt_app/charts/common.py", "import streamlit", "Charts import only"),
    ("tinygpt/network/model.py", "import tinygpt_app", "tinygpt imports neither"),
    ("tinygpt/network/layers.py", "from tinygpt.readouts import forward_pass", "tinygpt:"),
    ("tinygpt/readouts/attribution.py", "from tinygpt.readouts import occlusion",
     "No import cycles"),
])
def test_a_bad_import_breaks_its_contract(tmp_path, file, bad_import, contract):
    for package in ("tinygpt", "tinygpt_app", "tinygpt_hosting"):
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / file
    target.write_text(target.read_text(encoding="utf-8") + f"\n{bad_import}  # noqa\n",
                      encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, result.stdout


def test_pages_import_the_app_and_the_model_only():
    """pages -> tinygpt_app -> tinygpt: a page imports no other page, nothing imports a page."""
    for script in scripts():
        for module in imported_modules(script):
            assert not module.startswith(("pages", "app")), f"{script.name} imports {module}"
    for package in ("tinygpt", "tinygpt_app", "tinygpt_hosting"):
        for path in (ROOT / package).rglob("*.py"):
            bad = {m for m in imported_modules(path) if m.split(".")[0] in ("pages", "app")}
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_no_page_and_not_app_py_imports_the_hosting_wing():
    """The scripts reach the wing only through tinygpt_app.host (the Class page too)."""
    importers = {str(script.relative_to(ROOT)) for script in scripts()
                 if any(m.split(".")[0] == "tinygpt_hosting" for m in imported_modules(script))}
    assert importers == set()


def test_streamlit_internals_are_used_in_one_module_only():
    users = set()
    for path in [*scripts(), *(ROOT / "tinygpt_app").rglob("*.py"),
                 *(ROOT / "tinygpt_hosting").rglob("*.py")]:
        if any(m.startswith(PRIVATE_STREAMLIT) for m in imported_modules(path)):
            users.add(str(path.relative_to(ROOT)))
    assert users == {INTERNALS}


def test_the_checks_see_a_classroom_import_in_a_page(tmp_path):
    page = tmp_path / "4_Attention.py"
    page.write_text("def f():\n    from tinygpt_hosting.classroom import session\n")
    assert "tinygpt_hosting.classroom" in imported_modules(page)
