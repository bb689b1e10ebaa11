"""How the app names tokens and shapes in text: one function for a token, one for a shape."""

from __future__ import annotations


def token_label(tokenizer, token_id: int, *, position: int | None = None,
                show_id: bool = False) -> str:
    """A token as the app writes it, everywhere: its text with a space drawn as '·'.

    token_label(tok, 262) -> "·the"; with position=3 -> "3:·the" (an axis label, unique per
    position); with show_id=True -> "·the (262)" (a token in a list of candidates).
    """
    display = getattr(tokenizer, "token_display", None)
    text = display(int(token_id)) if display is not None else tokenizer.decode([int(token_id)])
    if show_id:
        text = f"{text} ({int(token_id)})"
    return text if position is None else f"{position}:{text}"


def shape(name: str, **dims: int) -> str:
    """Shape text for titles: shape("X", n=5, d=64) -> "X  (n=5 × d=64)"."""
    return f"{name}  ({' × '.join(f'{k}={v:,}' for k, v in dims.items())})"
