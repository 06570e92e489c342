"""Reading a CSV file staff upload: the rules every patients import shares (dispensing, patients).

    decoded(data, result) -> text or None        size limit, UTF-8 (a BOM allowed), line endings LF, CRLF or CR
    read_rows(text, result, *, header_problem, limits, allowed_controls) -> [(row number, values)] or None
    yes_no(raw, name, reasons) -> bool or None

A header row is required; column names are case-insensitive and in any order, each named once. Row numbers
are spreadsheet rows: the header is row 1, the first record row 2. Blank lines are skipped. Each cell is
stripped of spaces, tabs and no-break spaces at both ends; a cell longer than its column's limit, or
holding a control or text-direction character (patients.text), is reported by column before anything
reads it. A file with any problem imports nothing (each importer's own rule, reported the same way).
"""

import csv
import io
from dataclasses import dataclass, field

from patients.text import problem as text_problem

MAX_ROWS = 100_000
MAX_IMPORT_BYTES = 20 * 1024 * 1024
OTHER_COLUMN_LIMIT = 1000  # columns we ignore still must not be a way to send megabytes per cell
# Stripped from both ends of a cell; other whitespace (GS, line breaks) is kept so it can be reported.
PADDING = " \t\u00a0"
_YES, _NO = {"yes", "y", "true", "1", "x"}, {"no", "n", "false", "0", ""}


@dataclass
class RowError:
    row: int  # 0: the file as a whole (header, encoding)
    reason: str

    def __str__(self):
        return f"row {self.row}: {self.reason}" if self.row else self.reason


@dataclass
class ImportResult:
    rows: int = 0
    imported: int = 0
    errors: list[RowError] = field(default_factory=list)
    records: list = field(default_factory=list)  # the rows imported (dispensing: for the recall check afterwards)
    patients: list = field(default_factory=list)  # patients registered by the import

    @property
    def ok(self) -> bool:
        return not self.errors


def decoded(data, result: ImportResult) -> str | None:
    """The file's text (bytes, str or a stream), or None with the reason in result.errors."""
    size = len(data) if isinstance(data, (bytes, str)) else None
    if size is None:
        data = data.read(MAX_IMPORT_BYTES + 1)
        size = len(data)
    if size > MAX_IMPORT_BYTES:
        result.errors.append(RowError(0, f"The file is larger than the limit of {MAX_IMPORT_BYTES // 1024 // 1024} MB; "
                                         "split it into smaller files."))
        return None
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            result.errors.append(RowError(0, f"The file is not UTF-8 text ({exc.reason} at byte {exc.start})."))
            return None
    # Universal newlines by hand: io.StringIO(newline=None) would do it too, but csv wants newline="".
    return data.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def read_rows(text: str, result: ImportResult, *, header_problem, limits: dict[str, int],
              allowed_controls: dict[str, str] | None = None):
    """(row number, {column: value}) per record row, or None when the file cannot be read as rows (the
    reason in result.errors). `header_problem(columns)` says what the importer misses in the header, or ''.
    Rows with cell problems are reported and left out; `result.rows` counts every record row read, those
    included (blank lines are not rows)."""
    try:
        return _rows(text, result, header_problem, limits, allowed_controls or {})
    except csv.Error as exc:
        result.errors.append(RowError(0, f"The file is not readable as CSV: {exc}."))
        return None


def _rows(text, result, header_problem, limits, allowed_controls):
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [(name or "").strip().lower() for name in (reader.fieldnames or [])]
    if reason := header_problem(header):
        result.errors.append(RowError(1, reason))
        return None
    if len(set(header)) != len(header):
        doubled = sorted({name for name in header if header.count(name) > 1})
        result.errors.append(RowError(1, f"column(s) named twice: {', '.join(doubled)}."))
        return None
    reader.fieldnames = header
    rows = []
    for number, raw in enumerate(reader, start=2):
        if number - 1 > MAX_ROWS:
            result.errors.append(RowError(number, f"more than {MAX_ROWS} rows; split the file."))
            return None
        if None in raw:
            result.rows += 1
            result.errors.append(RowError(number, "more cells than header columns (a stray comma?)."))
            continue
        values = {k: (v or "").strip(PADDING) for k, v in raw.items()}
        if not any(values.values()):
            continue  # blank line
        result.rows += 1
        if reasons := _cell_problems(values, limits, allowed_controls):
            result.errors.extend(RowError(number, reason) for reason in reasons)
            continue
        rows.append((number, values))
    return rows


def _cell_problems(values: dict, limits: dict, allowed_controls: dict) -> list[str]:
    """Control/bidi characters and over-long cells, named by column, before anything reads them."""
    reasons = []
    for name, value in values.items():
        limit = limits.get(name) or OTHER_COLUMN_LIMIT
        if len(value) > limit:
            reasons.append(f"{name}: {len(value)} characters; at most {limit}.")
        elif reason := text_problem(value, allowed=allowed_controls.get(name, "")):
            reasons.append(f"{name}: {reason}")
    return reasons


def yes_no(raw: str, name: str, reasons: list) -> bool | None:
    value = raw.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    reasons.append(f"{name} {raw!r} is not yes or no.")
    return None
