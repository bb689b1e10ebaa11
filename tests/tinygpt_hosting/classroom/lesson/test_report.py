"""The class report: the CSV's contents row by row, spreadsheet formulas defused, and the HTML
summary escaped, with nicknames only when given."""

from __future__ import annotations

import csv
import io

from tinygpt.readouts.room_score import RoundScore, running_score
from tinygpt_hosting.classroom.lesson import report


def rows() -> list[report.ReportRow]:
    score = RoundScore(room_prob=12.5 / 32, model_prob=0.25, room_bits=1.3561,
                       model_bits=2.0, answers=30, n_choices=4)
    return [
        report.ReportRow(1, "What comes next?", "Juliet is the", " sun",
                         ((" world", 0.034), (" sun", 0.032)),
                         ((" sun", 12), (" moon", 9), ("=cmd()", 1)), 22, score),
        report.ReportRow(2, "<b>bold</b>?", "O brave new", None, (("-", 0.075),),
                         (), 0, None),
    ]


def test_the_csv_has_a_row_per_round_with_its_numbers():
    table = list(csv.reader(io.StringIO(report.to_csv(rows()))))
    assert table[0] == list(report.COLUMNS)
    first = dict(zip(table[0], table[1], strict=True))
    assert first["round"] == "1" and first["question"] == "What comes next?"
    assert first["true token"] == "' sun'"
    assert first["model top 5"] == "' world' 0.0340; ' sun' 0.0320"
    assert first["class guesses"] == "' sun' ×12; ' moon' ×9; '=cmd()' ×1"
    assert first["answers"] == "22"
    assert first["room p(true)"] == "0.3906" and first["model p(true)"] == "0.2500"
    assert first["room bits"] == "1.356" and first["model bits"] == "2.000"
    second = dict(zip(table[0], table[2], strict=True))
    assert second["true token"] == "" and second["room p(true)"] == ""
    assert len(table) == 3


def test_a_cell_a_spreadsheet_would_run_gets_an_apostrophe():
    bad = report.ReportRow(3, "=HYPERLINK(\"x\")", "t", None, (), (), 0, None)
    table = list(csv.reader(io.StringIO(report.to_csv([bad]))))
    assert table[1][1] == "'=HYPERLINK(\"x\")"


def test_the_summary_is_escaped_and_names_nobody_unless_asked():
    running = running_score([r.score for r in rows() if r.score])
    page = report.to_html("Class <ABC>", rows(), running)
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "Class &lt;ABC&gt;" in page and "Present" not in page
    assert "the class predicted better" in page  # 1.36 bits against 2.00
    named = report.to_html("c", rows(), running, ["Ann", "<script>"])
    assert "Present: Ann, &lt;script&gt;" in named


def test_the_verdict_before_any_round():
    assert report.verdict(running_score([])) == "No round with a true token was revealed."
