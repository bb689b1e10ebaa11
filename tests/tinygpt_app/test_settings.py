"""Server settings from the environment: parsed strictly, a bad value falls back to its default
with a logged warning (and breaks no page); process-wide settings change only when the entry
point asks, never on import."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest

from tests.apptest_support import FIXTURES, ROOT
from tinygpt_app import settings

BAD_ENV = {
    "TINYGPT_SWITCH_INTERVAL_MS": "0",
    "TINYGPT_MAX_TRAININGS": "abc",
    "TINYGPT_BLAS_THREADS": "1.5",
    "TINYGPT_TRACE_CACHE_MB": "-5",
}


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("name, raw", [*BAD_ENV.items(), ("TINYGPT_SWITCH_INTERVAL_MS", "nan"),
                                       ("TINYGPT_SWITCH_INTERVAL_MS", "inf"),
                                       ("TINYGPT_MAX_TRAININGS", "1e3"),
                                       ("TINYGPT_BLAS_THREADS", "0")])
def test_a_bad_value_gives_the_default_and_a_warning(monkeypatch, caplog, name, raw):
    monkeypatch.setattr(settings, "_warned", set())  # what earlier tests logged
    read = {"TINYGPT_SWITCH_INTERVAL_MS": settings.switch_interval_ms,
            "TINYGPT_MAX_TRAININGS": settings.max_trainings,
            "TINYGPT_BLAS_THREADS": settings.blas_threads,
            "TINYGPT_TRACE_CACHE_MB": settings.trace_cache_bytes}[name]
    monkeypatch.delenv(name, raising=False)
    default = read()
    monkeypatch.setenv(name, raw)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert read() == default
    assert name in caplog.text


def test_good_values_are_used(monkeypatch, caplog):
    monkeypatch.setenv("TINYGPT_SWITCH_INTERVAL_MS", " 2.5 ")
    monkeypatch.setenv("TINYGPT_MAX_TRAININGS", "3")
    monkeypatch.setenv("TINYGPT_TRACE_CACHE_MB", "")  # blank: the default, quietly
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert settings.switch_interval_ms() == 2.5
        assert settings.max_trainings() == 3
        assert settings.trace_cache_bytes() == 768 * 2**20
    assert not caplog.text


def test_pages_run_with_bad_environment_values():
    """In a fresh process (the values are read when the app's modules load): every page runs,
    and the entry point applies the defaults."""
    pytest.importorskip("streamlit", reason="the app tests need streamlit")
    result = run_python("""
        import sys
        from streamlit.testing.v1 import AppTest
        from tinygpt_app.compute import caches
        from tinygpt_app.training import job as training
        from tinygpt_app.kit.navigation import PAGE_FILES
        for page in ["app.py", *PAGE_FILES]:
            at = AppTest.from_file(page, default_timeout=120)
            at.query_params["prompt"] = "Hello"
            at.run()
            assert not at.exception and not at.error, (page, at.exception, at.error)
        assert sys.getswitchinterval() == 0.0005, sys.getswitchinterval()
        assert training.MAX_TRAININGS == 1
        assert caches.TRACE_CACHE.max_bytes == 768 * 2**20
        print("ok")
        """, {**BAD_ENV, "TINYGPT_MODELS_DIR": str(FIXTURES), "TINYGPT_DEFAULT_MODEL": "tiny.npz"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok" in result.stdout
    assert "TINYGPT_MAX_TRAININGS='abc'" in result.stderr  # the warning is in the server log


def test_importing_the_app_package_changes_no_process_setting():
    result = run_python("""
        import sys
        import numpy  # loads BLAS, so that threadpool_info sees it
        from threadpoolctl import threadpool_info
        before = (sys.getswitchinterval(), [p["num_threads"] for p in threadpool_info()])
        import tinygpt_app.compute.caches, tinygpt_app.kit.frame, tinygpt_app.kit.state
        import tinygpt_app.training.job
        import tinygpt_app.kit.widgets
        after = (sys.getswitchinterval(), [p["num_threads"] for p in threadpool_info()])
        assert before == after, (before, after)
        from tinygpt_app import settings
        settings.configure_process()
        assert sys.getswitchinterval() == 0.0005
        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
        print("ok")
        """, {"OPENBLAS_NUM_THREADS": "2", "TINYGPT_SWITCH_INTERVAL_MS": "0.5"})
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_bad_value_is_logged_once_not_on_every_read(monkeypatch, caplog):
    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv("TINYGPT_PAGE_RUNS", "lots")
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert [settings.page_runs() for _ in range(3)] == [2, 2, 2]
    assert caplog.text.count("TINYGPT_PAGE_RUNS='lots'") == 1


def test_a_bad_class_store_address_gives_sqlite_and_hides_the_address(monkeypatch, caplog):
    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv("TINYGPT_CLASS_STORE", "postgres://user:hunter2@db/x")
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert settings.class_store_url() == ""
    assert "TINYGPT_CLASS_STORE" in caplog.text and "hunter2" not in caplog.text
    monkeypatch.setenv("TINYGPT_CLASS_STORE", " redis://127.0.0.1:6379/0 ")
    assert settings.class_store_url() == "redis://127.0.0.1:6379/0"
    monkeypatch.setenv("TINYGPT_CLASS_STORE", "sqlite")
    assert settings.class_store_url() == ""


def test_text_settings_and_their_defaults(monkeypatch, tmp_path):
    for name in ("TINYGPT_DATA_DIR", "TINYGPT_MODELS_DIR", "TINYGPT_DEFAULT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    assert settings.data_dir() == settings.ROOT / "runs"
    assert settings.models_dir() == settings.ROOT / "models"
    assert settings.default_model_name() is None
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TINYGPT_DEFAULT_MODEL", " gpt2 ")
    assert settings.data_dir() == tmp_path
    assert settings.default_model_name() == "gpt2"


def test_the_repository_keeps_its_data_in_its_own_runs_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TINYGPT_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert not settings.installed()  # the tests run from the repository
    assert settings.data_dir() == ROOT / "runs"


def test_installed_from_a_wheel_the_data_goes_to_the_current_folder(monkeypatch, tmp_path):
    """Not into site-packages (tinygpt_app/_app/runs), which a normal user may not write."""
    monkeypatch.delenv("TINYGPT_DATA_DIR", raising=False)
    monkeypatch.setattr(settings, "ROOT", settings.PACKAGE / "_app")
    monkeypatch.chdir(tmp_path)
    assert settings.installed()
    assert settings.data_dir() == tmp_path / "runs"
    monkeypatch.setenv("TINYGPT_DATA_DIR", str(tmp_path / "mine"))
    assert settings.data_dir() == tmp_path / "mine"


SETTING = re.compile(r"TINYGPT_[A-Z0-9_]+")


def _settings_defined() -> set[str]:
    return set(SETTING.findall((ROOT / "tinygpt_app" / "settings.py").read_text()))


def _caps_table() -> str:
    """The rows of docs/serving.md's caps table (under "What one student can cost: the caps";
    in the README until issue 25 gave it a short front page)."""
    text = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    after = text[text.index("### What one student can cost: the caps"):]
    lines = after[after.index("| what | cap | where |"):].splitlines()
    end = next(i for i, line in enumerate(lines) if not line.strip())  # the table's end
    return "\n".join(lines[:end])


def test_every_setting_is_in_the_caps_table():
    defined = _settings_defined()
    assert len(defined) >= 17, defined  # the test reads the names it checks
    table = _caps_table()
    missing = sorted(name for name in defined if f"`{name}" not in table)
    assert not missing, f"read in settings.py, not in docs/serving.md's caps table: {missing}"


def test_only_settings_py_reads_the_environment():
    """Every TINYGPT_* variable is read in settings.py: one policy for a bad value."""
    read = re.compile(r"""(environ(\.get)?\s*[(\[]|getenv\()\s*["']TINYGPT_""")
    sources = [ROOT / "app.py", *(ROOT / "pages").rglob("*.py"),
               *(ROOT / "tinygpt").rglob("*.py"), *(ROOT / "tinygpt_app").rglob("*.py")]
    assert len(sources) > 50
    readers = [str(path.relative_to(ROOT)) for path in sources
               if read.search(path.read_text(encoding="utf-8"))]
    # the one reader outside the app: `python -m tinygpt.models get` honours the models folder
    # the app reads, with the same policy (blank means the default), and tinygpt cannot import
    # the app's settings (the arrows point the other way)
    assert readers == ["tinygpt/models/fetch.py", "tinygpt_app/settings.py"]


@pytest.mark.parametrize("raw, read", [
    ("", None), ("  ", None), (" https://tinygpt.school.example/app ",
                               "https://tinygpt.school.example/app"),
    ("http://192.168.1.20:8501", "http://192.168.1.20:8501"),
])
def test_the_public_url(monkeypatch, raw, read):
    monkeypatch.setenv("TINYGPT_PUBLIC_URL", raw)
    assert settings.public_url() == read


@pytest.mark.parametrize("raw", ["tinygpt.example", "javascript:alert(1)", "ftp://host/",
                                 "http://", "http://a b.example/"])
def test_a_public_url_that_is_no_web_address_is_ignored_with_a_warning(monkeypatch, caplog,
                                                                        raw):
    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv("TINYGPT_PUBLIC_URL", raw)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert settings.public_url() is None
    assert "TINYGPT_PUBLIC_URL" in caplog.text
