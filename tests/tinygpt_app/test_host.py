"""tinygpt_app.host: the app for one user by default (no turn to wait for, no address, every
Streamlit feature beyond the public API off, generations one after the other with the same
tokens as tinygpt.generate), and the hosting wing found in one place, or not at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygpt.decoding.generation import Run, generate, read_prompt
from tinygpt.network.model import GPT, GPTConfig
from tinygpt_app import host

ROOT = Path(__file__).resolve().parents[2]
RUNS = [Run(6, "greedy"), Run(6, "sample", temperature=0.8, top_k=9, seed=3),
        Run(5, "beam", num_beams=3, record_steps=False)]


@pytest.fixture(scope="module")
def model() -> GPT:
    return GPT(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=5)


def test_one_user_waits_for_nothing_and_has_no_address():
    one = host.ONE_USER
    with one.turn(), one.outside_the_line():
        assert one.run_cost() is None
    assert one.address_key("203.0.113.7") == "" and one.steps is None
    assert one.class_page is None and one.configure_process() is None


def test_one_user_uses_streamlit_through_its_public_api_only():
    public = host.PublicOnly()
    assert public.check() == {} and public.session_id() == ""
    assert public.leave_pages_directory_mode() is False and public.page_hash(object()) is None
    assert public.session_counts() is None and public.drop_expired_sessions() == 0
    assert public.session_alive("tab") is None
    assert public.install_widget_check(lambda *a: True, lambda w: None) is False


@pytest.mark.parametrize("with_prompt", [False, True])
def test_one_user_generations_are_tinygpt_generate_one_after_the_other(model, with_prompt):
    ids = np.array([3, 1, 4, 1, 5])
    prompt = read_prompt(model, ids) if with_prompt else None
    made = host.generate_one_by_one(model, ids, RUNS, prompt)
    for run, got in zip(RUNS, made, strict=True):
        alone = generate(model, ids, run.max_new_tokens, run.strategy,
                         temperature=run.temperature, top_k=run.top_k, num_beams=run.num_beams,
                         seed=run.seed, record_steps=run.record_steps)
        np.testing.assert_array_equal(got.tokens, alone.tokens)


def test_one_user_reads_nothing_off_a_longer_run(model):
    longer = generate(model, np.array([1, 2]), 8)
    assert host.ONE_USER.read_off_longer(longer, Run(8), Run(4), 32) is None


WITHOUT = """
import json, sys
sys.modules["tinygpt_hosting"] = None  # not installed
from tinygpt_app import host
print(json.dumps([host.load_wing(), host.load_wing(), host.host().name, host.wing_loaded()]))
"""


def test_without_the_wing_the_app_serves_one_user():
    done = subprocess.run([sys.executable, "-c", WITHOUT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [False, False, "one user", False]


BROKEN = """
import sys
sys.modules["tinygpt_hosting.serving.fair_share"] = None  # a part of the wing fails to import
from tinygpt_app import host
try:
    host.load_wing()
except ImportError as err:
    print("raised", err.name)
"""


def test_a_wing_that_fails_to_import_is_an_error_not_one_user_mode():
    done = subprocess.run([sys.executable, "-c", BROKEN], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.stdout.strip() == "raised tinygpt_hosting.serving.fair_share", done.stderr
