"""A live class: the teacher starts one and projects its code; students join and follow,
guess what comes next, and see the class's guesses beside the model's probabilities.

The class is the hosting wing's (tinygpt_hosting, found by tinygpt_app.host): it draws this
page. Without the wing the app serves one user, and this page says so in one line."""

import streamlit as st

from tinygpt_app.host import host, load_wing
from tinygpt_app.kit.frame import page

NOT_INSTALLED = ("Class mode is not installed on this server: the app serves one user. "
                 "(A live class needs the hosting wing, the package tinygpt_hosting.)")

load_wing()  # this page run on its own (app.py has already done it otherwise)
if host().class_page is not None:
    host().class_page()
else:
    with page("Live class", needs_prompt=False):
        st.info(NOT_INSTALLED)
