"""tinygpt_hosting.plug: register() puts the class server in place of the one-user host and the
live class on every page; the class server's generations (all runs in one batched step, shared
with other sessions) give the same tokens as one user's, one run after the other."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("streamlit", reason="the hosting wing runs in a Streamlit app")

from tinygpt.decoding.generation import Run, read_prompt  # noqa: E402
from tinygpt.network.model import GPT, GPTConfig  # noqa: E402
from tinygpt_app import host  # noqa: E402
from tinygpt_app.kit import hooks  # noqa: E402
from tinygpt_hosting import plug, streamlit_internals  # noqa: E402
from tinygpt_hosting.classroom import class_page  # noqa: E402
from tinygpt_hosting.classroom import hooks as class_hooks  # noqa: E402

RUNS = [Run(6, "greedy"), Run(6, "sample", temperature=0.8, top_p=0.9, seed=3),
        Run(5, "beam", num_beams=3, record_steps=False)]


def test_register_puts_the_class_server_and_the_live_class_in_place(monkeypatch):
    monkeypatch.setattr(host, "_host", host.ONE_USER)  # both put back after the test
    monkeypatch.setattr(hooks, "_registered", {})
    plug.register()
    server = host.host()
    assert server is plug.CLASS_SERVER and server.streamlit is streamlit_internals
    assert server.class_page is class_page.draw
    assert list(hooks._registered) == [class_hooks.NAME]


@pytest.mark.parametrize("with_prompt", [False, True])
def test_the_class_servers_generations_equal_one_users(with_prompt):
    model = GPT(GPTConfig(vocab_size=40, n_ctx=32, n_embd=16, n_head=2, n_layer=2), seed=5)
    ids = np.array([3, 1, 4, 1, 5])
    prompt = read_prompt(model, ids) if with_prompt else None
    shared = plug.CLASS_SERVER.generate_runs(model, ids, RUNS, prompt)
    alone = host.ONE_USER.generate_runs(model, ids, RUNS, prompt)
    for a, b in zip(shared, alone, strict=True):
        np.testing.assert_array_equal(a.tokens, b.tokens)
