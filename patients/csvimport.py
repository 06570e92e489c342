"""CSV import of dispensing: every bad row is reported, and a file with any bad row imports nothing.

Columns (header row required, order free, names case-insensitive):
    patient_ref     the patient's external reference (the pharmacy's own id); the patient must exist
    drug            generic name ("Valsartan"); may be left empty when product_description names it
    product_description
    ndc             10-digit hyphenated (4-4-2, 5-3-2, 5-4-1) or 11-digit
    lot             as printed; required unless lot_unknown is yes or the scan carries the lot
    lot_unknown     yes/no (also true/false, 1/0): the lot was not recorded (never an empty lot alone)
    expiry          YYYY-MM-DD
    serial          package serial number (GS1 AI 21)
    scan            the pack's GS1 DataMatrix as the scanner sent it (GS, or | ^ ~ <GS> for it), or the
                    printed "(01)...(17)...(10)...(21)..." text: fills ndc, lot, expiry, serial (patients.scanning)
    quantity        whole number > 0, digits 0-9
    dispensed_at    YYYY-MM-DD or ISO 8601 date-time (YYYY-MM-DDTHH:MM[:SS][zone]); no zone means UTC
    site
Row numbers are spreadsheet rows: the header is row 1, the first record row 2. Line endings may be
LF, CRLF or CR. Dates are strict (no "201911"; years 1900..2100, see DispensingRecord.clean).
Rows are written through patients.dispensing.create_dispensings (rows + audit, one announcement).
"""

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from core.retry import run_in_transaction
from drugs.gs1 import GROUP_SEPARATOR, ScanError, parse_scan
from patients.dispensing import create_dispensings
from patients.models import DispensingRecord, Patient
from patients.scanning import Entered, apply_scan
from patients.text import problem as text_problem

REQUIRED_COLUMNS = ["patient_ref", "dispensed_at", "quantity"]
OPTIONAL_COLUMNS = ["drug", "product_description", "ndc", "lot", "lot_unknown", "expiry", "serial", "scan", "site"]
MAX_ROWS = 100_000
MAX_IMPORT_BYTES = 20 * 1024 * 1024
# Longest drug or product text accepted (CSV, admin form, API, FHIR). Real product names are long
# (parenteral nutrition, kits: openFDA's own product_description runs to its 4,000-character cap)
# and are stored in full (text columns); the bound only stops a cell from carrying megabytes.
MAX_PRODUCT_TEXT = 10_000
# Longest raw text accepted per column (the stored column's length where there is one; the NDC is
# explained by the model, which reads what it can, so it gets some room for "NDC 0378-5814-77").
_LIMITS = {
    "patient_ref": Patient._meta.get_field("external_ref").max_length,
    "drug": MAX_PRODUCT_TEXT,  # the name as typed (kept in drug_text); the model derives the identity key
    "product_description": MAX_PRODUCT_TEXT,
    "ndc": 40,
    "lot": DispensingRecord._meta.get_field("lot").max_length,
    "lot_unknown": 10,
    "expiry": 40,
    "serial": DispensingRecord._meta.get_field("serial").max_length,
    "scan": 400,
    "quantity": 12,
    "dispensed_at": 40,
    "site": DispensingRecord._meta.get_field("site").max_length,
}


_OTHER_COLUMN_LIMIT = 1000  # columns we ignore still must not be a way to send megabytes per cell
# A scanner's group separator (ASCII 29) is data in the scan column; everywhere else it is a stray control.
_ALLOWED_CONTROLS = {"scan": GROUP_SEPARATOR}
_YES, _NO = {"yes", "y", "true", "1", "x"}, {"no", "n", "false", "0", ""}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?", re.ASCII)
# Stripped from both ends of a cell; other whitespace (GS, line breaks) is kept so it can be reported.
_PADDING = " \t\u00a0"
_WHOLE_NUMBER = re.compile(r"[0-9]+", re.ASCII)


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
    records: list = field(default_factory=list)  # the rows imported, for the recall check afterwards

    @property
    def ok(self) -> bool:
        return not self.errors


