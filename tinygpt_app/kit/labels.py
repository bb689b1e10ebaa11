"""How the app names tokens and shapes in text: one function for a token, one for a shape."""

from __future__ import annotations

from dataclasses import dataclass


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


@dataclass(frozen=True)
class BytePiece:
    """A token holding only some of the bytes of one character (UTF-8 writes "🍕" in 4 bytes;
    a byte-level tokenizer with no token for it spends several tokens on it)."""

    part: int  # this token's place among the tokens of the character, from 1
    of: int  # how many tokens the character takes
    character: str  # the whole character (or characters) the tokens make together

    def note(self) -> str:
        """What a chip adds under the token's id: "🍕: token 1 of 4"."""
        return f"{self.character}: token {self.part} of {self.of}"

    def short(self) -> str:
        """What an axis label adds: "🍕 1/4"."""
        return f"{self.character} {self.part}/{self.of}"


MAX_PIECES = 8  # a UTF-8 character has at most 4 bytes: a longer run is not one character


def byte_pieces(tokenizer, ids) -> list[BytePiece | None]:
    """For each token of `ids`: the BytePiece it is, or None when it is whole text by itself.

    Consecutive tokens that do not decode alone are joined until their bytes decode (one
    character in several bytes, hence several tokens)."""
    raw = [bytes(tokenizer.token_bytes(int(t))) for t in ids]
    pieces: list[BytePiece | None] = [None] * len(raw)
    i = 0
    while i < len(raw):
        if _whole(raw[i]):
            i += 1
            continue
        j, joined = i + 1, raw[i]
        while j < len(raw) and j - i < MAX_PIECES and not _whole(joined):
            joined += raw[j]
            j += 1
        if j - i > 1:
            character = joined.decode("utf-8", errors="replace").strip()
            for k in range(i, j):
                pieces[k] = BytePiece(part=k - i + 1, of=j - i, character=character)
        i = j
    return pieces


def _whole(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def prompt_labels(tokenizer, ids) -> list[str]:
    """One axis label per position, "3:·the"; a token that is part of a character split into
    several tokens says which: "5:\\xf0 (🍕 1/4)"."""
    pieces = byte_pieces(tokenizer, ids)
    return [token_label(tokenizer, t, position=i) + (f" ({p.short()})" if p else "")
            for i, (t, p) in enumerate(zip(ids, pieces, strict=True))]


def chip_captions(tokenizer, ids) -> list[str]:
    """The caption under each token chip: "id 262", or "id 240 · 🍕: token 1 of 4"."""
    return [f"id {int(t)}" + (f" · {p.note()}" if p else "")
            for t, p in zip(ids, byte_pieces(tokenizer, ids), strict=True)]


def byte_note(pieces: list[BytePiece | None]) -> str | None:
    """One sentence for under the chips when some character took several tokens."""
    shown = sorted({(p.character, p.of) for p in pieces if p is not None})
    if not shown:
        return None
    which = ", ".join(f"“{c}” ({n} tokens)" for c, n in shown[:5])
    return (f"One character in several bytes: {which}. Text is stored as UTF-8 bytes, and a "
            "character the tokenizer has no token for is spelled out byte by byte; each of its "
            "chips says which piece it is.")
