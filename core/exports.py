"""Cells of files people open in a spreadsheet (CSV exports).

A text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is read by Excel, LibreOffice
and Google Sheets as a formula: a patient named `=HYPERLINK("http://…","click")` would run in the
pharmacist's spreadsheet. Such a cell is written with a leading apostrophe, which spreadsheets show as
text and do not evaluate (OWASP's CSV injection advice). Numbers are written as numbers.
"""

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value):
    """The value as a CSV cell that no spreadsheet evaluates."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