def _text(data, result: ImportResult) -> str | None:
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


def import_dispensing_csv(data, *, actor: str = "csv", synthetic: bool = False) -> ImportResult:
    """Validate every row of `data` (bytes, str or a stream); import all of them in one transaction
    if every row is good, else none. `actor` is recorded on each row's audit entry."""
    result = ImportResult()
    text = _text(data, result)
    if text is None:
        return result
    try:
        rows = _read_rows(text, result)
    except csv.Error as exc:
        result.errors.append(RowError(0, f"The file is not readable as CSV: {exc}."))
        return result
    if rows is None:
        return result
    result.rows = len(rows)
    patients = {p.external_ref: p for p in Patient.objects.filter(external_ref__in={v["patient_ref"] for _, v in rows})}
    records, seen = [], {}
    for number, values in rows:
        record, reasons = _record(values, patients, synthetic)
        if record is not None and not reasons:
            key = (record.patient_id, record.drug, record.lot, record.dispensed_at)
            if key in seen:
                reasons.append(f"same patient, drug, lot and dispensing time as row {seen[key]}.")
            seen.setdefault(key, number)
        result.errors.extend(RowError(number, reason) for reason in reasons)
        if not reasons:
            records.append((number, record))
    result.errors.extend(_already_recorded(records))
    result.errors.sort(key=lambda e: e.row)  # stable: a row's reasons stay in the order found
    if result.errors or not records:
        if not records and not result.errors:
            result.errors.append(RowError(0, "The file has no dispensing rows."))
        return result

    def _write():
        for _, record in records:
            record.pk = None  # a retried transaction starts again from unsaved rows
            record._state.adding = True
        create_dispensings([r for _, r in records], actor=actor)

    if connection.in_atomic_block:
        with transaction.atomic():  # join the caller's transaction (its owner retries the whole of it)
            _write()
    else:
        run_in_transaction(_write)
    result.imported = len(records)
    result.records = [r for _, r in records]
    return result


