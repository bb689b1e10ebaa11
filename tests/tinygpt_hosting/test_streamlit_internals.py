"""Streamlit's internals behind guards (tinygpt_hosting.streamlit_internals): today every name is
there; with a name removed (as an upgrade might), the feature that needs it is off, said once
in the log, and nothing raises."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("streamlit", reason="the app tests need streamlit")

from streamlit.runtime import Runtime  # noqa: E402
from streamlit.runtime.pages_manager import PagesManager  # noqa: E402

from tinygpt_hosting import streamlit_internals as si  # noqa: E402


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test starts with no feature off and the start-up check not yet made."""
    monkeypatch.setattr(si, "_degraded", {})
    monkeypatch.setattr(si, "_checked", False)
    monkeypatch.setattr(si, "_refusals_said", set())


def test_this_streamlit_has_every_name_the_app_uses():
    assert si.check() == {}
    for names in si.NEEDS.values():
        for module, path in names:
            si._look_up(module, path)  # raises if missing (a flag may be None)


def test_a_missing_name_turns_its_feature_off_once_in_the_log(monkeypatch, caplog):
    monkeypatch.delattr(Runtime, "exists")
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        off = si.check()
        si.check()
        assert si.serves_browsers() is False  # and the feature itself does not raise
        assert si.wake_session("any") is False
    assert list(off) == ["class push (students poll instead)"]
    said = [r.getMessage() for r in caplog.records if "class push" in r.getMessage()]
    assert len(said) == 1 and "exists" in said[0]


def test_outside_a_run_there_is_no_tab_and_no_page():
    assert si.session_id() == ""
    assert si.script_path_of_this_run() == ""
    assert si.serves_browsers() is False  # pytest is no Streamlit server
    assert si.wake_session("no such tab", page_hash="x") is False
    assert si.degraded() == {}


def test_leaving_the_pages_directory_mode_is_said_once(monkeypatch):
    monkeypatch.setattr(PagesManager, "uses_pages_directory", True)
    assert si.leave_pages_directory_mode() is True
    assert PagesManager.uses_pages_directory is False
    assert si.leave_pages_directory_mode() is False  # the rerun goes through app.py


def test_without_the_pages_directory_flag_a_deep_link_still_works(monkeypatch):
    monkeypatch.delattr(PagesManager, "uses_pages_directory")
    assert si.leave_pages_directory_mode() is False  # no rerun: the page runs as it is
    assert "deep link" in " ".join(si.degraded())


def test_a_page_without_its_hash_gives_none():
    class NoHash:
        pass

    assert si.page_hash(NoHash()) is None
    assert "teacher's page" in " ".join(si.degraded())



@pytest.mark.usefixtures("tiny_models")
def test_with_internal_names_gone_every_page_still_works(monkeypatch):
    """As after an upgrade that renamed them (those Streamlit's own test harness does not need
    itself): the features are off, every page draws."""
    from streamlit.runtime import app_session

    from tests.apptest_support import NORMAL, PAGES, assert_clean, open_page

    monkeypatch.delattr(PagesManager, "uses_pages_directory")  # (st.navigation sets it again)
    monkeypatch.delattr(app_session, "_populate_theme_msg")
    for page in PAGES:
        assert_clean(open_page(page, NORMAL))
    assert "the kept config sections (each rerun scans the config)" in si.check()


def unchecked_widget_reads(monkeypatch) -> None:
    """Streamlit's own WStates.__getitem__ again, as before kit.wire_check installed its check
    (restored after the test)."""
    from streamlit.runtime.state.session_state import WStates

    plain = getattr(WStates.__getitem__, "_tinygpt_original", WStates.__getitem__)
    monkeypatch.setattr(WStates, "__getitem__", plain)


def test_the_widget_check_wraps_streamlit_once(monkeypatch):
    from streamlit.runtime.state.session_state import WStates

    unchecked_widget_reads(monkeypatch)
    plain = WStates.__getitem__
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None)
    wrapped = WStates.__getitem__
    assert wrapped is not plain and wrapped._tinygpt_original is plain
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None)
    assert WStates.__getitem__ is wrapped  # a second install wraps nothing more
    assert si.degraded() == {}


