"""The app without the hosting wing (issue 44): every page, Home first, runs for one user on the
shipped model in a process where `tinygpt_hosting` cannot be imported, with no exception and no
error box, and the Class page says in one line that class mode is not installed.

The pages run in a child process: this one has the wing imported already. Each page runs as
it does on its own (AppTest.from_file); Home (app.py) looks for the wing as on a server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from tests.apptest_support import CLASS, ROOT  # noqa: E402

CHILD = """
import json, sys
sys.modules["tinygpt_hosting"] = None  # not installed: any import of it fails
from tests.apptest_support import NORMAL, PAGES, open_page
from tinygpt_app import host
seen = {}
for page in PAGES:
    at = open_page(page, NORMAL)
    seen[page] = {"exceptions": [str(e.value) for e in at.exception],
                  "errors": [str(e.value) for e in at.error],
                  "info": [str(e.value) for e in at.info]}
print(json.dumps({"pages": seen, "host": host.host().name, "loaded": host.wing_loaded(),
                  "wing": sorted(m for m in sys.modules if m.startswith("tinygpt_hosting."))}))
"""


@pytest.fixture(scope="module")
def without_the_wing(tmp_path_factory) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYGPT_")}  # shipped model
    env.update(PYTHONPATH=str(ROOT), TINYGPT_DATA_DIR=str(tmp_path_factory.mktemp("data")))
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_page_runs_for_one_user_without_the_wing(without_the_wing):
    assert without_the_wing["host"] == "one user" and without_the_wing["loaded"] is False
    assert without_the_wing["wing"] == []  # nothing of it was imported
    for page, seen in without_the_wing["pages"].items():
        assert seen["exceptions"] == [] and seen["errors"] == [], page


def test_the_class_page_says_class_mode_is_not_installed(without_the_wing):
    said = without_the_wing["pages"][CLASS]["info"]
    assert len(said) == 1 and said[0].startswith("Class mode is not installed"), said
