"""Write the module map of docs/ARCHITECTURE.md from the code: every module of tinygpt/,
tinygpt_app/ and tinygpt_hosting/ with the first sentence of its docstring, between the two
module-map markers.

    python scripts/module_map.py          # rewrite the map in docs/ARCHITECTURE.md
    python scripts/module_map.py --check  # exit 1 if the map is not the code's (the tests do this)
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("tinygpt", "tinygpt_app", "tinygpt_hosting")
START, END = "<!-- module-map -->", "<!-- /module-map -->"


def first_sentence(docstring: str) -> str:
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    found = re.match(r"(.+?[.!?])(\s|$)", paragraph)
    return (found.group(1) if found else paragraph).replace("|", "\\|")


def modules(package: str) -> list[Path]:
    """The package's modules, without the app files a built wheel carries (_app/, _data/)."""
    skip = {"_app", "_data", "__pycache__"}
    return [p for p in sorted((ROOT / package).rglob("*.py"))
            if not skip & set(p.relative_to(ROOT).parts)]


def module_map() -> str:
    lines = []
    for package in PACKAGES:
        lines += ["", f"### `{package}/`", "", "| module | what it holds |", "|---|---|"]
        for path in modules(package):
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            lines.append(f"| `{path.relative_to(ROOT).as_posix()}` | {first_sentence(doc)} |")
    return "\n".join(lines) + "\n"


def with_map(text: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{module_map()}{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args()
    text = DOC.read_text(encoding="utf-8")
    if args.check:
        return 0 if with_map(text) == text else 1
    DOC.write_text(with_map(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