@pytest.mark.usefixtures("tiny_models")
def test_without_the_widget_state_name_the_check_is_off_and_pages_work(monkeypatch, caplog):
    from streamlit.proto import WidgetStates_pb2
    from streamlit.runtime.state.session_state import WStates

    from tests.apptest_support import NORMAL, assert_clean, open_page
    from tinygpt_app.kit import wire_check

    unchecked_widget_reads(monkeypatch)
    plain = WStates.__getitem__
    monkeypatch.delattr(WidgetStates_pb2, "WidgetState")  # (Streamlit bound it at import)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert wire_check.install() is False
        assert si.WIDGET_CHECK in si.check()
        for page in ("pages/1_Lesson.py", "pages/8_Decoding.py"):
            at = open_page(page, NORMAL)
            assert_clean(at)
            assert not at.exception, [e.value for e in at.exception]
    assert WStates.__getitem__ is plain  # nothing was patched
    said = [r.getMessage() for r in caplog.records if si.WIDGET_CHECK in r.getMessage()]
    assert len(said) == 1 and "WidgetState" in said[0]


def test_a_renamed_widget_state_field_turns_the_check_off_at_install(monkeypatch):
    from streamlit.runtime.state.session_state import WStates

    unchecked_widget_reads(monkeypatch)
    plain = WStates.__getitem__
    fields = {name: f for name, f in WStates.__dataclass_fields__.items()
              if name != "widget_metadata"}  # as if an upgrade renamed it
    monkeypatch.setattr(WStates, "__dataclass_fields__", fields)
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None) is False
    assert WStates.__getitem__ is plain
    assert "widget_metadata" in si.degraded()[si.WIDGET_CHECK]


def test_a_field_gone_at_read_time_falls_back_to_streamlit_once(monkeypatch, caplog):
    """An upgraded WStates keeps its values elsewhere: the check turns off (said once) and
    Streamlit's own read answers, instead of every widget read raising AttributeError."""
    from streamlit.runtime.state.session_state import WStates

    class Upgraded:
        def __init__(self) -> None:
            self.entries = {"k": 5}

    monkeypatch.setattr(WStates, "__getitem__", lambda self, k: self.entries[k])
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert WStates.__getitem__(Upgraded(), "k") == 5
        assert WStates.__getitem__(Upgraded(), "k") == 5
    assert si.WIDGET_CHECK in si.degraded()
    said = [r.getMessage() for r in caplog.records if si.WIDGET_CHECK in r.getMessage()]
    assert len(said) == 1 and "states" in said[0]


