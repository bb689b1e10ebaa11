"""The /64 class (issue 45), for bench/hostile.py: one IPv6 /64, many addresses.

A home or a phone gets a whole IPv6 /64 and may pick any address in it. The app's caps per
client address count a /64 as one (serving.client_address.address_key). The attackers here
connect from 127.0.0.1, a trusted proxy (uvicorn's FORWARDED_ALLOW_IPS default), and name their
address in X-Forwarded-For as nginx would: each a fresh address of one /64, with a fresh
browser token each time. Counted: seats taken in a real class, new sessions opened at once,
classes started.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from bench import pranks

PREFIX = "2001:db8:45"  # each case takes its addresses from a /64 of its own under it


def address(n: int, case: int = 1) -> str:
    """The n-th address of case `case`'s /64 (a new one for every try)."""
    return f"{PREFIX}:{case}::{n + 1:x}"


async def seats(url: str, code: str, tries: int) -> dict:
    """Fresh browsers from fresh addresses of the /64, one after another, joining `code`."""
    rng, got, refused = random.Random(45_000), 0, 0
    for n in range(tries):
        try:
            tab, seated = await pranks.join_class(url, code, rng, "127.0.0.1", pranks.new_token(),
                                                  "v6", forwarded_for=address(n))
            await tab.close()
        except Exception:  # noqa: BLE001 - refused at the door, or a timeout
            seated = False
        got, refused = got + seated, refused + (not seated)
    return {"tried": tries, "seated": got, "refused": refused}


async def sessions_at_once(url: str, count: int, first: int) -> dict:
    """`count` new sessions opened at once, each from its own address of the /64."""
    async def one(n: int) -> bool:
        tab = pranks.BrowserTab(url, random.Random(n), forwarded_for=address(first + n, 3))
        try:
            await tab.connect()
            await tab.rerun(page="")
            return True
        except Exception:  # noqa: BLE001
            return False
        finally:
            await tab.close()

    served = sum(await asyncio.gather(*(one(n) for n in range(count))))
    return {"tried": count, "served": served, "refused": count - served}


async def class_starts(url: str, tries: int, first: int) -> dict:
    """Start a class from fresh browsers at fresh addresses of the /64."""
    rng, made = random.Random(46_000), 0
    for n in range(tries):
        tab = pranks.BrowserTab(url, rng, token=pranks.new_token(),
                                forwarded_for=address(first + n, 2))
        try:
            await tab.connect()
            await tab.rerun(page="Class")
            if "Start a class" in tab.widgets:
                await tab.rerun(values={"Start a class": True})
                made += any(len(c) == 6 for c in tab.codes)
        except Exception:  # noqa: BLE001
            pass
        finally:
            await tab.close()
    return {"tried": tries, "started": made}


def ipv6_class(url: str, data_dir: Path, tries: int = 40) -> dict:
    """Every /64 case against a real class; what the /64 got and how long each took."""
    room, new = pranks.real_class(data_dir)
    rows = {}
    for name, run in (("seats", lambda: seats(url, new.code, tries)),
                      ("classes started", lambda: class_starts(url, 12, 10_000)),
                      ("new sessions at once", lambda: sessions_at_once(url, 60, 20_000))):
        start = time.monotonic()
        rows[name] = asyncio.run(run())
        rows[name]["seconds"] = round(time.monotonic() - start, 1)
        print(f"/64 {name}: {rows[name]}", flush=True)
    rows["seats in the real class"] = room.teacher_view(new.code, new.secret).students
    return rows
