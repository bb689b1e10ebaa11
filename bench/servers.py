"""The servers and processes the load benches start and watch: a Streamlit process or the nginx
recipe on loopback, its health, and the memory and CPU of its process tree (read in /proc).

Used by bench/load.py, bench/hostile.py and bench/load_class.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# ----------------------------------------------------------------------------- memory


def process_tree(root: int) -> list[int]:
    """root and all its descendants, from /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def tree_rss_and_cpu(root: int) -> tuple[int, float]:
    """(RSS bytes, CPU seconds) summed over the process tree."""
    rss, cpu = 0, 0.0
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    for pid in process_tree(root):
        try:
            rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue  # the process ended between the listing and the read
    return rss, cpu


class MemorySampler:
    """Samples the RSS of a process tree every `every` seconds in a background thread."""

    def __init__(self, root: int, every: float = 0.5):
        self.root, self.every = root, every
        self.samples: list[tuple[float, int]] = []  # (seconds since start, bytes)
        self.root_samples: list[int] = []  # bytes of the root process alone, same times
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()
        self.cpu_start = tree_rss_and_cpu(root)[1]

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - self._t0, tree_rss_and_cpu(self.root)[0]))
            self.root_samples.append(process_rss(self.root))
            self._stop.wait(self.every)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.cpu_used = tree_rss_and_cpu(self.root)[1] - self.cpu_start

    @property
    def peak(self) -> int:
        return max((b for _, b in self.samples), default=0)

    @property
    def root_peak(self) -> int:
        """The root process's own peak (the tree's peak also counts its children)."""
        return max(self.root_samples, default=0)


def process_rss(pid: int) -> int:
    """RSS bytes of one process (0 when it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


# ----------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout: float = 90.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not become healthy in {timeout:.0f} s")


def server_env(models_dir: str | None, model: str | None) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if models_dir:
        env["TINYGPT_MODELS_DIR"] = str(Path(models_dir).resolve())
    if model:
        env["TINYGPT_DEFAULT_MODEL"] = model
    return env


def start_app(port: int, env: dict) -> subprocess.Popen:
    """One Streamlit process on 127.0.0.1:port, in its own process group."""
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port),
           "--browser.gatherUsageStats", "false"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def start_cluster(k: int, port: int, backend_port: int, env: dict) -> subprocess.Popen:
    """deploy/run_cluster.sh: k Streamlit processes (from backend_port on) behind nginx."""
    env = dict(env, TINYGPT_PROCESSES=str(k), TINYGPT_PORT=str(port),
               TINYGPT_BACKEND_PORT=str(backend_port))
    return subprocess.Popen(["bash", str(ROOT / "deploy" / "run_cluster.sh")], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    """Stop a server started here (its whole process group) and wait for it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
