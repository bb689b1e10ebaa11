"""What a chat model really reads: a conversation rendered by the model's own chat template into
one text, that text's tokens with the special ones (the turn markers) marked, cut to what fits
the model's context beside its answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tinygpt.tokenizer.bpe import BPETokenizer

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatRead:
    """A conversation as the model reads it."""

    text: str  # the chat template's output
    ids: list[int]  # its tokens (the last `room` of them when it is longer)
    special: list[bool]  # one per id: a special token (a marker the template wrote)
    total: int  # how many tokens the whole text is

    @property
    def cut(self) -> bool:
        return len(self.ids) < self.total

    @property
    def n_special(self) -> int:
        """How many of the ids are special tokens."""
        return sum(self.special)


def has_chat_template(tokenizer) -> bool:
    """True when the model's files carry a chat template (it was trained on conversations)."""
    return getattr(tokenizer, "chat_template", None) is not None


def conversation(turns: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """(role, text) pairs -> chat messages, the empty ones left out."""
    messages = []
    for role, text in turns:
        if role not in ROLES:
            raise ValueError(f"a role is one of {', '.join(ROLES)}, not {role!r}")
        if text.strip():
            messages.append({"role": role, "content": text})
    return messages


def read_chat(tokenizer: BPETokenizer, messages: Sequence[Mapping], room: int) -> ChatRead:
    """The text the model reads for `messages`, ending with the opening of the assistant's
    turn (its answer comes next), and its tokens: the last `room` of them (room >= 1).

    Raises tinygpt.tokenizer.chat_template.ChatTemplateError (NoChatTemplateError when the
    tokenizer has no template) or ValueError for malformed messages.
    """
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tokenizer.encode(text)
    kept = ids[-max(1, room):]
    specials = set(tokenizer.special_tokens.values())
    return ChatRead(text, kept, [i in specials for i in kept], len(ids))
