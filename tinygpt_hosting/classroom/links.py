"""The class's links, built from an address students' phones can open.

A teacher who opens the app at http://localhost:8501 must not project a link to "localhost":
on a phone that is the phone itself. The address is the first of:

1. TINYGPT_PUBLIC_URL, when the operator has said where the app is reached;
2. the address the teacher's own browser used, when it is not this computer's loopback;
3. the machine's network address, found as `streamlit run` finds the "Network URL" it prints
   (a note asks to check the link on a phone: another network may not reach it);
4. otherwise the teacher's own address, with a plain warning that phones cannot open it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from tinygpt_app.kit.plain_text import plain

URL_CLASS, URL_TEACHER = "class", "teacher"
CLASS_PATH = "Class"  # the Class page's URL path (navigation.url_path of pages/16_Class.py)
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
DOCS = "docs/classroom.md"
CHECK_ON_A_PHONE = (
    "This link uses this computer's network address. Open it on a phone before the class: "
    "phones must be on the same Wi-Fi, and guest or school networks that keep devices apart "
    f"block it (a phone's hotspot works then). See {DOCS}.")


@dataclass(frozen=True)
class ClassAddress:
    """Where the class's links point: `base` (the app's root, ending in "/"), which rule chose
    it (`source`: "public", "browser", "network" or "loopback"), and what to tell the teacher
    (`note`; a `warning` when phones cannot open it)."""

    base: str
    source: str
    note: str | None = None
    warning: bool = False

    def link(self, params: dict[str, str]) -> str:
        """The Class page's link with `params` in its query."""
        return f"{self.base}{CLASS_PATH}?{urlencode(params)}"


def is_loopback(url: str) -> bool:
    """Does `url` name this computer only (localhost, 127.x.x.x, ::1, 0.0.0.0), an address no
    phone can reach it at?"""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name: another machine may resolve it to this one
    return address.is_loopback or address.is_unspecified


def app_root(url: str, *, page_url: bool) -> str:
    """The app's root ("scheme://host[:port]/base/") of `url`: a page's address (the
    browser's) loses its last path segment, the page's name; an app's address keeps its path."""
    parts = urlsplit(url)
    path = parts.path.rsplit("/", 1)[0] if page_url else parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path}/"


def choose_address(public: str | None, browser: str | None, network: str | None) -> ClassAddress:
    """The address students' links use (see the module docstring): `public` is
    TINYGPT_PUBLIC_URL, `browser` the teacher's page address, `network` the Network URL."""
    if public:
        return ClassAddress(app_root(public, page_url=False), "public")
    if browser and not is_loopback(browser):
        return ClassAddress(app_root(browser, page_url=True), "browser")
    if network and not is_loopback(network):
        return ClassAddress(app_root(network, page_url=False), "network", CHECK_ON_A_PHONE)
    own = app_root(browser or "http://localhost:8501/", page_url=True)
    host = urlsplit(own).hostname or "localhost"
    return ClassAddress(own, "loopback", unreachable_note(host), warning=True)


def unreachable_note(host: str) -> str:
    """The warning for a link no phone can open, and what to do about it."""
    return (f"Phones cannot open this link: {plain(host)} is this computer's own address. "
            "Start the app with `streamlit run app.py` (it listens on the network), open the "
            "Network URL it prints on this computer and start the class there; or set "
            f"TINYGPT_PUBLIC_URL to the address students use. See {DOCS}.")


def join_link(address: ClassAddress, code: str) -> str:
    """The link students open (and the QR code carries): the class code only."""
    return address.link({URL_CLASS: code})


def teacher_link(address: ClassAddress, code: str, secret: str) -> str:
    """The teacher's private link (for another device of the teacher's): holds the secret."""
    return address.link({URL_CLASS: code, URL_TEACHER: secret})
