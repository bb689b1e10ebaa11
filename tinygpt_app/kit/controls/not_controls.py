"""The input widgets that are not view controls, each with its reason: forms and actions, the
sidebar's own View fields, a class's moderation and a student's guess. Every other widget
with a key is drawn by kit.state.control from a declaration in kit.controls
(tests/tinygpt_app/kit/test_controls.py reads the code and holds both to this list)."""

from __future__ import annotations

_SIDEBAR = "a View field itself (kit.state.View), mirrored by sync_url, not a control"
_TRAINING = "the Training form: a run's settings, read when Start training is pressed"
_CHAT = "Chat's message text: the user's own words, sent to the model, not a view setting"
_GUESS = "a student's guess: an answer to a round, never put in a link or shared"
_MODERATION = "the teacher's moderation of a live class: an action on the class, not a view"
_JOIN = "the class join form: typed once to join, never put in a link"
_LESSON = "the lesson runner's choice and lock: actions of the teacher on the class"

NOT_CONTROLS: dict[str, str] = {
    "sidebar.prompt": _SIDEBAR,
    "sidebar.model": _SIDEBAR,
    "sidebar.position": _SIDEBAR,
    "chat.system": _CHAT,
    "chat.user_before": _CHAT,
    "chat.assistant_before": _CHAT,
    "chat.user": _CHAT,
    **{f"training.{name}": _TRAINING for name in (
        "source", "vocab", "arch", "text", "layers", "heads", "embd", "block", "batch",
        "steps", "lr", "limit", "name")},
    "training.checkpoint": "the steps of this session's own training run: no link can hold it",
    "attention.open": "the argument of the Open button (an action that sets block and head)",
    "home.guess_first": "the guessing game's switch: hides the answer from this student only",
    "home.guess": _GUESS,
    "home.guess_new_word": _GUESS,
    "class.pick": _GUESS,
    "class.typed": _GUESS,
    "class.new_word": _GUESS,
    "class.position": _GUESS,
    "class.join_code": _JOIN,
    "class.join_nickname": _JOIN,
    "class.teacher_key": "a secret: the teacher's key is never in a link or a view",
    "class.moderation.lock": _MODERATION,
    "class.moderation.hide": _MODERATION,
    "class.moderation.choice": _MODERATION,
    "class.moderation.show_here": _MODERATION,
    "class.show_names": "the nicknames on this screen: a privacy switch of one screen",
    "class.report_names": "whether the class report names those present: an export's option",
    "class.round_choice": "a past round of the live class: its data, not something a link holds",
    "class.lesson_lock_toggle": _LESSON,
    "class.lesson_file": _LESSON,
    "class.upload": "a lesson file uploaded: an action, a file is no view setting",
}
