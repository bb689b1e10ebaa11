"""The door on new sessions per client address (serving.session_door), on a fake clock.

The real server's side (a websocket past the burst closed with 1013, this machine exempt, a
reconnect let through) is tests/e2e/test_session_door.py.
"""

from __future__ import annotations

import logging

from tinygpt_hosting.serving.session_door import SessionDoor


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def door(burst: int = 4, per_minute: float = 6.0, **kwargs) -> tuple[SessionDoor, Clock]:
    clock = Clock()
    return SessionDoor(burst, per_minute, timer=clock, **kwargs), clock


def test_an_address_gets_its_burst_then_one_per_refill():
    gate, clock = door(burst=4, per_minute=6.0)  # one new session every 10 s
    assert [gate.admit("10.0.0.7") for _ in range(5)] == [True] * 4 + [False]
    clock.now += 9.9
    assert not gate.admit("10.0.0.7")
    clock.now += 0.2  # 10.1 s since the burst ran out: one token earned
    assert gate.admit("10.0.0.7") and not gate.admit("10.0.0.7")
    assert gate.refused == 3


def test_refused_tries_earn_nothing_and_the_bucket_never_holds_more_than_the_burst():
    gate, clock = door(burst=2, per_minute=60.0)
    clock.now += 3600  # an hour away: still only the burst
    assert [gate.admit("10.0.0.7") for _ in range(3)] == [True, True, False]
    for _ in range(50):  # 0.5 s of refused tries: they cost nothing, and earn nothing early
        clock.now += 0.01
        assert not gate.admit("10.0.0.7")
    clock.now += 0.4
    assert not gate.admit("10.0.0.7")
    clock.now += 0.11  # a second after the burst ran out: one token
    assert gate.admit("10.0.0.7")


def test_addresses_have_their_own_buckets_and_this_machine_none():
    gate, _ = door(burst=1)
    assert gate.admit("10.0.0.7") and not gate.admit("10.0.0.7")
    assert gate.admit("10.0.0.8")
    for local in ("127.0.0.1", "::1", "::ffff:127.0.0.1", None):
        assert all(gate.admit(local) for _ in range(10))
    assert len(gate) == 2  # this machine is not remembered


def test_one_spelling_per_machine_and_one_bucket_per_ipv6_network():
    gate, _ = door(burst=2)
    assert gate.admit("::ffff:10.0.0.7") and gate.admit("10.0.0.7")
    assert not gate.admit("10.0.0.7")
    # a phone may pick any address of its /64: one bucket for the network
    assert gate.admit("2001:db8::1") and gate.admit("2001:db8::2")
    assert not gate.admit("2001:db8::ffff")


def test_an_idle_address_is_forgotten_once_its_bucket_is_full_again():
    gate, clock = door(burst=4, per_minute=6.0)  # full again 40 s after its last use
    gate.admit("10.0.0.7")
    clock.now += 39
    assert len(gate) == 1
    clock.now += 2
    assert len(gate) == 0
    assert [gate.admit("10.0.0.7") for _ in range(5)] == [True] * 4 + [False]  # as it had


def test_the_registry_is_bounded():
    gate, _ = door(burst=1, max_addresses=3)
    for n in range(10):
        gate.admit(f"10.0.0.{n}")
    assert len(gate) == 3


def test_refusals_are_logged_once_a_minute_per_address(caplog):
    gate, clock = door(burst=1, per_minute=0.1)
    with caplog.at_level(logging.WARNING, logger="tinygpt.app"):
        for _ in range(100):
            gate.admit("10.0.0.7")
            clock.now += 0.1  # 10 s of refusals
        gate.admit("10.0.0.8")
        gate.admit("10.0.0.8")
        clock.now += 61
        gate.admit("10.0.0.7")
    lines = [r.getMessage() for r in caplog.records]
    assert sum("10.0.0.7" in line for line in lines) == 2
    assert sum("10.0.0.8" in line for line in lines) == 1


def test_strangers_past_their_first_few_share_one_door():
    """Four flooding addresses with no session that stayed: each opens its first few on its
    own tokens, then all of them together get one address's burst, not four."""
    from tinygpt_hosting.serving.session_door import STRANGER_FREE

    gate, clock = door(burst=10, per_minute=6.0)  # one token every 10 s
    floods = [f"10.0.1.{n}" for n in range(4)]
    opened = {a: sum(gate.admit(a) for _ in range(10)) for a in floods}
    assert sum(opened.values()) == 4 * STRANGER_FREE + 10  # not 4 x 10
    assert [opened[a] for a in floods] == [10, STRANGER_FREE + 4, STRANGER_FREE, STRANGER_FREE]
    clock.now += 10.1  # one shared token earned, taken by whoever asks first
    assert gate.admit(floods[3]) and not gate.admit(floods[2])
    # a student's tab from a new address still opens (its own first few)
    assert all(gate.admit("10.0.2.1") for _ in range(STRANGER_FREE))


def test_an_established_address_keeps_a_door_of_its_own():
    """A class whose students stayed keeps its whole burst while strangers flood; the mark
    lasts ESTABLISHED_TTL after the last stay, and this machine needs none."""
    from tinygpt_hosting.serving.session_door import ESTABLISHED_TTL, STRANGER_FREE

    gate, clock = door(burst=10, per_minute=6.0)
    gate.established("10.0.0.50")
    gate.established("127.0.0.1")  # nothing to remember
    for n in range(4):  # the strangers empty the shared bucket
        while gate.admit(f"10.0.1.{n}"):
            pass
    assert [gate.admit("10.0.0.50") for _ in range(11)] == [True] * 10 + [False]
    clock.now += ESTABLISHED_TTL + 1  # gone quiet: a stranger again, among floods again
    for n in range(4):
        while gate.admit(f"10.0.1.{n}"):
            pass
    assert sum(gate.admit("10.0.0.50") for _ in range(10)) == STRANGER_FREE


def test_a_stranger_that_keeps_trying_earns_no_free_sessions_back():
    """Its free few come back only once the address is forgotten (idle until its bucket is
    full again), not while it is held at the door and tries again now and then (its own
    bucket then fills up: counting free sessions from it gave a flood 4 more every minute)."""
    from tinygpt_hosting.serving.session_door import STRANGER_FREE

    gate, clock = door(burst=10, per_minute=6.0)  # a token every 10 s
    assert sum(gate.admit("10.0.1.0") for _ in range(STRANGER_FREE)) == STRANGER_FREE
    for other in ("10.0.1.1", "10.0.1.2"):  # two more floods empty the shared bucket
        while gate.admit(other):
            pass
    for _ in range(40):  # 200 s: 10.0.1.1 takes each shared token first; 10.0.1.0 is held
        clock.now += 5.0
        gate.admit("10.0.1.1")
        assert not gate.admit("10.0.1.0")
    clock.now += 101  # quiet long enough to be forgotten: its free few are given back
    assert sum(gate.admit("10.0.1.0") for _ in range(STRANGER_FREE)) == STRANGER_FREE


def test_a_known_address_is_one_whose_session_stayed():
    gate, _ = door()
    assert not gate.knows("10.0.0.50") and gate.knows("127.0.0.1")  # this machine: always
    gate.established("10.0.0.50")
    assert gate.knows("10.0.0.50") and not gate.knows("10.0.0.51")
