"""The hosting wing plugged into the app: `register()` is what tinygpt_app.host.load_wing()
calls when this package is installed (once per process).

It puts the class server in place of the app's one-user defaults (tinygpt_app.host.Host): the
fair turn of every page run (serving.turn), the generations of all students stepping together
(steps.lockstep) and shorter runs read off longer ones (steps.shorter_run), the caps keyed per
client address (serving.client_address), the door on new sessions and Streamlit's config kept
between reruns (serving.session_door, serving.server_tuning), Streamlit beyond its public API
(streamlit_internals), and the live class: its page hooks (classroom.hooks) and its page
(classroom.class_page).
"""

from __future__ import annotations

import functools
import threading

from tinygpt_app import host, settings
from tinygpt_hosting import streamlit_internals
from tinygpt_hosting.classroom import class_page
from tinygpt_hosting.classroom import hooks as class_hooks
from tinygpt_hosting.serving import fair_share, server_tuning, session_door, turn
from tinygpt_hosting.serving.client_address import address_key
from tinygpt_hosting.steps.lockstep import SharedSteps, generate_together
from tinygpt_hosting.steps.shorter_run import shorter

# The students' generations step together: one pass of the model for every generation under
# way in this process. A GPT-2 decoding step is bound by the read of 500 MB of weights, not by
# its few rows: a pass of 16 students' 80 rows costs about what 4 of their steps cost alone.
SHARED_STEPS = SharedSteps()

_configured = threading.Lock()
_done = False


def configure_process() -> None:
    """A class server's process settings, once per process (later calls do nothing):
    Streamlit's theme, rebuilt from its whole config on every rerun, is kept (server_tuning);
    new sessions pass a door per client address (session_door)."""
    global _done
    with _configured:
        if not _done:
            server_tuning.keep_config_sections()
            before_serving()
            _done = True


def before_serving() -> None:
    """The door on new sessions, before the server takes its first request (tinygpt_app.launch:
    under a bare `streamlit run app.py` it comes with the first page run). Cheap to repeat."""
    session_door.install(*settings.new_sessions())


CLASS_SERVER = host.Host(
    name="class server",
    configure_process=configure_process,
    before_serving=before_serving,
    class_page=class_page.draw,
    turn=turn.fair_turn,
    hurry=turn.hurry,
    outside_the_line=fair_share.outside_the_line,
    run_cost=fair_share.current_cost,
    steps=SHARED_STEPS,
    generate_runs=functools.partial(generate_together, steps=SHARED_STEPS),
    read_off_longer=shorter,
    address_key=address_key,
    streamlit=streamlit_internals,
)


def register() -> None:
    """Plug the class server and the live class into the app (again does no harm)."""
    host.install(CLASS_SERVER)
    class_hooks.register()
