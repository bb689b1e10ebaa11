"""The class report: a row per round, as CSV and as a one-page HTML summary, made when the
teacher downloads it (nothing of it is kept: the class store deletes the rounds when the class
ends). Pure Python: the rows come from classroom.lesson_reveal.

Everything people typed (guesses, nicknames) and every token is escaped in the HTML; the CSV
cells that a spreadsheet would run as a formula (=, +, -, @ first) get a leading apostrophe.
"""

from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from tinygpt.readouts.room_score import RoundScore, RunningScore

TOP = 5  # the model's top tokens in a row
COLUMNS = ("round", "question", "text", "true token", "model top 5", "class guesses",
           "answers", "room p(true)", "model p(true)", "room bits", "model bits")


@dataclass(frozen=True)
class ReportRow:
    """One round of the class as the report shows it."""

    number: int
    question: str
    text: str  # the text the class continued
    true_token: str | None  # tokens as their text (" sun"), shown quoted: ' sun'
    model_top: tuple[tuple[str, float], ...]  # (token, probability), most likely first
    guesses: tuple[tuple[str, int], ...]  # (guess, how many gave it), most given first
    answers: int
    score: RoundScore | None  # None: no true token


def _number(value: float | None, places: int = 4) -> str:
    if value is None:
        return ""
    return "inf" if math.isinf(value) else f"{value:.{places}f}"


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _fields(row: ReportRow) -> list[str]:
    score = row.score
    true = "" if row.true_token is None else repr(row.true_token)
    return [str(row.number), row.question, row.text, true,
            "; ".join(f"{t!r} {p:.4f}" for t, p in row.model_top),
            "; ".join(f"{g!r} ×{n}" for g, n in row.guesses), str(row.answers),
            _number(score and score.room_prob), _number(score and score.model_prob),
            _number(score and score.room_bits, 3), _number(score and score.model_bits, 3)]


def to_csv(rows: Sequence[ReportRow]) -> str:
    """The report as CSV: a header, then a row per round."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(field) for field in _fields(row)])
    return out.getvalue()


def verdict(running: RunningScore) -> str:
    """Who predicted the text better, in one sentence."""
    if running.leader is None:
        return "No round with a true token was revealed."
    said = (f"Over {running.rounds} round{'s' if running.rounds != 1 else ''} on real text, the "
            f"class averaged {_number(running.room_bits, 2)} bits per token and the model "
            f"{_number(running.model_bits, 2)} (lower predicts better): ")
    return said + {"class": "the class predicted better.", "model": "the model predicted better.",
                   "tie": "a tie."}[running.leader]


def to_html(title: str, rows: Sequence[ReportRow], running: RunningScore,
            nicknames: Sequence[str] = ()) -> str:
    """A one-page summary: the verdict, a table of the rounds, and (only if given) who was
    there. Every text is escaped."""
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{e(f)}</td>" for f in _fields(row)) + "</tr>"
                   for row in rows)
    present = (f"<p>Present: {e(', '.join(nicknames))}</p>" if nicknames else "")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>"
            f"{e(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
            "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #999;"
            "padding:3px 6px;vertical-align:top;white-space:pre-wrap}</style></head><body>"
            f"<h1>{e(title)}</h1><p>{e(verdict(running))}</p>{present}"
            f"<table><tr>{head}</tr>{body}</table></body></html>")
