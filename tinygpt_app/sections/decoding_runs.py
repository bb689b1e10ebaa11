"""Which runs the Decoding page writes, and when: all three at once for a small model, only the
ones a student asks for on a large one.

Every new token reads all of a model's weights, so a generation step costs about what its
parameters weigh. On the 2-core reference machine the shipped model (4.3 M parameters) writes
a token in a few milliseconds: its three runs (greedy, sampling, beam search) are on screen
before the page is, and the page makes them all as it opens. GPT-2 small (124 M) takes about
70 ms a token alone, and a class of 30 opening the page within a minute made 30 x 5 rows of 20
tokens at once (bench/load.py: opening the page p95 13 s). So a model over
LARGE_MODEL_PARAMETERS is "large", decided here and nowhere else: its Decoding page opens on what
is already known (the prompt's next-token distribution, and the runs the class already made,
from the shared caches), writes a run only when the student asks for it, shows it as it is
written, and starts at DEFAULT_NEW_LARGE new tokens (said on the page).

What a student asked for is remembered per (model, prompt) in the session: moving a setting
writes the asked runs again with it (the student is looking at them); a new prompt starts with
none asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from tinygpt_app.host import host
from tinygpt_app.kit.slots import Slot

LARGE_MODEL_PARAMETERS = 50_000_000  # GPT-2 small (124 M), SmolLM2-135M: large; shipped: not
DEFAULT_NEW = 40  # new tokens a run starts with on a small model
# ... on a large one. A token is one pass of the model, 75-80 ms of a core alone for GPT-2
# small and the SmolLM2-135M shape, 0.1-0.2 s when a class of 30 writes runs on 2 cores
# (bench/load.py, 2 processes): a run of 16 took 1.6-2.0 s (p50) and 2.1-3.1 s (p95) there,
# past the 2 s a click may take; a run of 8 (7 passes: the first token comes from the prompt
# read) about half that. A student who wants more moves the slider (up to the page's 100).
DEFAULT_NEW_LARGE = 8
# this session's ((model id, prompt ids), the run names asked for)
ASKED: Slot[tuple | None] = Slot("decoding.asked", None)


def writes_on_demand(model) -> bool:
    """True for a large model: its runs are written only when a student asks for them."""
    return model.num_parameters() > LARGE_MODEL_PARAMETERS


def default_new_tokens(model) -> int:
    """How many new tokens the page's runs start with for this model."""
    return DEFAULT_NEW_LARGE if writes_on_demand(model) else DEFAULT_NEW


def subject_of(model_id: str, ids: Iterable[int]) -> tuple:
    """What the asked runs belong to: one model and one prompt, the prompt as its length and
    a digest of its ids (the session slot holds a few bytes whatever the prompt's length: the
    ids of a 200-token prompt outweighed the slot's 4 KB and failed the page)."""
    array = np.fromiter((int(i) for i in ids), dtype=np.int64)
    return model_id, len(array), hashlib.blake2b(array.tobytes(), digest_size=16).hexdigest()


def asked_runs(subject: tuple, slot: Slot = ASKED) -> set[str]:
    """The runs asked for on this subject in this session (none on a new model or prompt)."""
    kept = slot.get()
    if kept is None or kept[0] != subject:
        kept = slot.set((subject, set()))
    return kept[1]


def ask(subject: tuple, names: Iterable[str], slot: Slot = ASKED) -> None:
    """A button's callback: these runs of this subject are to be written (and kept written).
    The student now watches for their first words: on a class server this run's turn goes
    before the runs nobody clicked for (host().hurry; issue 48: a lesson's reveal reruns the
    whole class just as half of it clicks "Write")."""
    asked_runs(subject, slot).update(names)
    host().hurry()
