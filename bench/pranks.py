"""The pranksters of issue 26, for bench/hostile.py: each from a loopback address of its own.

The whole 127.0.0.0/8 range is loopback: a websocket bound to 127.0.0.7 reaches a server on
127.0.0.1 and the app sees 127.0.0.7, another machine (only 127.0.0.1 is the server's own).
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import string
import time
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg

from bench.load import ACTION_TIMEOUT, AppError, Student, _get_cookie

FRESH_SESSIONS, CLASS_FLOOD, SEAT_FLOOD = "127.0.0.2", "127.0.0.3", "127.0.0.4"
ROUND_STUFFER, SESSION_FLOOD, SHARED_CLASS = "127.0.0.5", "127.0.0.6", "127.0.0.50"
REAL_TEACHER = "127.0.0.40"
TOKEN_WIDGET = "browser_token.component"  # kit.browser_token.WIDGET_KEY: its element id ends so


def new_token() -> str:
    """A browser token as kit.browser_token makes one (43 URL-safe characters)."""
    return secrets.token_urlsafe(32)


class BrowserTab(Student):
    """A tab from `source`, which reports `token` as the app's browser-token component does
    (a JSON widget state on the component's id, after the first run that mounted it)."""

    def __init__(self, base_url: str, rng: random.Random, *, source: str = "127.0.0.1",
                 token: str | None = None, timeout: float = ACTION_TIMEOUT,
                 forwarded_for: str | None = None) -> None:
        super().__init__(base_url, rng, timeout)
        self.source, self.token = source, token
        self.forwarded_for = forwarded_for  # sent as a proxy would: the client's address
        self.component_id = ""
        self.reported = False
        self.codes: list[str] = []  # the st.code texts of the last run (a class code, links)

    async def connect(self) -> None:
        cookie = await asyncio.to_thread(_get_cookie, self.base_url + "/")
        ws_url = self.base_url.replace("http://", "ws://") + "/_stcore/stream"
        headers = {"Cookie": cookie} if cookie else {}
        if self.forwarded_for:  # from 127.0.0.1, a trusted proxy (FORWARDED_ALLOW_IPS)
            headers["X-Forwarded-For"] = self.forwarded_for
        self.ws = await asyncio.wait_for(websockets.connect(
            ws_url, subprotocols=["streamlit"], max_size=None, additional_headers=headers,
            open_timeout=self.timeout, local_addr=(self.source, 0)), self.timeout)

    def _note(self, fm, kind) -> None:
        if kind == "new_session":
            self.codes = []
        if kind != "delta" or fm.delta.WhichOneof("type") != "new_element":
            return
        element = fm.delta.new_element
        if (element.WhichOneof("type") == "bidi_component"
                and element.bidi_component.id.endswith("-" + TOKEN_WIDGET)):
            # the browser token's component, by its key (the page has other components: the
            # sidebar's closer; a report sent to that one would be a token never heard)
            self.component_id = element.bidi_component.id
        elif element.WhichOneof("type") == "code":
            self.codes.append(element.code.code_text)

    async def rerun(self, query: dict | None = None, page: str | None = None,
                    values: dict[str, object] | None = None) -> float:
        seconds = await super().rerun(query=query, page=page, values=values)
        if self.token and self.component_id and not self.reported:
            await self.report_token(query)
        return seconds

    async def report_token(self, query: dict | None) -> None:
        """What the component's script does on a page's first run: a rerun with the token."""
        from urllib.parse import urlencode

        msg = BackMsg()
        msg.rerun_script.query_string = urlencode(query or {})
        msg.rerun_script.page_script_hash = self.page_hash
        state = msg.rerun_script.widget_states.widgets.add()
        state.id = self.component_id
        state.json_value = json.dumps({"token": self.token})
        await self.ws.send(msg.SerializeToString())
        await asyncio.wait_for(self._read_until_finished(), self.timeout)
        self.reported = True


@dataclass
class Tally:
    """What the pranksters tried and got."""

    tried: dict[str, int] = field(default_factory=dict)
    got: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    client_lag: dict = field(default_factory=dict)  # the bench's own loop (hostile.loop_lag)

    def count(self, book: dict[str, int], what: str) -> None:
        book[what] = book.get(what, 0) + 1


DOOR_CLOSED = 1013  # serving.session_door: "try again later", before any session was made


def why(err: BaseException) -> str:
    """What a prankster got instead of a page: the door's refusal (a websocket closed with 1013
    before Streamlit made a session: a refusal, what the door is for), else the error's kind."""
    received = getattr(err, "rcvd", None)  # websockets.ConnectionClosed: the close frame
    if getattr(received, "code", None) == DOOR_CLOSED:
        return "refused at the door (new sessions per address)"
    return type(err).__name__


def long_prompt(rng: random.Random, words: int = 180) -> str:
    return " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
                    for _ in range(words))


async def one_request(url: str, rng: random.Random, source: str, token: str | None,
                      tally: Tally, what: str, **rerun) -> BrowserTab | None:
    """Open a new session, make one request, keep the tab open (the caller closes it)."""
    tab = BrowserTab(url, rng, source=source, token=token)
    tally.count(tally.tried, what)
    try:
        await tab.connect()
        await tab.rerun(**rerun)
        tally.count(tally.got, what)
        return tab
    except AppError as err:
        tally.count(tally.refused, f"{what}: {str(err)[:80]}")
        return tab
    except Exception as err:  # noqa: BLE001 - a timeout or a refused connection
        tally.count(tally.refused, f"{what}: {why(err)}")
        await tab.close()
        return None


