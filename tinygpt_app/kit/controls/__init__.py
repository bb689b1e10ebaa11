"""Every control that shapes what a page shows, declared once as data (kit.controls.spec):
its shared name (?name= in a link), kind, default and range, grouped by page. A page draws
one with `kit.state.control(widget, label, key, SPEC, ...)`; its value lands in the view
(kit.state.View), so the link, a class's publish and follow and a lesson step carry it, and
the lesson files (tinygpt_hosting.classroom.lesson.loader) read the same bounds.

A control whose top depends on the model or the prompt (top-k: at most the vocabulary; a
layer: at most the model's layers) has `hi=None` here and is given its top where the model is
known (`parse(hi)`); a choice among what a page offers (tokens, labels) has `choice=True`.
The widgets that are not view controls (forms, actions, the sidebar's own View fields) are
listed, each with its reason, in kit.controls.not_controls.
"""

from __future__ import annotations

from tinygpt.readouts.interventions import SITES
from tinygpt_app.compute.architectures import MAX_MODELS
from tinygpt_app.kit.controls.spec import ControlSpec, pairs  # noqa: F401 - pairs: a list control's entries
from tinygpt_app.kit.state import MAX_APP_TOKENS, MAX_URL_PROMPT_CHARS

MAX_SEED = 2**31 - 1
MAX_NEW = 100  # new tokens a decoding run writes at most
MAX_BEAMS = 6
# What a link and a class carry of an ablation: "block.head" and "block.neuron" entries,
# comma-separated, each list at most this long (a shared control is at most 200 characters:
# tinygpt_hosting.classroom.rules.MAX_CONTROL_TEXT; "29.11," is 6, "23.11007," is 9).
MAX_HEADS, MAX_NEURONS = 32, 20
MAX_BLOCKS = 64  # blocks listed in a control ("skip these blocks"), more than any model here
LAST_LAYER, LAST_HEAD = "the model's last layer", "the model's last head"
CHOICE = "the choices the page offers"

# ---------------------------------------------------------------- Sampling (7) and Decoding (8)
TEMPERATURE = ControlSpec("temperature", float, 1.0, 0.0, 3.0)
TOP_K = ControlSpec("top_k", int, 0, 0, None, bound="the model's vocabulary size (0 = off)")
TOP_P = ControlSpec("top_p", float, 0.9, 0.01, 1.0)
SEED = ControlSpec("seed", int, 0, 0, MAX_SEED)
NEW = ControlSpec("new", int, 20, 1, MAX_NEW)  # Chat's answer too
BEAMS = ControlSpec("beams", int, 3, 1, MAX_BEAMS)
STRATEGY = ControlSpec("strategy", str, "sample", options=("greedy", "sample"))
STEP = ControlSpec("step", int, 0, 0, None, bound="the run's last new token")
STEPS_SHOWN = ControlSpec("tree_window", tuple, (0, 24), 0, None,
                          bound="the beam search's last step")

# ---------------------------------------------------------------- blocks and heads (4, 10, 15)
LAYER = ControlSpec("layer", int, 0, 0, None, bound=LAST_LAYER)
HEAD = ControlSpec("head", int, 0, 0, None, bound=LAST_HEAD)

# ---------------------------------------------------------------- Lesson (1), the sidebar
LESSON_STEP = ControlSpec("lesson_step", int, 1, 1, None, bound="the Lesson page's last step")
PROJECTOR = ControlSpec("projector", bool, False)

# ---------------------------------------------------------------- Tokens and embeddings (2)
CHUNK = ControlSpec("chunk", int, 0, choice=True, bound="the prompt's chunks")
TOKENS_VIEW = ControlSpec("tokens_view", str, "", choice=True, bound=CHOICE)

# ---------------------------------------------------------------- Normalisation (3)
NORM = ControlSpec("norm", str, "", choice=True, bound="this model's LayerNorms")
RMS_NORM = ControlSpec("rms_norm", str, "", choice=True, bound="this model's RMSNorms")
NORM_STAGE = ControlSpec("norm_stage", str, "", choice=True, bound=CHOICE)
RMS_STAGE = ControlSpec("rms_stage", str, "", choice=True, bound=CHOICE)

# ---------------------------------------------------------------- Attention (4)
ATTENTION_VIEW = ControlSpec("attention_view", str, "", choice=True, bound=CHOICE)
KEY_TOKEN = ControlSpec("key_token", int, 0, choice=True, bound="the keys the query sees")
ROPE_PAIR = ControlSpec("rope_pair", int, 0, 0, None, bound="half the head's size, less one")
ROPE_SHIFT = ControlSpec("rope_shift", int, 100, 0, None, bound="the model's context")

