"""A random token kept in the browser's own storage: the same browser, run after run and
reload after reload, without a cookie and without anything in the address bar.

Streamlit cannot write cookies, and a projected address bar must stay clean, so a small
component of the app's own (``st.components.v2`` with an inline script: public API, no build
step, nothing fetched) keeps a random token in ``localStorage``, makes one when there is none,
and hands it to Python on each run. The live class keys its resume tokens and seats on it.

The server never trusts the browser's string: a value that is not 43 URL-safe characters (what
32 random bytes become in base64url, 256 bits) is ignored, as if the browser had said nothing.
"""

from __future__ import annotations

import re

import streamlit as st

KEY = "browser_token"  # st.session_state: the validated token of this tab's browser
WIDGET_KEY = "browser_token.component"  # the component's own state (the browser's raw string)
STORAGE_NAME = "tinygpt.browser_token"  # the browser's localStorage entry
TOKEN_CHARS = 43  # 32 random bytes in base64url, without padding
FORMAT = re.compile(rf"[A-Za-z0-9_-]{{{TOKEN_CHARS}}}")

# Runs in the browser each time the component mounts. A browser without storage (private mode
# in some browsers, storage switched off) reports nothing, and Python's answer stays None.
JS = """
const NAME = "STORAGE_NAME";
const FORMAT = /^[A-Za-z0-9_-]{TOKEN_CHARS}$/;

function newToken() {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  return btoa(String.fromCharCode(...bytes))
    .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
}

function storedToken() {
  let token = window.localStorage.getItem(NAME);
  if (!token || !FORMAT.test(token)) {
    token = newToken();
    window.localStorage.setItem(NAME, token);
  }
  return window.localStorage.getItem(NAME);  // null when the browser did not keep it
}

export default function (component) {
  let token = null;
  try {
    token = storedToken();
  } catch (err) {  // storage refused: no token, and no error on the page
    token = null;
  }
  if (token && component.data !== token) {  // a rerun only when Python does not know it yet
    component.setStateValue("token", token);
  }
}
""".replace("STORAGE_NAME", STORAGE_NAME).replace("TOKEN_CHARS", str(TOKEN_CHARS))

# The component draws nothing; its box is taken out of the layout (the page's gap between
# elements would otherwise move what follows by 16 px once it mounts).
CSS = f".st-key-{WIDGET_KEY.replace('.', '-')} {{ display: none; }}"
_COMPONENT = st.components.v2.component("tinygpt_browser_token", js=JS, css=CSS,
                                        isolate_styles=False)


def valid(token: object) -> bool:
    """Is `token` a browser token's shape (never trust the browser's string)?"""
    return isinstance(token, str) and FORMAT.fullmatch(token) is not None


def browser_token() -> str | None:
    """This tab's browser token, or None until the browser has reported one (the first run of
    a session) or when its storage is unavailable."""
    token = st.session_state.get(KEY)
    return token if valid(token) else None


def render() -> str | None:
    """Mount the component (once per run, zero height) and remember what the browser said.

    The script learns a new token on the rerun its report triggers; the known token goes back
    to the browser as `data`, so a browser whose token Python already has asks for no rerun.
    """
    result = _COMPONENT(key=WIDGET_KEY, data=browser_token(), default={"token": None},
                        height=0, on_token_change=_reported)
    remember(getattr(result, "token", None))
    return browser_token()


def remember(token: object) -> None:
    """Keep the browser's report when it has a token's shape; anything else is ignored."""
    if valid(token):
        st.session_state[KEY] = token


def _reported() -> None:
    """The component's callback: the report is read from its result in render()."""
