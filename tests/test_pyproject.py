"""pyproject.toml: the same dependencies as the requirements files, both packages found, the
console scripts named (tests/tinygpt_app/test_launch.py installs it and runs them)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirements(name: str) -> list[str]:
    """The requirement lines of a requirements file, without comments and `-r` includes."""
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    found = [line.split("#")[0].strip() for line in lines]
    return [line for line in found if line and not line.startswith("-r")]


def test_dependencies_are_requirements_txt():
    assert sorted(PROJECT["dependencies"]) == sorted(requirements("requirements.txt"))


def test_extras_are_the_dev_and_parity_requirements():
    extras = PROJECT["optional-dependencies"]
    assert sorted(extras["dev"]) == sorted(requirements("requirements-dev.txt"))
    assert sorted(extras["parity"]) == sorted(requirements("requirements-parity.txt"))


def test_console_scripts_point_at_functions_that_exist():
    import importlib

    scripts = PROJECT["scripts"]
    assert set(scripts) == {"tinygpt-app", "tinygpt-train"}
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function))


def test_the_packages_and_their_subpackages_are_found():
    from setuptools import find_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set(find_packages(str(ROOT), include=config["packages"]["find"]["include"]))
    on_disk = {str(p.parent.relative_to(ROOT)).replace("/", ".")
               for top in ("tinygpt", "tinygpt_app", "tinygpt_hosting")
               for p in (ROOT / top).rglob("__init__.py")}
    assert found == on_disk
    assert {"tinygpt.network", "tinygpt_app.compute", "tinygpt_hosting.classroom"} <= found


def test_the_lesson_files_ship_in_the_wheel_and_the_sdist():
    setup_text = (ROOT / "setup.py").read_text(encoding="utf-8")
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()
    assert '"lessons/*.toml"], "tinygpt_app/_app", "."' in setup_text  # -> _app/lessons/
    assert "include lessons/*.toml" in manifest
    assert sorted(p.name for p in (ROOT / "lessons").glob("*.toml"))  # there is something