# ---------------------------------------------------------------- Residual stream (5)
NORM_VIEW = ControlSpec("norm_view", str, "heatmap: stages × tokens",
                        options=("heatmap: stages × tokens", "lines: chosen tokens"))
NORM_TOKENS = ControlSpec("norm_tokens", list, [], 0, None, cap=MAX_APP_TOKENS,
                          bound="the prompt's positions")
LENS_STAGES = ControlSpec("lens_stages", str, "after each block",
                          options=("after each block", "after each sublayer"))
LENS_K = ControlSpec("lens_k", int, 3, 1, 5)
NEURON_LAYER = ControlSpec("neuron_layer", int, 0, 0, None, bound=LAST_LAYER)
NEURON = ControlSpec("neuron", int, 0, choice=True, bound="the block's most active neurons")

# ---------------------------------------------------------------- Logits (6)
LOGITS_K = ControlSpec("logits_k", int, 10, 1, 50)
TYING_TOKEN = ControlSpec("tying_token", int, 0, choice=True, bound="the position's top tokens")

# ---------------------------------------------------------------- What if (10)
NO_POSITION = ControlSpec("no_position", bool, False)
NO_CAUSAL_MASK = ControlSpec("no_causal_mask", bool, False)
NO_LAYERNORM = ControlSpec("no_layernorm", bool, False)
NO_RESIDUAL = ControlSpec("no_residual", bool, False)
ZERO_HEADS = ControlSpec("zero_heads", list, [], cap=MAX_HEADS, item="heads")
SKIP_ATTN = ControlSpec("skip_attn", list, [], 0, None, cap=MAX_BLOCKS, bound="blocks")
SKIP_FFN = ControlSpec("skip_ffn", list, [], 0, None, cap=MAX_BLOCKS, bound="blocks")
STAGE = ControlSpec("stage", str, "attention weights", choice=True, bound=CHOICE)

# ---------------------------------------------------------------- Interventions (11)
EXPERIMENT = ControlSpec("experiment", str, "Patching",
                         options=("Patching", "Ablation", "Steering"))
CLEAN = ControlSpec("clean", str, "The capital of France is", max_chars=MAX_URL_PROMPT_CHARS)
CORRUPT = ControlSpec("corrupt", str, "The capital of Italy is", max_chars=MAX_URL_PROMPT_CHARS)
STEER_A = ControlSpec("steer_a", str, "You are kind, gentle and warm.",
                      max_chars=MAX_URL_PROMPT_CHARS)
STEER_B = ControlSpec("steer_b", str, "You are cruel, harsh and cold.",
                      max_chars=MAX_URL_PROMPT_CHARS)
ANSWER = ControlSpec("answer", int, 0, choice=True, bound="the clean prompt's top guesses")
POSITION = ControlSpec("position", int, 0, choice=True, bound="the positions of the grid")
SITE = ControlSpec("site", str, "resid_pre", options=SITES)
HEADS = ControlSpec("heads", list, [], cap=MAX_HEADS, item="heads")
NEURONS = ControlSpec("neurons", list, [], cap=MAX_NEURONS, item="neurons")
MEAN = ControlSpec("mean", bool, False)
STEER_LAYER = ControlSpec("steer_layer", int, 0, 0, None, bound=LAST_LAYER)
COEFFICIENT = ControlSpec("coefficient", float, 4.0, -10.0, 10.0)

# ---------------------------------------------------------------- Architectures (13)
MODELS = ControlSpec("models", list, [], cap=MAX_MODELS, choice=True,
                     bound="models of the models folder")

# ---------------------------------------------------------------- Why this token? (14)
TOKEN = ControlSpec("token", int, 0, choice=True, bound="the tokens the page offers")
VERSUS = ControlSpec("versus", int, 0, choice=True, bound="the tokens the page offers")

# ---------------------------------------------------------------- Compare prompts (15)
PROMPT2 = ControlSpec("prompt2", str, "The doctor said that she", max_chars=MAX_URL_PROMPT_CHARS)


def _declared() -> dict[str, ControlSpec]:
    """Every declaration above, by its constant's name."""
    return {name: value for name, value in globals().items()
            if isinstance(value, ControlSpec) and name.isupper()}


SPECS: dict[str, ControlSpec] = _declared()
# the controls a lesson step may set, by their shared name: those whose range is known
# without the page (not a choice among what a page offers, not a list, not a text)
CONTROLS: dict[str, ControlSpec] = {spec.name: spec for spec in SPECS.values()
                                    if spec.settable
                                    and spec is not PROJECTOR}  # a screen's, not a view's
