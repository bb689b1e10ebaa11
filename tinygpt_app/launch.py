"""`tinygpt-app`: serve the app, Home and every page on the shipped model, from wherever the
package was installed; the same as `streamlit run app.py` in the repository.

    pip install .            # then, from any folder:
    tinygpt-app              # http://localhost:8501
    tinygpt-app --server.port 8600 --server.address 0.0.0.0
    python -m tinygpt_app.launch ...   # the same, without installing the package

The app's files (app.py, pages/, models/, .streamlit/config.toml) are the repository's when it
runs from a checkout, or their copy inside the installed package (settings.ROOT). Streamlit
reads its config.toml from the folder it is started in, so the project's settings (no file
watcher, no developer menu, the themes, ...) are passed as flags instead, read from the shipped
config.toml; flags given to tinygpt-app come after them and win. The working folder stays the
caller's (Streamlit finds pages/ beside app.py, the app finds models/ through settings), so
relative paths given by the caller keep their meaning.
"""

from __future__ import annotations

import runpy
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

from tinygpt_app import host, settings

MAX_CONFIG_BYTES = 64 * 2**10  # the shipped config.toml is 2 KB


def app_script() -> Path:
    """The app's entry point: app.py of the repository or of the installed package."""
    return settings.ROOT / "app.py"


def config_flags(config: Path) -> list[str]:
    """A Streamlit config.toml as command-line flags: [server] headless = true ->
    --server.headless=true; nested tables ([theme.light]) give dotted names."""
    if config.stat().st_size > MAX_CONFIG_BYTES:
        raise ValueError(f"{config.name} is larger than {MAX_CONFIG_BYTES} bytes")
    with config.open("rb") as f:
        table = tomllib.load(f)
    return [f"--{name}={_flag_text(value)}" for name, value in _options(table)]


def _options(table: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _options(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _flag_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # TOML's and Streamlit's spelling, not Python's
    if isinstance(value, (list, tuple)):
        raise ValueError("list settings cannot be passed as flags")
    return str(value)


def streamlit_args(extra: list[str]) -> list[str]:
    """`streamlit run <app.py> <the project's flags> <extra>`, without the program name."""
    root = settings.ROOT
    return ["run", str(app_script()), *config_flags(root / ".streamlit" / "config.toml"),
            *extra]


def main(argv: list[str] | None = None) -> int:
    """Run the Streamlit server in this process until it is stopped (Ctrl-C), exactly as
    `python -m streamlit run ...` would: Streamlit's command line is its public interface (its
    Python entry point is not), and one process means a stop signal reaches the server itself.

    The door on new sessions is put in place first, before the server takes its first request:
    under `streamlit run app.py` it comes with the first page run, and 78 of 80 sessions opened
    from one address right after a start got through before it (issue 45). The door is the
    hosting wing's (tinygpt_hosting): without it the app serves one user, and there is no door."""
    sys.argv = ["streamlit", *streamlit_args(sys.argv[1:] if argv is None else argv)]
    host.load_wing()
    host.host().before_serving()
    try:
        runpy.run_module("streamlit", run_name="__main__", alter_sys=True)
    except SystemExit as done:  # the command line ends by exiting with its status
        return done.code if isinstance(done.code, int) else 0
    return 0


if __name__ == "__main__":  # python -m tinygpt_app.launch ... (deploy/, the Dockerfile)
    sys.exit(main())
