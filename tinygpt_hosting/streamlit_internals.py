"""Everything the app uses of Streamlit beyond its public API, in one place, each use guarded.

Streamlit may rename any of these in a minor release. Each function here catches that: the
feature that needed it degrades (and says which, once, in the log: `degraded()` lists them for
the start-up log line) and every page still works. Nothing else in the app imports from
``streamlit.runtime``, ``streamlit.navigation``, ``streamlit.config`` or ``streamlit.proto``
(tests/test_import_contracts.py checks it).

    session_id()                 this browser tab's id: fair shares, generation watching
    script_path_of_this_run()    the page file a run draws, for a page run on its own
    leave_pages_directory_mode() a deep link on a fresh server goes through app.py
    wake_session(...)            the class watcher reruns a student's tab (push, not poll)
    serves_browsers()            a Streamlit server runs in this process (not AppTest)
    session_counts()             sessions Streamlit keeps (the registry report)
    drop_expired_sessions()      abandoned sessions leave on time (compute.shared_cache's janitor)
    session_alive(...)           a closed tab's training stops (training.job)
    network_url()                the "Network URL" `streamlit run` prints: the class's links
    patch_config_reads(...)      server_tuning: keep Streamlit's config sections between reruns
    install_widget_check(...)    kit.wire_check: drop widget values sent with the wrong type
    install_session_door(...)    serving.session_door: refuse new sessions past an address's rate

The style sheet of projector mode targets Streamlit's ``data-testid`` names, internals too: it
is here (PROJECTOR_CSS) with the list of selectors it needs (PROJECTOR_SELECTORS), which a
browser test checks against a live page (tests/e2e/test_projector.py).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("tinygpt.app")

_degraded: dict[str, str] = {}  # feature -> what was missing, said once in the log
_lock = threading.Lock()


def _degrade(feature: str, err: BaseException) -> None:
    """Note (once per feature) that `feature` is off because Streamlit lacks what it used."""
    with _lock:
        if feature in _degraded:
            return
        _degraded[feature] = f"{type(err).__name__}: {err}"
    log.warning("Streamlit internals changed: %s is off (%s)", feature, _degraded[feature])


def degraded() -> dict[str, str]:
    """The features turned off so far, with what was missing (for the start-up log)."""
    with _lock:
        return dict(_degraded)


NETWORK_LINK = "the class's network link (the teacher's own address is used)"
WIDGET_CHECK = "the check of widget values sent over the websocket (a wrong type is let in)"
SESSION_DOOR = "the door on new sessions per client address (new sessions are not limited)"
EXPIRED_SESSIONS = "dropping abandoned sessions on time (they leave when new ones arrive)"

# What each feature needs: (module, attribute path), checked once at start-up by `check()`.
NEEDS: dict[str, list[tuple[str, str]]] = {
    "per-tab fair shares and class push": [
        ("streamlit.runtime.scriptrunner", "get_script_run_ctx")],
    "the page of a page file run on its own": [
        ("streamlit.runtime.pages_manager", "PagesManager.get_pages")],
    "the first deep link on a fresh server going through app.py": [
        ("streamlit.runtime.pages_manager", "PagesManager.uses_pages_directory")],
    "a pushed follow opening the teacher's page (the next run switches)": [
        ("streamlit.navigation.page", "StreamlitPage._script_hash")],
    "class push (students poll instead)": [
        ("streamlit.runtime", "Runtime.exists"), ("streamlit.runtime", "Runtime.instance"),
        ("streamlit.runtime.app_session", "AppSession.request_rerun"),
        ("streamlit.proto.ClientState_pb2", "ClientState")],
    "the kept config sections (each rerun scans the config)": [
        ("streamlit.config", "get_options_for_section"),
        ("streamlit.config", "on_config_parsed"),
        ("streamlit.runtime.app_session", "_populate_theme_msg"),
        ("streamlit.runtime.app_session", "_populate_config_msg")],
    NETWORK_LINK: [
        ("streamlit.net_util", "get_internal_ip"), ("streamlit.config", "is_manually_set"),
        ("streamlit.web.server.server_util", "get_url")],
    WIDGET_CHECK: [
        ("streamlit.runtime.state.session_state", "WStates.__getitem__"),
        ("streamlit.runtime.state.session_state", "Serialized"),
        ("streamlit.proto.WidgetStates_pb2", "WidgetState")],
    SESSION_DOOR: [
        ("streamlit.runtime", "Runtime.connect_session"),
        ("starlette.websockets", "WebSocketDisconnect")],
    EXPIRED_SESSIONS: [
        ("streamlit.runtime", "Runtime._get_async_objs"),
        ("streamlit.runtime.memory_session_storage", "MemorySessionStorage"),
        ("streamlit.runtime.caching.ttl_cache", "TTLCache.expire")],
}
_checked = False


def check() -> dict[str, str]:
    """Look up every internal name once per process (app.py, at start-up): each feature whose
    names are missing is logged once as off. Returns the features off."""
    global _checked
    if not _checked:
        _checked = True
        for feature, names in NEEDS.items():
            for module, path in names:
                try:
                    _look_up(module, path)
                except (ImportError, AttributeError) as err:
                    _degrade(feature, err)
                    break
    return degraded()


def _look_up(module: str, path: str) -> object:
    import importlib

    found: object = importlib.import_module(module)
    for name in path.split("."):
        found = getattr(found, name)
    return found


# ----------------------------------------------------------------------------- the running script


def _run_context() -> Any:
    """Streamlit's context of the script run on this thread (None outside a run)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError as err:
        _degrade("per-tab fair shares and class push", err)
        return None
    return get_script_run_ctx()


