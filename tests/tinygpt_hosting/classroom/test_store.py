"""classroom.store: the one interface of the class store, and its two backends.

The behaviour behind the interface is the contract tests/tinygpt_hosting/classroom/test_rules.py
(and test_rules_moderation.py, test_resume.py) run against both backends: SQLite in a
temporary directory and a real redis-server on loopback. Here: that both backends are that
interface, method for method, and that the class reaches the store through it alone.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from tinygpt_hosting.classroom.store import ClassStore
from tinygpt_hosting.classroom.store_redis import RedisClassStore
from tinygpt_hosting.classroom.store_sqlite import SqliteClassStore

CLASSROOM = Path(__file__).resolve().parents[3] / "tinygpt_hosting" / "classroom"


def public(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_")}


@pytest.mark.parametrize("backend", [SqliteClassStore, RedisClassStore])
def test_each_backend_is_the_interface_method_for_method(backend):
    """No method of its own (a second interface), none missing, the same signatures."""
    assert not inspect.isabstract(backend)
    assert public(backend) == public(ClassStore)
    for name in public(ClassStore):
        assert inspect.signature(getattr(backend, name)) == \
            inspect.signature(getattr(ClassStore, name)), name


def test_the_class_uses_every_method_of_the_interface():
    """Every method the contract tests run through the class is one the class calls, so both
    backends are tested on all of it (no method kept for tests only)."""
    text = "".join(path.read_text(encoding="utf-8") for path in CLASSROOM.rglob("*.py")
                   if not path.name.startswith("store"))
    called = set(re.findall(r"\bstore\.(\w+)\(", text))
    assert public(ClassStore) <= called, sorted(public(ClassStore) - called)
