"""Who this session is, for the live class's limits: its browser token (a seat is a browser;
a teacher's browser leads one class) and its client address (seats and new classes per address).
"""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit.browser_token import browser_token
from tinygpt_hosting.serving.client_address import other_machine_key


def who() -> dict[str, str | None]:
    """This session's browser token (None until the browser reported it) and client address
    (None for the server's own machine: no caps per address there) as the session door keys it
    (an IPv6 address's /64: serving.client_address.address_key), as Classroom.join and
    Classroom.create_class take them."""
    return {"browser": browser_token(), "address": other_machine_key(st.context.ip_address)}
