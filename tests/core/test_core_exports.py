"""core.exports: no cell of an exported CSV is a formula, whichever separator the spreadsheet splits on."""

import csv
import io
import sys
import unicodedata

import pytest

from core.exports import FORMULA_CHARS, SEMICOLONS, csv_writer, spreadsheet_cell

FORMULAS = [
    '=HYPERLINK("http://attacker.example/","x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)",
    "\t=1+1", "\r=1+1",
    ";=1+1", ";abc",              # a semicolon-separated spreadsheet opens a new cell at the '='
    "\uff1d1+1", "\uff0b1", "\uff0d1", "\uff20SUM(A1)", "\uff1b=1+1",  # full-width = + - @ ;
    "\ufe661+1", "\ufe62 1", "\ufe63 1", "\ufe6bSUM(A1)", "\ufe54=1",   # small forms
    "\u207c1+1",                                                        # superscript =
    "  =1+1", "\n=1+1", "\u3000=1+1",  # a formula start behind leading spaces or a line break
]
INSIDE = ["Synthetic Smith;=HYPERLINK(\"http://attacker.example/\")", "a\t=1+1", "two\nlines\n@SUM(A1)",
          "x; -1", "y;\uff1d1"]
DANGEROUS = set("=+-@") | {"\t", "\r"}


def _is_formula(cell: str) -> bool:
    first = cell.lstrip()[:1]
    return cell[:1] in DANGEROUS or (first != "" and unicodedata.normalize("NFKC", first) in "=+-@")


@pytest.mark.parametrize("text", FORMULAS)
def test_a_cell_that_starts_a_formula_is_written_as_text(text):
    written = spreadsheet_cell(text)
    assert written.startswith("'") and written.replace("'", "") == text.replace("'", "")


@pytest.mark.parametrize("text", INSIDE)
def test_a_formula_start_after_a_semicolon_tab_or_line_break_inside_a_cell_is_written_as_text(text):
    written = spreadsheet_cell(text)
    assert written.replace("'", "") == text
    for separator in ";\t\n":
        assert not [part for part in written.split(separator)[1:] if _is_formula(part)], written


@pytest.mark.parametrize("value", ["Synthetic SYN-A", "D-0326-2019", "lot M331J18-1", "", "'quoted", "a; b",
                                   3, -2, 0.5, None])
def test_other_cells_are_written_as_they_are(value):
    assert spreadsheet_cell(value) == value


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_no_cell_of_a_written_file_is_a_formula_however_the_spreadsheet_splits_it(delimiter):
    out = io.StringIO()
    writer = csv_writer(out)
    writer.writerow(["patient", "phone", "count"])
    writer.writerows([[text, "+1 555 0100", 2] for text in FORMULAS + INSIDE])
    text = out.getvalue()
    cells = [cell for row in csv.reader(io.StringIO(text), delimiter=delimiter) for cell in row]
    # A reader that ignores quotes altogether, as a spreadsheet does past a field's start.
    cells += [cell for line in text.splitlines() for cell in line.split(delimiter)]
    assert len(cells) > len(FORMULAS)
    assert not [cell for cell in cells if _is_formula(cell.lstrip('"'))]


def test_text_cells_are_quoted_and_numbers_stay_numbers():
    out = io.StringIO()
    csv_writer(out).writerow(["Synthetic SYN-A", 2, 0.5, "-1"])
    assert out.getvalue() == '"Synthetic SYN-A",2,0.5,"\'-1"\r\n'


def test_the_formula_characters_are_every_character_nfkc_folds_into_one():
    folds = {chr(cp) for cp in range(sys.maxunicode + 1)
             if unicodedata.normalize("NFKC", chr(cp)) in ("=", "+", "-", "@", ";")}
    assert set(FORMULA_CHARS) | set(SEMICOLONS) == folds