def _read_rows(text: str, result: ImportResult):
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [(name or "").strip().lower() for name in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if "lot" not in header and "scan" not in header:
        missing.append("lot (or scan)")
    if missing:
        result.errors.append(RowError(1, f"missing column(s) {', '.join(missing)}; the header must name "
                                         f"{', '.join(REQUIRED_COLUMNS)} and lot or scan "
                                         f"(and may name {', '.join(c for c in OPTIONAL_COLUMNS if c != 'lot')})."))
        return None
    if "drug" not in header and "product_description" not in header:
        result.errors.append(RowError(1, "needs a drug or a product_description column to know what was dispensed."))
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
            result.errors.append(RowError(number, "more cells than header columns (a stray comma?)."))
            continue
        values = {k: (v or "").strip(_PADDING) for k, v in raw.items()}
        if not any(values.values()):
            continue  # blank line
        if reasons := _cell_problems(values):
            result.errors.extend(RowError(number, reason) for reason in reasons)
            continue
        rows.append((number, values))
    return rows


def _cell_problems(values: dict) -> list[str]:
    """Control/bidi characters and over-long cells, named by column, before anything reads them."""
    reasons = []
    for name, value in values.items():
        limit = _LIMITS.get(name) or _OTHER_COLUMN_LIMIT
        if len(value) > limit:
            reasons.append(f"{name}: {len(value)} characters; at most {limit}.")
        elif reason := text_problem(value, allowed=_ALLOWED_CONTROLS.get(name, "")):
            reasons.append(f"{name}: {reason}")
    return reasons


def _record(values: dict, patients: dict, synthetic: bool):
    reasons = []
    ref = values.get("patient_ref", "")
    patient = patients.get(ref)
    if not ref:
        reasons.append("patient_ref is empty.")
    elif patient is None:
        reasons.append(f"no patient with external reference {ref!r}; register the patient first.")
    dispensed_at = _datetime(values.get("dispensed_at", ""), reasons)
    expiry = _date(values.get("expiry", ""), "expiry", reasons)
    quantity = _quantity(values.get("quantity", ""), reasons)
    lot_unknown = _yes_no(values.get("lot_unknown", ""), "lot_unknown", reasons)
    if lot_unknown is None:  # already reported: don't also report the lot as missing or doubled
        lot_unknown = not values.get("lot", "")
    entered = Entered(ndc=values.get("ndc", ""), lot=values.get("lot", ""), expiry=expiry,
                      serial=values.get("serial", ""), lot_unknown=bool(lot_unknown))
    fill, gtin = entered, ""
    if raw_scan := values.get("scan", ""):
        try:
            scanned, problems = apply_scan(parse_scan(raw_scan), entered)
        except ScanError as exc:
            problems, scanned = {"scan": str(exc)}, None
        reasons.extend(f"{name}: {message}" for name, message in problems.items())
        if scanned is not None:  # also with problems: what the scan did give is not reported missing
            fill, gtin = scanned, scanned.gtin
    record = DispensingRecord(
        patient=patient, region=patient.region if patient else "", drug=values.get("drug", ""),
        product_description=values.get("product_description", ""), ndc=fill.ndc, lot=fill.lot,
        lot_unknown=bool(lot_unknown), expiry=fill.expiry, serial=fill.serial, gtin=gtin, quantity=quantity or 0,
        dispensed_at=dispensed_at, site=values.get("site", ""), synthetic=synthetic,
    )
    # drug and lot get their explanatory messages from clean(), not "this field cannot be blank";
    # fields already reported above are not reported twice.
    exclude = {"drug", "lot", "region", "patient"} | ({"dispensed_at"} if dispensed_at is None else set())
    try:
        record.full_clean(exclude=exclude, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            reasons.extend(f"{name}: {m}" for m in messages)
    return (record if patient is not None else None), reasons


def _datetime(raw: str, reasons: list):
    if not raw:
        reasons.append("dispensed_at is empty.")
        return None
    parsed = None
    try:
        if _DATE.fullmatch(raw):
            # a date alone: midday, so no zone shifts its day
            parsed = datetime.combine(date.fromisoformat(raw), time(12, 0))
        elif _DATETIME.fullmatch(raw):
            parsed = datetime.fromisoformat(raw)
    except ValueError:
        parsed = None
    if parsed is None:
        reasons.append(f"dispensed_at {raw!r} is not a date (YYYY-MM-DD) or ISO 8601 date-time "
                       "(YYYY-MM-DDTHH:MM, optionally seconds and a zone).")
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _date(raw: str, name: str, reasons: list) -> date | None:
    if not raw:
        return None
    try:
        parsed = date.fromisoformat(raw) if _DATE.fullmatch(raw) else None
    except ValueError:
        parsed = None
    if parsed is None:
        reasons.append(f"{name} {raw!r} is not a date (YYYY-MM-DD).")
    return parsed


def _quantity(raw: str, reasons: list) -> int | None:
    # Digits 0-9 only: str.isdigit() accepts '²' (int() then fails) and '١٢' (read as 12).
    if not _WHOLE_NUMBER.fullmatch(raw) or int(raw) < 1:
        reasons.append(f"quantity {raw!r} is not a whole number above zero (digits 0-9).")
        return None
    return int(raw)


def _yes_no(raw: str, name: str, reasons: list) -> bool | None:
    value = raw.strip().lower()
    if value in _YES:
        return True
    if value in _NO:
        return False
    reasons.append(f"{name} {raw!r} is not yes or no.")
    return None


def _already_recorded(records) -> list[RowError]:
    """Re-importing the same file must not double the dispensing (and the notices it leads to)."""
    if not records:
        return []
    existing = set(
        DispensingRecord.objects.filter(
            patient_id__in={r.patient_id for _, r in records}, lot__in={r.lot for _, r in records}
        ).values_list("patient_id", "drug", "lot", "dispensed_at")
    )
    return [
        RowError(number, f"already recorded: {r.patient.external_ref} got lot {r.lot_label} of {r.drug} at "
                         f"{r.dispensed_at:%Y-%m-%d %H:%M} UTC.")
        for number, r in records
        if (r.patient_id, r.drug, r.lot, r.dispensed_at) in existing
    ]
