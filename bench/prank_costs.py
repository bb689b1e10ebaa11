"""What each prankster of bench/pranks.py costs the server on its own (issue 26, fourth pass).

One server process, as bench/hostile.py starts it; each prank kind alone for `seconds` (no
class), then the server's turn counters (serving.turn_stats, through the registry report) say
how much CPU the process used, how much of it on its main thread (the event loop: handshakes,
sessions made and closed, pages sent), and how much was charged to a tab. Divided by the
sessions the door let in: a new session's cost, charged or not.

    flock /tmp/work/cpu.lock python bench/prank_costs.py --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import hostile, pranks  # noqa: E402
from bench.load import free_port, server_env, start_app, stop, wait_healthy, warm_up  # noqa: E402


def kinds(url: str, code: str) -> dict:
    """Each prank kind: (deadline, tally) -> a coroutine."""
    return {
        "fresh session x3": lambda d, t: asyncio.gather(
            *[pranks.fresh_session_per_request(url, d, t, n) for n in range(3)]),
        "class flood": lambda d, t: pranks.class_flood(url, d, t),
        "seat flood x8": lambda d, t: asyncio.gather(
            *[pranks.seat_flood(url, code, d, t, n) for n in range(8)]),
        "round stuffer": lambda d, t: pranks.round_stuffer(url, code, d, t),
        "session flood": lambda d, t: pranks.session_flood(url, d, t),
    }


def cost(name: str, before: dict, after: dict, tally: pranks.Tally) -> str:
    """One line: the process's CPU, its event loop's, what was charged; per session let in."""
    then, now = before["turns"], after["turns"]
    cpu = now["process_cpu_s"] - then["process_cpu_s"]
    loop = now["loop_cpu_s"] - then["loop_cpu_s"]
    charged = now["cpu_charged_s"] - then["cpu_charged_s"]
    refused = sum(v for k, v in tally.refused.items() if "door" in k)
    made = max(1, sum(tally.tried.values()) - refused)
    return (f"{name}: {made} sessions let in ({refused} refused at the door); CPU {cpu:.1f} s, "
            f"event loop {loop:.1f} s, charged {charged:.1f} s; per session: loop "
            f"{loop / made * 1000:.0f} ms, outside any turn and loop "
            f"{(cpu - loop - charged) / made * 1000:.0f} ms, "
            f"charged {charged / made * 1000:.0f} ms")


async def attack(job, seconds: float, tally: pranks.Tally) -> None:
    """Run one prank kind for `seconds` (its gathers need a running loop)."""
    await job(time.monotonic() + seconds, tally)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20.0, help="each prank kind runs this long")
    args = p.parse_args(argv)
    folder = hostile.models_folder()
    data_dir, report = folder.parent / "data", folder.parent / "registries.jsonl"
    env = dict(server_env(str(folder), "shakespeare.npz"), TINYGPT_DATA_DIR=str(data_dir),
               TINYGPT_REGISTRY_REPORT=str(report))
    port = free_port()
    server = start_app(port, env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        warm_up(url)
        _, new = pranks.real_class(data_dir)
        for name, job in kinds(url, new.code).items():
            before, tally = hostile.registries(report, data_dir), pranks.Tally()
            asyncio.run(attack(job, args.seconds, tally))
            print(cost(name, before, hostile.registries(report, data_dir), tally), flush=True)
    finally:
        stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
