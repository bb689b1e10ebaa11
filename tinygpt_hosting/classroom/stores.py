"""Which class store to open: SQLite (one machine) or Redis (several), from an address.

Here, not in store.py: both stores build on store.py, so the module that picks between them
imports both (and neither imports this one).
"""

from __future__ import annotations

from tinygpt_app import settings
from tinygpt_hosting.classroom.store import ClassStore, data_dir
from tinygpt_hosting.classroom.store_sqlite import SqliteClassStore


def open_class_store(url: str | None = None) -> ClassStore:
    """The store named by `url`, default TINYGPT_CLASS_STORE: empty or "sqlite" for the SQLite
    file in data_dir(), redis:// (or rediss://, unix://) for Redis."""
    url = settings.class_store_url() if url is None else url.strip()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from tinygpt_hosting.classroom.store_redis import (
            RedisClassStore,  # redis only when asked for
        )

        return RedisClassStore(url)
    if url in ("", "sqlite"):
        return SqliteClassStore(data_dir() / "classes.sqlite3")
    # the URL itself is not repeated: it may hold a password
    raise ValueError("TINYGPT_CLASS_STORE must be empty (SQLite) or a redis:// URL")
