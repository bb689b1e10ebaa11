"""Which machine a browser tab talks from, in one spelling, for caps per client address.

Streamlit's public ``st.context.ip_address`` gives None for a local connection (localhost) and
may give an IPv4 address in its IPv6-mapped form (``::ffff:127.0.0.1``) on a dual-stack
socket: both spellings of one machine must count as one address.
"""

from __future__ import annotations

import ipaddress

LOOPBACK = "127.0.0.1"


def client_address(ip: object) -> str:
    """`ip` (st.context.ip_address) as one spelling per machine: None and ::1 are loopback,
    ``::ffff:a.b.c.d`` is a.b.c.d, anything unparsable is kept as given (cut to 64 chars)."""
    if not isinstance(ip, str):  # None, or whatever a test harness hands in: no address
        return LOOPBACK
    try:
        parsed = ipaddress.ip_address(ip.strip())
    except ValueError:
        return ip.strip()[:64]  # not an address: still one key, and a bounded one
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    if parsed.is_loopback:
        return LOOPBACK
    return str(parsed)