def _serialized_states(deserializer) -> object:
    """A WStates holding one int sent by the browser for widget "w1" and one for "w2"."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState
    from streamlit.runtime.state.session_state import Serialized, WidgetMetadata, WStates

    states = WStates()
    for wid in ("w1", "w2"):
        states.states[wid] = Serialized(WidgetState(id=wid, int_value=3))
        states.widget_metadata[wid] = WidgetMetadata(
            id=wid, deserializer=deserializer, serializer=lambda v: v, value_type="int_value")
    return states


def test_a_deserializer_error_is_dropped_and_its_first_of_a_kind_logged(monkeypatch, caplog):
    unchecked_widget_reads(monkeypatch)
    refused: list[str] = []

    def buggy(value):
        raise ValueError("a real bug in a widget")

    assert si.install_widget_check(lambda sent, expected: True, refused.append)
    states = _serialized_states(buggy)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        for wid in ("w1", "w2"):
            with pytest.raises(KeyError):
                states[wid]
    assert refused == ["w1", "w2"]
    said = [r for r in caplog.records if "deserializer raised ValueError" in r.getMessage()]
    assert len(said) == 1 and "w1" in said[0].getMessage() and said[0].exc_info
    assert si.degraded() == {}


def test_a_value_that_deserializes_is_read_as_before(monkeypatch):
    unchecked_widget_reads(monkeypatch)
    assert si.install_widget_check(lambda sent, expected: True, lambda widget_id: None)
    assert _serialized_states(lambda value: value * 2)["w1"] == 6


def test_the_config_patch_is_all_or_nothing_when_connecting_fails(monkeypatch):
    """A changed on_config_parsed signature: nothing patched, start-up goes on."""
    from streamlit import config
    from streamlit.runtime import app_session

    def on_parsed_without_force(func):  # as if an upgrade dropped force_connect
        return lambda: None

    monkeypatch.setattr(config, "on_config_parsed", on_parsed_without_force)
    before = (config.get_options_for_section, app_session._populate_theme_msg,
              app_session._populate_config_msg)
    wrap = lambda f: (lambda *a, **k: f(*a, **k))  # noqa: E731
    assert si.patch_config_reads(wrap, wrap, lambda: None) is None
    assert (config.get_options_for_section, app_session._populate_theme_msg,
            app_session._populate_config_msg) == before
    said = si.degraded()["the kept config sections (each rerun scans the config)"]
    assert "force_connect" in said


def test_the_network_url_is_the_one_streamlit_prints(monkeypatch):
    from streamlit import config, net_util

    monkeypatch.setattr(net_util, "get_internal_ip", lambda: "192.168.1.20")
    monkeypatch.setattr(config, "is_manually_set", lambda name: False)
    real = config.get_option
    mine = {"server.address": None, "server.port": 8601, "browser.serverPort": 8601,
            "server.baseUrlPath": ""}
    monkeypatch.setattr(config, "get_option", lambda name: mine.get(name, real(name)))
    assert si.network_url().rstrip("/") == "http://192.168.1.20:8601"


def test_without_streamlits_network_helper_there_is_no_network_url(monkeypatch, caplog):
    from streamlit import net_util

    monkeypatch.delattr(net_util, "get_internal_ip")
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        assert si.network_url() is None
    assert si.NETWORK_LINK in si.degraded()


# ----------------------------------------------------------------------------- new sessions


class FakeManager:
    def __init__(self, kept: set[str]) -> None:
        self.kept = kept

    def get_session_info(self, session_id: str):
        return object() if session_id in self.kept else None


class FakeClient:
    class client_context:  # noqa: N801 - Streamlit's attribute name
        remote_ip = "10.0.0.7"


@pytest.fixture
def door(monkeypatch):
    """Runtime.connect_session as a recorder, restored afterwards; yields (calls, asked)."""
    calls, asked = [], []

    def plain(self, client, user_info, existing_session_id=None, session_id_override=None):
        calls.append(existing_session_id)
        return "new-session"

    monkeypatch.setattr(Runtime, "connect_session", plain)  # put back after the test
    yield calls, asked


def test_the_door_asks_before_a_new_session_and_lets_reconnects_through(door):
    from starlette.websockets import WebSocketDisconnect

    calls, asked = door
    verdicts = iter([True, False, True])
    assert si.install_session_door(lambda ip: asked.append(ip) or next(verdicts))
    wrapped = Runtime.connect_session
    assert si.install_session_door(lambda ip: True) and Runtime.connect_session is wrapped
    runtime = object.__new__(Runtime)
    runtime._session_mgr = FakeManager({"kept"})
    assert runtime.connect_session(FakeClient(), {}) == "new-session"
    with pytest.raises(WebSocketDisconnect) as refused:  # the endpoint's "browser went away"
        runtime.connect_session(FakeClient(), {})
    assert refused.value.code == 1013
    runtime.connect_session(FakeClient(), {}, existing_session_id="kept")  # a reconnect
    runtime.connect_session(FakeClient(), {}, existing_session_id="forgotten")  # new: asks
    assert asked == ["10.0.0.7"] * 3 and calls == [None, "kept", "forgotten"]


def test_a_client_without_its_address_turns_the_door_off_once(door, caplog):
    calls, asked = door
    assert si.install_session_door(lambda ip: asked.append(ip) or False)
    runtime = object.__new__(Runtime)
    runtime._session_mgr = FakeManager(set())
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        for _ in range(3):
            assert runtime.connect_session(object(), {}) == "new-session"  # let in
    assert si.SESSION_DOOR in si.degraded() and asked == [] and len(calls) == 3
    assert sum(si.SESSION_DOOR in r.getMessage() for r in caplog.records) == 1


def test_without_connect_session_there_is_no_door(monkeypatch):
    monkeypatch.delattr(Runtime, "connect_session")
    assert si.install_session_door(lambda ip: False) is False
    assert si.SESSION_DOOR in si.degraded()


def test_a_refused_socket_is_held_then_closed_and_no_more_than_max_held(monkeypatch):
    import asyncio
    import concurrent.futures

    closed, released = [], []

    class Socket:
        async def close(self, code: int, reason: str) -> None:
            closed.append((code, asyncio.get_running_loop().time()))

    class Client:
        def __init__(self) -> None:
            self._websocket = Socket()

        async def aclose(self) -> None:
            released.append(True)

    async def refuse_three() -> float:
        start, tasks = asyncio.get_running_loop().time(), []
        for client in (Client(), Client(), Client()):
            si._close_refused(client, 0.2, max_held=2)
            # what the endpoint does next, as it leaves: await the client's clean-up
            tasks.append(asyncio.ensure_future(client.aclose()))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return start

    monkeypatch.setattr(si, "_held", [0])
    # a fresh thread: an earlier test may leave this thread's loop marked as running
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        start = pool.submit(asyncio.run, refuse_three()).result(timeout=30)
    waits = sorted(when - start for _, when in closed)
    assert [code for code, _ in closed] == [1013] * 3 and len(released) == 3
    assert waits[0] < 0.1 and waits[1] >= 0.2 and waits[2] >= 0.2  # two held, the third not
    assert si._held == [0]
