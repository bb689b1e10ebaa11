"""kit.frame's turn and session come from the host (tinygpt_app.host): for one user no turn to
wait for and no session id; on a class server the hosting wing's fair turn."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit", reason="the page frame draws with streamlit")

from tinygpt_app import host  # noqa: E402
from tinygpt_app.kit import frame  # noqa: E402


def test_for_one_user_a_turn_waits_for_nothing(monkeypatch):
    monkeypatch.setattr(host, "_host", host.ONE_USER)
    with frame.fair_turn():
        pass
    assert frame.session_id() == ""


def test_on_a_class_server_the_turn_is_the_wings(monkeypatch):
    from tinygpt_hosting import plug
    from tinygpt_hosting.serving import fair_share

    monkeypatch.setattr(host, "_host", plug.CLASS_SERVER)
    monkeypatch.setenv("TINYGPT_FAIR_SHARE", "0")  # no bucket: outside a Streamlit run
    seen = []
    with frame.fair_turn():
        seen.append(fair_share.current_cost() is not None)  # this run's CPU is counted
    assert seen == [True] and fair_share.current_cost() is None