async def fresh_session_per_request(url: str, deadline: float, tally: Tally, number: int) -> None:
    rng = random.Random(20_000 + number)
    while time.monotonic() < deadline:
        token = new_token() if rng.random() < 0.5 else None
        tab = await one_request(url, rng, FRESH_SESSIONS, token, tally, "fresh session",
                                page="Attention", query={"prompt": long_prompt(rng)})
        if tab:
            await tab.close()


async def class_flood(url: str, deadline: float, tally: Tally) -> None:
    """Start a class, again and again, from fresh sessions; then heavy pages as its teacher."""
    rng = random.Random(30_000)
    while time.monotonic() < deadline:
        tab = await one_request(url, rng, CLASS_FLOOD, new_token(), tally, "open Class",
                                page="Class")
        if tab is None:
            continue
        try:
            if "Start a class" in tab.widgets:
                await tab.rerun(values={"Start a class": True})
                made = any(len(c) == 6 for c in tab.codes)
                tally.count(tally.got if made else tally.refused, "class started")
                await tab.rerun(page="Attention", query={"prompt": long_prompt(rng)})
                tally.count(tally.got, "heavy page as a teacher nobody follows")
        except Exception as err:  # noqa: BLE001
            tally.count(tally.refused, f"class flood: {why(err)}")
        finally:
            await tab.close()


async def join_class(url: str, code: str, rng: random.Random, source: str,
                     token: str | None, nickname: str,
                     forwarded_for: str | None = None) -> tuple[BrowserTab, bool]:
    """A tab that joins class `code`; whether it got a seat."""
    tab = BrowserTab(url, rng, source=source, token=token, forwarded_for=forwarded_for)
    await tab.connect()
    await tab.rerun(page="Class", query={"class": code})
    if "Join the class" not in tab.widgets:
        return tab, False
    try:
        await tab.rerun(values={"Nickname (optional)": nickname, "Join the class": True},
                        query={"class": code})
    except AppError:
        return tab, False
    return tab, "Leave the class" in tab.widgets


async def seat_flood(url: str, code: str, deadline: float, tally: Tally, number: int) -> None:
    rng = random.Random(40_000 + number)
    while time.monotonic() < deadline:
        tally.count(tally.tried, "seat")
        try:
            tab, seated = await join_class(url, code, rng, SEAT_FLOOD, new_token(), "prank")
            await tab.close()
        except Exception as err:  # noqa: BLE001
            tally.count(tally.refused, f"seat: {why(err)}")
            continue
        tally.count(tally.got if seated else tally.refused, "seat")


async def round_stuffer(url: str, code: str, deadline: float, tally: Tally,
                        times: int = 40) -> None:
    """One browser: Leave -> Join forty times (each a new session, the same token)."""
    rng, token = random.Random(50_000), new_token()
    for _ in range(times):
        if time.monotonic() >= deadline:
            break
        tally.count(tally.tried, "rejoin from one browser")
        try:
            tab, seated = await join_class(url, code, rng, ROUND_STUFFER, token, "stuffer")
            await tab.close()
        except Exception as err:  # noqa: BLE001
            tally.count(tally.refused, f"rejoin: {why(err)}")
            continue
        tally.count(tally.got if seated else tally.refused, "rejoin from one browser")


async def session_flood(url: str, deadline: float, tally: Tally, sessions: int = 300) -> None:
    """Open many sessions (one cheap page each), until the deadline, and drop them."""
    rng = random.Random(60_000)
    tabs = []
    for _ in range(sessions):
        if time.monotonic() >= deadline:  # the attack's window, as for every prankster
            break
        tab = await one_request(url, rng, SESSION_FLOOD, None, tally, "session", page="")
        if tab:
            tabs.append(tab)
    for tab in tabs:
        await tab.close()


def real_class(data_dir: Path, address: str = REAL_TEACHER):
    """A real teacher starts a class during the floods (through the app's class rules and the
    server's own store); returns (classroom, new class)."""
    from tinygpt_hosting.classroom.rules import Classroom, Limits
    from tinygpt_hosting.classroom.store_sqlite import SqliteClassStore

    room = Classroom(SqliteClassStore(data_dir / "classes.sqlite3"), Limits())
    return room, room.create_class(browser=new_token(), address=address)


async def pranks(url: str, data_dir: Path, duration: float, tally: Tally) -> dict:
    """Every prankster at once for `duration` seconds, and a real teacher and student among
    them; returns what the real ones got."""
    deadline = time.monotonic() + duration
    room, new = real_class(data_dir)
    real = {"teacher started a class": True}
    tasks = [fresh_session_per_request(url, deadline, tally, n) for n in range(3)]
    tasks += [class_flood(url, deadline, tally)]
    tasks += [seat_flood(url, new.code, deadline, tally, n) for n in range(8)]
    tasks += [round_stuffer(url, new.code, deadline, tally), session_flood(url, deadline, tally)]
    everyone = asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(duration / 2)
    tab, seated = await join_class(url, new.code, random.Random(1), "127.0.0.41", new_token(),
                                   "real student")
    real["real student seated"] = seated
    await tab.close()
    await everyone
    seats = room.teacher_view(new.code, new.secret).students
    real["seats in the real class"] = seats
    try:
        room.create_class(address="127.0.0.42")
        real["another real teacher started a class after the floods"] = True
    except Exception as err:  # noqa: BLE001
        real["another real teacher started a class after the floods"] = str(err)[:100]
    return real
