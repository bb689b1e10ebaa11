"""A one-line app for the browser token's browser test: mounts the component and writes what
the server knows (the app's pages never show the token)."""

import streamlit as st

from tinygpt_app.kit import browser_token

browser_token.render()
st.write(f"server token: {browser_token.browser_token()}")
