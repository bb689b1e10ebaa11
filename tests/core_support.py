"""What the core tests (tests/tinygpt) share, with NumPy and tinygpt only (unlike
tests/apptest_support.py, which imports the app): the tiny fixture model, and for hostile
input (test_*_hostile.py and tests/tinygpt_app/test_hostile.py) quick hypothesis settings, a
time limit, any Unicode text, the tiny model's tokenizer."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tinygpt.checkpoint.files import load

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny.npz"  # as tests.apptest_support
QUICK = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])

# every plane (emoji, CJK, combining marks, controls, private use), never a lone surrogate
ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)


@contextmanager
def time_limit(seconds: float):
    """Fail (instead of hanging the suite) when the body runs longer than `seconds`."""
    def on_alarm(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_TOKENIZER = []


def app_tokenizer():
    """The tokenizer the app serves in the tests (tests/fixtures/tiny.npz), loaded once."""
    if not _TOKENIZER:
        _TOKENIZER.append(load(TINY)[1])
    return _TOKENIZER[0]