def session_id() -> str:
    """This browser tab's session id ("" outside a run, or when Streamlit no longer says)."""
    ctx = _run_context()
    try:
        return ctx.session_id if ctx is not None else ""
    except AttributeError as err:
        _degrade("per-tab fair shares and class push", err)
        return ""


def script_path_of_this_run() -> str:
    """The script file this run draws ("" when unknown). Only for a page run on its own, without
    app.py's st.navigation (which says it publicly: navigation.current_url_path)."""
    ctx = _run_context()
    if ctx is None:
        return ""
    try:
        info = ctx.pages_manager.get_pages().get(ctx.page_script_hash)
        return str(info["script_path"]) if info else ""
    except (AttributeError, KeyError, TypeError) as err:
        _degrade("the page of a page file run on its own", err)
        return ""


def leave_pages_directory_mode() -> bool:
    """Switch a fresh server from Streamlit's older pages/-folder mode to app.py's navigation;
    True if it was in that mode (the caller reruns, now through app.py).

    A pages/ folder exists, so until app.py has called st.navigation once, a deep link such as
    /Attention runs the page file alone. st.navigation sets the same class attribute.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager

        if PagesManager.uses_pages_directory:
            PagesManager.uses_pages_directory = False
            return True
    except (ImportError, AttributeError) as err:
        _degrade("the first deep link on a fresh server going through app.py", err)
    return False


# ----------------------------------------------------------------------------- waking a tab


def serves_browsers() -> bool:
    """Whether a Streamlit server runs in this process (AppTest and scripts have no tabs)."""
    try:
        from streamlit.runtime import Runtime

        return bool(Runtime.exists())
    except (ImportError, AttributeError) as err:
        _degrade("class push (students poll instead)", err)
        return False


def session_counts() -> tuple[int, int] | None:
    """(sessions Streamlit holds in memory, of which connected) in this process; None without a
    server. For the registry report (serving.registry_report). The first counts the abandoned
    sessions kept for a reconnect as memory holds them, the expired ones not yet dropped too
    (Streamlit's own count skips those: see drop_expired_sessions)."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return None
        manager = Runtime.instance()._session_mgr
        connected = int(manager.num_active_sessions())
        try:
            return connected + len(manager._session_storage._cache._data), connected
        except AttributeError:  # another storage: its own count
            return int(manager.num_sessions()), connected
    except (ImportError, AttributeError) as err:
        _degrade("registry report's session count", err)
        return None


def drop_expired_sessions(wait: float = 1.0) -> int:
    """Drop, now, the abandoned sessions whose server.disconnectedSessionTTL has passed; how
    many were dropped (0 without a server, when Streamlit changed, or past `wait` seconds).

    Streamlit keeps a tab whose browser went away (up to 128 of them) in a TTL cache, so that a
    reconnect finds its session, and removes an expired one only when that cache is next
    written to, by a new session. Measured after a flood of prank tabs (issue 26): 113 sessions
    (with their widgets, page globals and traces) still in memory two minutes after the last
    one left, while Streamlit counted 0. The drop runs on the server's event loop, the one
    thread that touches that cache; the caller waits for it at most `wait` seconds."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return 0
        runtime = Runtime.instance()
        stored = runtime._session_mgr._session_storage._cache
        loop = runtime._get_async_objs().eventloop
        expire = stored.expire
    except (ImportError, AttributeError, RuntimeError) as err:
        _degrade(EXPIRED_SESSIONS, err)
        return 0
    done, dropped = threading.Event(), []

    def drop() -> None:
        try:
            dropped.append(len(expire()))
        finally:
            done.set()

    try:
        loop.call_soon_threadsafe(drop)
    except RuntimeError:  # the server is stopping: its loop is closed
        return 0
    done.wait(wait)
    return dropped[0] if dropped else 0


def session_alive(session_id: str) -> bool | None:
    """Whether Streamlit still keeps session `session_id` (connected, or a closed tab within
    server.disconnectedSessionTTL, kept for a reconnect); None when no server runs in this
    process (AppTest, scripts) or Streamlit changed: then nobody can tell."""
    try:
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return None
        return Runtime.instance()._session_mgr.get_session_info(session_id) is not None
    except (ImportError, AttributeError) as err:
        _degrade("stopping a closed tab's training", err)
        return None


def network_url() -> str | None:
    """The address other machines reach this server at, found as `streamlit run` finds the
    "Network URL" it prints (the machine's own network address, the server's port and base
    path): browser.serverAddress when set; the one address the server listens on when it is
    not a wildcard; else the machine's network address. None when none is found."""
    try:
        from streamlit import config, net_util
        from streamlit.web.server import server_util

        if config.is_manually_set("browser.serverAddress"):
            host = config.get_option("browser.serverAddress")
        elif (address := config.get_option("server.address")) and \
                address not in ("0.0.0.0", "::"):  # noqa: S104 - compared, not bound
            host = address
        else:
            host = net_util.get_internal_ip()
        return server_util.get_url(host) if host else None
    except Exception as err:  # noqa: BLE001 - any rename in Streamlit: no network link
        _degrade(NETWORK_LINK, err)
        return None


def page_hash(page: object) -> str | None:
    """Streamlit's id of an st.Page (what a tab's client state names its page by)."""
    try:
        return str(page._script_hash)  # type: ignore[attr-defined]
    except AttributeError as err:
        _degrade("a pushed follow opening the teacher's page (the next run switches)", err)
        return None


def wake_session(session_id: str, *, page_hash: str | None = None,
                 query_string: str = "") -> bool:
    """Rerun a tab as Streamlit's "run on save" does (False if it is gone or cannot be woken).

    With `page_hash` (another page's), the rerun opens that page with `query_string`, as
    st.switch_page would: a student following the teacher elsewhere gets there in one run.
    """
    try:
        from streamlit.proto.ClientState_pb2 import ClientState
        from streamlit.runtime import Runtime

        if not Runtime.exists():
            return False
        session = Runtime.instance().get_app_session(session_id)
        loop = getattr(session, "_event_loop", None)
        last = getattr(session, "_client_state", None)
        if session is None or loop is None or not isinstance(last, ClientState):
            return False
        client_state = ClientState()
        client_state.CopyFrom(last)
        if page_hash and page_hash != client_state.page_script_hash:
            client_state.page_script_hash, client_state.page_name = page_hash, ""
            client_state.query_string = query_string
        loop.call_soon_threadsafe(session.request_rerun, client_state)
        return True
    except (ImportError, AttributeError) as err:
        _degrade("class push (students poll instead)", err)
        return False


# ----------------------------------------------------------------------------- server tuning


def patch_config_reads(keep_sections: Callable[[Callable], Callable],
                       build_once: Callable[[Callable], Callable],
                       forget: Callable[[], None]) -> Callable[[], None] | None:
    """Wrap Streamlit's config reads (serving.server_tuning): `keep_sections` wraps
    config.get_options_for_section, `build_once` the theme and config message builders of
    app_session, and `forget` runs whenever Streamlit parses its config again.

    All or nothing: if any name is missing nothing is patched (None), and Streamlit builds its
    theme on every rerun as it does by default. Returns what undoes the patch (the tests).
    """
    try:
        from streamlit import config
        from streamlit.runtime import app_session

        originals = (config.get_options_for_section, app_session._populate_theme_msg,
                     app_session._populate_config_msg, config.on_config_parsed)
    except (ImportError, AttributeError) as err:
        _degrade("the kept config sections (each rerun scans the config)", err)
        return None
    scan, theme, config_msg, on_parsed = originals
    try:  # connect first: if Streamlit's signature changed, nothing is patched yet
        disconnect = on_parsed(forget, force_connect=True)
    except TypeError as err:
        _degrade("the kept config sections (each rerun scans the config)", err)
        return None
    config.get_options_for_section = keep_sections(scan)
    app_session._populate_theme_msg = build_once(theme)
    app_session._populate_config_msg = build_once(config_msg)

    def undo() -> None:
        config.get_options_for_section = scan
        app_session._populate_theme_msg, app_session._populate_config_msg = theme, config_msg
        if callable(disconnect):
            disconnect()

    return undo


# ----------------------------------------------------------------------------- widget values


def install_widget_check(fits: Callable[[str | None, str | None], bool],
                         on_refused: Callable[[str], None]) -> bool:
    """Check every widget value a browser sends before the page reads it (kit.wire_check).

    Streamlit turns a received value into a Python value in one place, WStates.__getitem__.
    The wrapper asks `fits(sent field, widget's field)` (e.g. "string_value", "double_value")
    and also catches a value the widget's deserializer refuses. A refused value is dropped (the
    widget is as if nothing had been sent) and `on_refused(widget id)` is called. False, and
    the check is off, when Streamlit no longer has these names; if one goes missing later, the
    check turns itself off (once, in the log) and Streamlit reads the value itself. Cheap to
    repeat.
    """
    try:
        from streamlit.proto.WidgetStates_pb2 import WidgetState
        from streamlit.runtime.state.session_state import Serialized, WStates

        original = WStates.__getitem__
        missing = _widget_fields_missing(WStates, Serialized, WidgetState)
        if missing:
            raise AttributeError(f"no {missing}")
    except (ImportError, AttributeError, TypeError) as err:
        _degrade(WIDGET_CHECK, err)
        return False
    if getattr(original, "_tinygpt_checked", False):
        return True

    class Dropped(Serialized):
        """A refused value: read as "nothing sent" (KeyError), so Streamlit goes on with the
        widget's previous value, as it does for a value sent to a disabled widget."""

    def drop(states: Any, widget_id: str) -> None:
        # replaced, not removed: Streamlit may be looping over the states
        states.states[widget_id] = Dropped(WidgetState(id=widget_id))
        on_refused(widget_id)
        raise KeyError(widget_id)

    def checked_getitem(self: Any, k: str) -> Any:
        if WIDGET_CHECK in _degraded:
            return original(self, k)
        try:
            fit = _sent_fits(self, k, fits, Serialized, Dropped)
        except (AttributeError, TypeError) as err:  # a field renamed by an upgrade
            _degrade(WIDGET_CHECK, err)
            return original(self, k)
        if fit is None:
            return original(self, k)  # absent (KeyError) or already a Python value
        if not fit:
            drop(self, k)  # e.g. text for a slider: no deserializer expects it
        try:
            return original(self, k)
        except KeyError:
            raise
        except Exception as err:  # noqa: BLE001 - the deserializer refused what was sent
            _say_refused(k, err)
            drop(self, k)

    checked_getitem._tinygpt_checked = True  # type: ignore[attr-defined]
    checked_getitem._tinygpt_original = original  # type: ignore[attr-defined]  (the tests)
    WStates.__getitem__ = checked_getitem
    return True


def _field_names(cls: type) -> set[str]:
    """The fields instances of `cls` have: a dataclass's fields, else its annotations."""
    if dataclasses.is_dataclass(cls):
        return {field.name for field in dataclasses.fields(cls)}
    return {name for klass in cls.__mro__ for name in getattr(klass, "__annotations__", {})}


def _widget_fields_missing(wstates: type, serialized: type, widget_state: type) -> str:
    """What the widget check reads that these classes lack ("" when all is there)."""
    needed = ((wstates, ("states", "widget_metadata")), (serialized, ("value",)))
    missing = [f"{cls.__name__}.{name}" for cls, names in needed
               for name in names if name not in _field_names(cls)]
    if not hasattr(widget_state, "WhichOneof"):
        missing.append(f"{widget_state.__name__}.WhichOneof")
    return ", ".join(missing)


def _sent_fits(states: Any, k: str, fits: Callable[[str | None, str | None], bool],
               serialized: type, dropped: type) -> bool | None:
    """Whether the value sent for widget `k` has the widget's type (None: nothing sent to
    check). Raises KeyError for a value already dropped, AttributeError if a field is gone."""
    wstate = states.states.get(k)
    if isinstance(wstate, dropped):
        raise KeyError(k)
    if not isinstance(wstate, serialized):
        return None
    expected = getattr(states.widget_metadata.get(k), "value_type", None)
    return bool(fits(wstate.value.WhichOneof("value"), expected))


_refusals_said: set[str] = set()  # kinds of deserializer error logged (the first of each)
MAX_REFUSAL_KINDS = 16  # then no more: a client sending junk cannot flood the log


def _say_refused(widget_id: str, err: Exception) -> None:
    """Log the first deserializer error of each kind: usually a hostile value, but it may be
    a real bug in a widget, which must not go unseen."""
    kind = type(err).__name__
    with _lock:
        if kind in _refusals_said or len(_refusals_said) >= MAX_REFUSAL_KINDS:
            return
        _refusals_said.add(kind)
    log.warning("a widget's deserializer raised %s on the value sent for %s (value dropped; "
                "only the first %s is logged)", kind, widget_id[:80], kind,
                exc_info=(type(err), err, err.__traceback__))


# ----------------------------------------------------------------------------- new sessions


def install_session_door(admit: Callable[[str | None], bool], *, hold_seconds: float = 0.0,
                         max_held: int = 0) -> bool:
    """Ask `admit(client's address)` before Streamlit makes a new session (serving.session_door).

    Streamlit makes every session in one place, Runtime.connect_session, called by its websocket
    endpoint once the socket is accepted. The wrapper lets a reconnect through (an
    existing_session_id that Streamlit still keeps) and asks `admit` about the rest. A refused
    one gets no session: the endpoint is left the way a browser that went away leaves it
    (WebSocketDisconnect, which it catches: no traceback), and its socket is held open
    `hold_seconds` (at most `max_held` at once in the process; the others at once) before it is
    closed with 1013 ("try again later"). Held, a script that loops on refusals waits instead of
    costing the server's event loop a handshake every millisecond (measured: 0.7 ms of a core
    each, 1,400 a second from 8 connections). False, and nothing is limited, when Streamlit no
    longer has these names; a name missing later turns the door off (once, in the log).
    Cheap to repeat (the first door stays).
    """
    try:
        from starlette.websockets import WebSocketDisconnect
        from streamlit.runtime import Runtime

        original = Runtime.connect_session
    except (ImportError, AttributeError) as err:
        _degrade(SESSION_DOOR, err)
        return False
    if getattr(original, "_tinygpt_door", False):
        return True

    def connect_session(self: Any, client: Any, user_info: Any,
                        existing_session_id: str | None = None,
                        session_id_override: str | None = None) -> str:
        if SESSION_DOOR not in _degraded and not _keeps_session(self, existing_session_id):
            try:
                ip = client.client_context.remote_ip
            except AttributeError as err:
                _degrade(SESSION_DOOR, err)
            else:
                if not admit(ip):
                    _close_refused(client, hold_seconds, max_held)
                    raise WebSocketDisconnect(code=1013)
        return original(self, client, user_info, existing_session_id=existing_session_id,
                        session_id_override=session_id_override)

    connect_session._tinygpt_door = True  # type: ignore[attr-defined]
    Runtime.connect_session = connect_session  # type: ignore[method-assign]
    return True


def _keeps_session(runtime: Any, session_id: str | None) -> bool:
    """Whether `session_id` names a session Streamlit still keeps (a reconnect, not new)."""
    if not session_id:
        return False
    try:
        return runtime._session_mgr.get_session_info(session_id) is not None
    except AttributeError as err:
        _degrade(SESSION_DOOR, err)
        return True  # the door is off from now on: let it through


REFUSED_REASON = "too many new sessions from this address; try again in a minute"
_held = [0]  # refused sockets held open now (on the event loop's thread only)


def _close_refused(client: Any, hold_seconds: float, max_held: int) -> None:
    """Make the refused client's clean-up, which the endpoint awaits last (client.aclose), first
    hold the socket `hold_seconds` (if fewer than `max_held` are held), then close it with
    1013. Runs on the server's event loop (connect_session is called there). Without
    Streamlit's websocket at hand, the server drops the connection at once instead."""
    import asyncio

    websocket, release = getattr(client, "_websocket", None), getattr(client, "aclose", None)
    if websocket is None or release is None:
        return
    hold = hold_seconds if _held[0] < max_held else 0.0

    async def aclose() -> None:
        _held[0] += 1
        try:
            if hold > 0:
                await asyncio.sleep(hold)
            await websocket.close(code=1013, reason=REFUSED_REASON)
        except Exception:  # noqa: BLE001,S110 - already gone: nothing to tell it
            pass
        finally:
            _held[0] -= 1
            await release()

    client.aclose = aclose  # this client only: Streamlit's class is not touched
