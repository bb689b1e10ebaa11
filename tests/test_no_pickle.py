"""No pickle is ever loaded, anywhere in the project's code (a checkpoint is data, never code).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CODE_DIRS = ["tinygpt", "tinygpt_app", "pages", "bench", "scripts", "tests", "deploy"]
CODE_FILES = ["app.py"]


def project_python_files() -> list[Path]:
    files = [ROOT / f for f in CODE_FILES]
    for folder in CODE_DIRS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if f.is_file() and f.resolve() != Path(__file__).resolve()]


def test_no_pickle_is_ever_loaded():
    # the patterns are assembled so that this file does not match itself
    forbidden = re.compile("allow_pickle" + r"\s*=\s*True|" + r"\bpickle\.loads?\b|"
                           r"\bcPickle\b|" + r"\bdill\b|" + r"torch\.load\(")
    files = project_python_files()
    assert len(files) > 10
    hits = [f"{f.relative_to(ROOT)}:{i}: {line.strip()}"
            for f in files for i, line in enumerate(f.read_text().splitlines(), 1)
            if forbidden.search(line)]
    assert not hits, hits
