"""CSV import of dispensing: every bad row is reported, and a file with any bad row imports nothing.

Columns (header row required, order free, names case-insensitive):
    patient_ref     the patient's external reference (the pharmacy's own id); the patient must exist
    drug            generic name ("Valsartan"); may be left empty when product_description names it
    product_description, ndc (10-digit hyphenated or 11-digit), lot, expiry (YYYY-MM-DD),
    quantity (whole number > 0), dispensed_at (YYYY-MM-DD or ISO 8601 date-time; no zone means UTC), site
Row numbers are spreadsheet rows: the header is row 1, the first record row 2.
"""

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils.dateparse import parse_date, parse_datetime

from unsay_site.retry import run_in_transaction

from .models import DispensingRecord, Patient

REQUIRED_COLUMNS = ["patient_ref", "lot", "dispensed_at", "quantity"]
OPTIONAL_COLUMNS = ["drug", "product_description", "ndc", "expiry", "site"]
MAX_ROWS = 100_000


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


def import_dispensing_csv(data, *, synthetic: bool = False) -> ImportResult:
    """Validate every row of `data` (bytes, str or a text stream); import all of them in one
    transaction if every row is good, else none."""
    result = ImportResult()
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data if isinstance(data, str) else data.read()
    except UnicodeDecodeError as exc:
        result.errors.append(RowError(0, f"The file is not UTF-8 text ({exc.reason} at byte {exc.start})."))
        return result
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [(name or "").strip().lower() for name in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        result.errors.append(RowError(1, f"missing column(s) {', '.join(missing)}; the header must name "
                                         f"{', '.join(REQUIRED_COLUMNS)} "
                                         f"(and may name {', '.join(OPTIONAL_COLUMNS)})."))
        return result
    if "drug" not in header and "product_description" not in header:
        result.errors.append(RowError(1, "needs a drug or a product_description column to know what was dispensed."))
        return result
    reader.fieldnames = header
    rows = []
    for number, raw in enumerate(reader, start=2):
        if number - 1 > MAX_ROWS:
            result.errors.append(RowError(number, f"more than {MAX_ROWS} rows; split the file."))
            return result
        if None in raw:
            result.errors.append(RowError(number, "more cells than header columns (a stray comma?)."))
            continue
        values = {k: (v or "").strip() for k, v in raw.items()}
        if not any(values.values()):
            continue  # blank line
        rows.append((number, values))
    result.rows = len(rows)
    patients = {p.external_ref: p for p in Patient.objects.filter(external_ref__in={v["patient_ref"] for _, v in rows})}
    records, seen = [], {}
    for number, values in rows:
        record, reasons = _record(values, patients, synthetic)
        if record is not None:
            key = (record.patient_id, record.drug, record.lot, record.dispensed_at)
            if key in seen:
                reasons.append(f"same patient, drug, lot and dispensing time as row {seen[key]}.")
            seen.setdefault(key, number)
        result.errors.extend(RowError(number, reason) for reason in reasons)
        if not reasons:
            records.append((number, record))
    result.errors.extend(_already_recorded(records))
    if result.errors or not records:
        if not records and not result.errors:
            result.errors.append(RowError(0, "The file has no dispensing rows."))
        return result

    def _write():
        DispensingRecord.objects.bulk_create([r for _, r in records], batch_size=1000)

    if connection.in_atomic_block:
        with transaction.atomic():  # join the caller's transaction (its owner retries the whole of it)
            _write()
    else:
        run_in_transaction(_write)
    result.imported = len(records)
    result.records = [r for _, r in records]
    return result


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
    record = DispensingRecord(
        patient=patient, region=patient.region if patient else "", drug=values.get("drug", ""),
        product_description=values.get("product_description", ""), ndc=values.get("ndc", ""),
        lot=values.get("lot", ""), expiry=expiry, quantity=quantity or 0, dispensed_at=dispensed_at,
        site=values.get("site", ""), synthetic=synthetic,
    )
    # drug and lot get their explanatory messages from clean(), not "this field cannot be blank";
    # fields already reported above are not reported twice.
    exclude = {"drug", "lot", "region", "patient"} | ({"dispensed_at"} if dispensed_at is None else set())
    try:
        record.full_clean(exclude=exclude, validate_unique=False)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            reasons.extend(f"{name}: {m}" for m in messages)
    return (record if patient is not None else None), reasons


def _datetime(raw: str, reasons: list):
    if not raw:
        reasons.append("dispensed_at is empty.")
        return None
    try:
        if len(raw) == 10 and (day := parse_date(raw)) is not None:
            parsed = datetime.combine(day, time(12, 0))  # a date alone: midday, so no zone shifts its day
        else:
            parsed = parse_datetime(raw)
    except ValueError:
        parsed = None
    if parsed is None:
        reasons.append(f"dispensed_at {raw!r} is not a date (YYYY-MM-DD) or ISO 8601 date-time.")
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _date(raw: str, name: str, reasons: list) -> date | None:
    if not raw:
        return None
    try:
        parsed = parse_date(raw)
    except ValueError:
        parsed = None
    if parsed is None:
        reasons.append(f"{name} {raw!r} is not a date (YYYY-MM-DD).")
    return parsed


def _quantity(raw: str, reasons: list) -> int | None:
    if not raw.isdigit() or int(raw) < 1:
        reasons.append(f"quantity {raw!r} is not a whole number above zero.")
        return None
    return int(raw)


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
        RowError(number, f"already recorded: {r.patient.external_ref} got lot {r.lot} of {r.drug} at "
                         f"{r.dispensed_at:%Y-%m-%d %H:%M} UTC.")
        for number, r in records
        if (r.patient_id, r.drug, r.lot, r.dispensed_at) in existing
    ]
