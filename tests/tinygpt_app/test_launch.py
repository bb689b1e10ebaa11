"""`tinygpt-app`: the project's Streamlit settings as flags, and an installed package (a wheel
built from this repository, in a fresh venv, run from another folder) serving Home on the
shipped model; `tinygpt-train --help` works there too."""

from __future__ import annotations

import os
import shutil
import site
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tinygpt_app import launch, settings

ROOT = Path(__file__).resolve().parents[2]
# what the wheel is built from: the repository without what it does not ship
NOT_SHIPPED = shutil.ignore_patterns(".git", "tests", "bench", "docs", "runs", "build", "deploy",
                                     "scripts", "*.egg-info", "__pycache__", ".*_cache", ".venv")


def test_config_flags_are_the_shipped_config(tmp_path):
    flags = launch.config_flags(ROOT / ".streamlit" / "config.toml")
    assert "--server.fileWatcherType=none" in flags
    assert "--server.headless=true" in flags and "--runner.postScriptGC=false" in flags
    assert "--client.toolbarMode=viewer" in flags
    assert "--theme.light.primaryColor=#2f6f9f" in flags  # nested tables: dotted names
    config = tmp_path / "config.toml"
    config.write_text('[a]\nb = 1\n[a.c]\nd = "x y"\ne = false\n')
    assert launch.config_flags(config) == ["--a.b=1", "--a.c.d=x y", "--a.c.e=false"]


def test_streamlit_args_run_this_app_and_the_callers_flags_come_last():
    args = launch.streamlit_args(["--server.port", "8600"])
    assert args[:2] == ["run", str(settings.ROOT / "app.py")]
    assert args[-2:] == ["--server.port", "8600"]  # click keeps the last of a repeated option


def test_a_config_too_large_is_refused_before_it_is_read(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("# " + "x" * launch.MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ValueError, match="larger than"):
        launch.config_flags(config)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env() -> dict[str, str]:
    """This environment without what would point the installed app at the repository."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("TINYGPT_")}
    return env | {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _venv_seeing_our_packages(venv: Path) -> Path:
    """bin/ of a new venv that sees the packages this interpreter sees, and nothing of this
    repository. `venv --system-site-packages` would not do: run from inside a venv, it gives the
    base interpreter's site-packages, not the venv's (where `pip install -r ...` put streamlit).
    So a .pth file adds this interpreter's site directories, after the new venv's own (its
    .pth files are read too: site.addsitedir)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)
    own, = venv.glob("lib/python*/site-packages")
    ours = [d for d in site.getsitepackages() if Path(d).is_dir()]
    (own / "_the_tests_packages.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in ours))
    return venv / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv (this interpreter's packages: nothing downloaded) with a wheel of this
    repository installed in it (pip install, not editable). The wheel is built by this
    interpreter's setuptools, from a copy (the build writes build/ beside its source)."""
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SHIPPED)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-w", str(base / "wheel"), str(source)],
                           cwd=base, env=_clean_env(), capture_output=True, text=True,
                           timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    bin_dir = _venv_seeing_our_packages(base / "venv")
    wheel, = (base / "wheel").glob("tinygpt-*.whl")
    done = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps",
                           "--ignore-installed", str(wheel)], cwd=base, env=_clean_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return bin_dir


@pytest.mark.slow
def test_the_installed_package_finds_its_files_and_runs_home(installed, tmp_path):
    check = textwrap.dedent("""
        import tinygpt_app, tinygpt.train.corpus as corpus
        from streamlit.testing.v1 import AppTest
        from tinygpt_app import settings
        from tinygpt_app.compute.models import available_models
        assert "site-packages" in tinygpt_app.__file__, tinygpt_app.__file__
        import tinygpt_hosting
        from tinygpt_app import host
        assert "site-packages" in tinygpt_hosting.__file__, tinygpt_hosting.__file__
        assert host.load_wing() and host.host().name == "class server"  # the wheel has the wing
        assert settings.ROOT.name == "_app", settings.ROOT
        models = available_models()
        assert models == ["shakespeare.npz", "shakespeare_llama.npz"], models
        assert corpus.DATA_DIR.name == "_data" and len(corpus.load_corpus("val")) > 10_000
        at = AppTest.from_file(str(settings.ROOT / "app.py"), default_timeout=120).run()
        assert not at.exception and not at.error, (at.exception, at.error)
        print(at.title[0].value)
        """)
    done = subprocess.run([str(installed / "python"), "-c", check], cwd=tmp_path,
                          env=_clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "tinygpt" in done.stdout

    helped = subprocess.run([str(installed / "tinygpt-train"), "--help"], cwd=tmp_path,
                            env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "--resume" in helped.stdout, helped.stderr


@pytest.mark.slow
def test_tinygpt_app_serves_the_app_from_another_folder(installed, tmp_path):
    port = _free_port()
    server = subprocess.Popen([str(installed / "tinygpt-app"), "--server.address", "127.0.0.1",
                               "--server.port", str(port)], cwd=tmp_path, env=_clean_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        health = ""
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                            timeout=2) as answer:
                    health = answer.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert health == "ok", server.poll()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
            assert answer.status == 200 and "<html" in answer.read().decode().lower()
    finally:
        server.terminate()
        try:
            output, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            output, _ = server.communicate()
    assert "Traceback" not in output, output[-3000:]
