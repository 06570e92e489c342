"""Cells of files people open in a spreadsheet (CSV exports): the one place a CSV file is written.

A text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel, LibreOffice
and Google Sheets as a formula: a patient named `=HYPERLINK("http://…","click")` would run in the
pharmacist's spreadsheet. Such a cell is written with a leading apostrophe, which spreadsheets show as
text and do not evaluate (OWASP's CSV injection advice). Leading spaces do not hide a formula start, and
the forms Unicode compatibility normalisation (NFKC) folds into these characters (full-width `＝`, small
`﹢`, superscript `⁼`...) count as them: some spreadsheets and import filters apply it.

A spreadsheet may also split the file on another separator than its comma: a semicolon where the decimal
separator is a comma, a tab when pasted. Quotes do not hold then (only a quote that opens a field counts,
and the spreadsheet's fields start elsewhere), so every semicolon, tab or line break inside a text cell
may open a new cell: `Smith;=cmd()` is a cell `=cmd()`. A cell that starts with a semicolon (or its
forms) gets the apostrophe too, and a formula start right after a semicolon, tab or line break inside a
cell gets one of its own (`Smith;'=cmd()`), so no cell of any such reading is a formula. Every text cell
is also quoted (numbers are written as numbers, unquoted).

Every CSV export writes through `csv_writer`, which applies this to every cell, so a new column cannot
forget it (tests/house/test_csv_exports.py).
"""

import csv
import re

# "=+-@" and every character NFKC folds into one of them (tests/core/test_core_exports.py checks the list).
FORMULA_CHARS = "=+-@\u207a\u207c\u208a\u208c\ufb29\ufe62\ufe63\ufe66\ufe6b\uff0b\uff0d\uff1d\uff20"
SEMICOLONS = ";\u037e\ufe14\ufe54\uff1b"  # ";" and the characters NFKC folds into it
SPLITTERS = ";\t\r\n"  # where a spreadsheet that chose another separator may start a cell

_FORMULA = f"[{re.escape(FORMULA_CHARS)}]"
_STARTS_A_FORMULA = re.compile(rf"\A(?:[\t\r{re.escape(SEMICOLONS)}]|\s*{_FORMULA})")
_FORMULA_AFTER_A_SPLIT = re.compile(rf"(?<=[{re.escape(SPLITTERS)}])(?=[^\S\t\r\n]*{_FORMULA})")


def spreadsheet_cell(value):
    """The value as a CSV cell that no spreadsheet evaluates, whichever separator it splits on."""
    if not isinstance(value, str):
        return value
    text = _FORMULA_AFTER_A_SPLIT.sub("'", value)
    return "'" + text if _STARTS_A_FORMULA.match(value) else text


class SpreadsheetWriter:
    """csv.writer whose every cell goes through spreadsheet_cell and whose every text cell is quoted."""

    def __init__(self, file, **options):
        self._writer = csv.writer(file, quoting=csv.QUOTE_NONNUMERIC, **options)

    def writerow(self, row):
        return self._writer.writerow([spreadsheet_cell(value) for value in row])

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


def csv_writer(file, **options) -> SpreadsheetWriter:
    """A CSV writer for a file a person may open in a spreadsheet (options as csv.writer's, but quoting,
    which is always every text cell)."""
    return SpreadsheetWriter(file, **options)
