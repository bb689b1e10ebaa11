"""docs/ARCHITECTURE.md's module map is the code's (scripts/module_map.py writes it)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_module_map_names_every_module_as_the_code_does():
    done = subprocess.run([sys.executable, "scripts/module_map.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, "run `python scripts/module_map.py`, commit docs/ARCHITECTURE.md"


def test_the_map_lists_each_module_once():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import module_map
    finally:
        sys.path.pop(0)
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    for package in module_map.PACKAGES:
        for path in module_map.modules(package):
            assert text.count(f"| `{path.relative_to(ROOT).as_posix()}` |") == 1, path
