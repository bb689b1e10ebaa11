"""The scale-out recipe: nginx configuration (checked by nginx itself) and the Dockerfile."""

from __future__ import annotations

import http.server
import random
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NGINX = shutil.which("nginx")
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed")


def nginx_check(config: Path, prefix: Path) -> subprocess.CompletedProcess:
    (prefix / "tmp").mkdir(parents=True, exist_ok=True)
    return subprocess.run([NGINX, "-t", "-p", str(prefix), "-e", "stderr", "-c", str(config)],
                          capture_output=True, text=True, timeout=30)


def generated_config(tmp_path: Path, processes: int) -> str:
    """The configuration run_cluster.sh would start nginx with, for `processes` backends."""
    out = tmp_path / f"k{processes}"
    subprocess.run(["bash", str(DEPLOY / "run_cluster.sh"), "--config-only", str(out)],
                   check=True, timeout=30, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "TINYGPT_PROCESSES": str(processes),
                        "TINYGPT_PORT": "9100", "TINYGPT_BACKEND_PORT": "9200"})
    return (out / "nginx.conf").read_text()


@needs_nginx
def test_shipped_nginx_config_is_valid(tmp_path):
    result = nginx_check(DEPLOY / "nginx.conf", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


@needs_nginx
@pytest.mark.parametrize("processes", [1, 2, 4])
def test_run_cluster_writes_a_valid_config_for_k_processes(tmp_path, processes):
    text = generated_config(tmp_path, processes)
    servers = re.findall(r"server 127\.0\.0\.1:(\d+);", text)
    assert servers == [str(9200 + i) for i in range(processes)]
    assert "listen 127.0.0.1:9100;" in text
    result = nginx_check(tmp_path / f"k{processes}" / "nginx.conf", tmp_path / "prefix")
    assert result.returncode == 0, result.stderr


def test_nginx_config_is_sticky_and_passes_websockets():
    text = (DEPLOY / "nginx.conf").read_text()
    upstream = re.search(r"upstream tinygpt \{(.*?)\}", text, re.S).group(1)
    assert re.search(r"^\s*(ip_hash|hash \$\w+)", upstream, re.M), "no sticky sessions"
    stream = re.search(r"location /_stcore/stream \{(.*?)\}", text, re.S).group(1)
    assert "proxy_set_header Upgrade $http_upgrade" in stream
    assert "proxy_set_header Connection $connection_upgrade" in stream
    assert "proxy_http_version 1.1" in stream
    timeout = re.search(r"proxy_read_timeout (\d+)s", stream)
    assert timeout and int(timeout.group(1)) >= 3600  # an idle student keeps the session
    for listen in re.findall(r"^\s*listen ([^;]+);", text, re.M):
        assert listen.startswith("127.0.0.1:")  # loopback unless the operator says otherwise
    for backend in re.findall(r"server ([\d.]+):\d+;", upstream):
        assert backend == "127.0.0.1"


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(m.group(1).upper(), m.group(2).strip())
            for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.M)]


def test_dockerfile_recipe():
    steps = dockerfile_instructions()
    kinds = [k for k, _ in steps]
    args = dict(steps)  # the last of each kind
    assert steps[0] == ("FROM", "python:3.11-slim")
    assert any("pip install" in a for k, a in steps if k == "RUN")
    assert any(k == "COPY" and "requirements.txt" in a for k, a in steps)
    assert "OPENBLAS_NUM_THREADS=1" in " ".join(a for k, a in steps if k == "ENV")
    assert args["EXPOSE"] == "8501"
    user = args["USER"]
    assert user and user not in ("root", "0")
    assert kinds.index("USER") < kinds.index("CMD")  # the app does not run as root
    health = args["HEALTHCHECK"]
    assert "/_stcore/health" in health and "127.0.0.1:8501" in health


def test_dockerfile_copies_everything_the_app_imports():
    """The entry point, the pages, the app's package, the hosting wing (a container serves a
    class) and the core: a forgotten COPY would only show in the container."""
    copied = " ".join(a for k, a in dockerfile_instructions() if k == "COPY")
    for needed in ("app.py", "pages/", "tinygpt/", "tinygpt_app/", "tinygpt_hosting/", "models/",
                   ".streamlit/"):
        assert needed in copied, needed


def test_dockerfile_fetches_nothing_at_run_time():
    """Downloads belong to the build (RUN); what runs in the container stays offline."""
    for kind, arg in dockerfile_instructions():
        if kind in ("CMD", "ENTRYPOINT", "HEALTHCHECK"):
            assert not re.search(r"\b(pip|curl|wget|apt-get|git)\b", arg), (kind, arg)
            for url in re.findall(r"https?://([^/'\"]+)", arg):
                assert url.split(":")[0] in ("127.0.0.1", "localhost"), (kind, url)
        if kind == "ADD":
            assert "://" not in arg, "ADD with a URL downloads during the build, unpinned"


def test_dockerignore_keeps_tests_and_history_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", "tests", "runs", "**/__pycache__"):
        assert entry in ignored
    assert "models" not in ignored  # the shipped model is part of the image


# ----------------------------------------------------------------------------- stickiness


def free_ports(count: int) -> int:
    """The first of `count` consecutive free loopback ports."""
    for _ in range(50):
        first = random.randrange(20000, 40000)
        sockets = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free ports")


class _Echo(http.server.BaseHTTPRequestHandler):
    """A stand-in backend: answers every request with its own port."""

    def do_GET(self):
        body = str(self.server.server_port).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@needs_nginx
def test_nginx_keeps_each_browser_on_one_backend(tmp_path):
    """The cookie nginx hands out on the first visit pins a browser to one process, while
    different browsers (even from one address, as a whole class behind a school NAT) spread."""
    first = free_ports(3)
    backends = [http.server.ThreadingHTTPServer(("127.0.0.1", first + 1 + i), _Echo)
                for i in range(2)]
    for server in backends:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "cluster"
    subprocess.run(["bash", str(DEPLOY / "run_cluster.sh"), "--config-only", str(out)],
                   check=True, timeout=30, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "TINYGPT_PORT": str(first),
                        "TINYGPT_BACKEND_PORT": str(first + 1)})
    nginx = subprocess.Popen([NGINX, "-p", str(out), "-e", "stderr", "-c",
                              str(out / "nginx.conf"), "-g", "daemon off;"],
                             stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{first}/"
        for _ in range(100):  # wait for nginx to listen
            try:
                urllib.request.urlopen(url, timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        seen_first = []
        for _ in range(20):  # twenty browsers
            with urllib.request.urlopen(url, timeout=5) as r:
                cookie = r.headers["Set-Cookie"].split(";", 1)[0]
                backend = r.read()
            assert cookie.startswith("tinygpt_backend=")
            seen_first.append(backend)
            for _ in range(3):  # the same browser comes back: the same process answers
                request = urllib.request.Request(url, headers={"Cookie": cookie})
                with urllib.request.urlopen(request, timeout=5) as r:
                    assert r.read() == backend
        assert len(set(seen_first)) == 2  # 20 browsers did not all land on one process
    finally:
        nginx.terminate()
        nginx.wait(10)
        for server in backends:
            server.shutdown()
