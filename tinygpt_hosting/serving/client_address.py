"""Which machine a browser tab talks from, in one spelling, for caps per client address.

Streamlit's public ``st.context.ip_address`` gives None for a local connection (127.0.0.1 and
::1) and may give an IPv4 address in its IPv6-mapped form (``::ffff:127.0.0.1``): `streamlit
run` listens on ``::`` (both IPv4 and IPv6), so an IPv4 client is seen through IPv6. All
spellings of one machine must count as one address.

Whose address that is: Streamlit 1.67 serves through uvicorn (starlette), whose proxy-headers
middleware replaces the TCP peer with the last untrusted entry of ``X-Forwarded-For`` only when
the peer is listed in ``FORWARDED_ALLOW_IPS`` (default ``127.0.0.1,::1``). Behind nginx or an
ingress that variable must name the proxy, or every student is the proxy's address
(docs/class_limits.md, deploy/). Other loopback addresses (127.0.0.2, ...) stay themselves:
they are other clients (bench/hostile.py's attackers use them).
"""

from __future__ import annotations

import ipaddress

LOOPBACK = "127.0.0.1"


def client_address(ip: object) -> str:
    """`ip` (st.context.ip_address) as one spelling per machine: None, ::1 and
    ``::ffff:127.0.0.1`` are 127.0.0.1, ``::ffff:a.b.c.d`` is a.b.c.d, IPv6 in its short
    form, anything unparsable kept as given (cut to 64 chars)."""
    if not isinstance(ip, str):  # None (Streamlit's "this machine"), or a test harness's value
        return LOOPBACK
    try:
        parsed = ipaddress.ip_address(ip.strip())
    except ValueError:
        return ip.strip()[:64]  # not an address: still one key, and a bounded one
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            parsed = parsed.ipv4_mapped
        elif parsed.is_loopback:  # ::1
            return LOOPBACK
    return str(parsed)


def address_group(address: str) -> str:
    """The unit one person can hardly multiply: an IPv4 address itself, an IPv6 address's /64
    network (one home or phone gets a whole /64 and may pick any address in it)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def address_key(address: object) -> str:
    """The one key of every cap per client address (the session door, seats, class starts, the
    training line, the teacher key's failures): `address` (a client_address spelling, or a
    raw st.context.ip_address) as its address group, an IPv6 address as its /64: one home or
    phone picks any address of its /64, and must not get a seat per address. A key already made
    is its own key; anything not an address is kept as given, cut to 64 chars."""
    if not isinstance(address, str):
        return LOOPBACK
    return address_group(client_address(address))


def other_machine_key(ip: object) -> str | None:
    """`ip`'s address_key when it is another machine than the server's own; None for this
    machine (other_machine), which the caps per address leave alone."""
    address = other_machine(ip)
    return None if address is None else address_key(address)


def other_machine(ip: object) -> str | None:
    """`ip`'s address when it is another machine than the server's own; None for this machine
    (127.0.0.1, ::1, None), which the caps per address leave alone: the teacher's laptop
    running the app, its tests and tools. Behind a proxy that is not trusted (FORWARDED_ALLOW_IPS,
    docs/class_limits.md) every student looks like the proxy: then today's rules apply to all."""
    address = client_address(ip)
    return None if address == LOOPBACK else address
