"""CSV import of dispensing: every bad row is reported, and a file with any bad row imports nothing.

Columns (header row required, order free, names case-insensitive):
    patient_ref     the patient's external reference (the pharmacy's own id); the patient must be registered,
                    or be registered by the file's patient columns (below)
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
    display_name, region, preferred_channel, preferred_language, email, phone
                    optional patient columns (patients.patient_import): they register a patient not yet
                    registered, validated as a patients file is, by the `user` importing; for a registered
                    patient they must agree with what is registered (a row that differs is an error: a
                    dispensing file never changes a patient)
Row numbers are spreadsheet rows: the header is row 1, the first record row 2. Line endings may be
LF, CRLF or CR (patients.csvfile: the reading rules every import shares). Dates are strict (no "201911";
years 1900..2100, see DispensingRecord.clean). Rows are written through patients.dispensing.create_dispensings
(rows + audit, one announcement), after the patients the file registers (patient_import.register_patients).
"""

import re
from datetime import UTC, date, datetime, time

from django.core.exceptions import ValidationError
from django.db import connection, transaction

from core.retry import run_in_transaction
from drugs.gs1 import GROUP_SEPARATOR, ScanError, parse_scan
from patients import patient_import
from patients.csvfile import ImportResult, RowError, decoded, read_rows, yes_no
from patients.dispensing import create_dispensings
from patients.models import DispensingRecord, Patient
from patients.scanning import Entered, apply_scan

REQUIRED_COLUMNS = ["patient_ref", "dispensed_at", "quantity"]
OPTIONAL_COLUMNS = ["drug", "product_description", "ndc", "lot", "lot_unknown", "expiry", "serial", "scan", "site",
                    *patient_import.PATIENT_COLUMNS]
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
    **{name: patient_import.LIMITS[name] for name in patient_import.PATIENT_COLUMNS},
}
# A scanner's group separator (ASCII 29) is data in the scan column; everywhere else it is a stray control.
_ALLOWED_CONTROLS = {"scan": GROUP_SEPARATOR, "lot": GROUP_SEPARATOR}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?", re.ASCII)
_WHOLE_NUMBER = re.compile(r"[0-9]+", re.ASCII)


def import_dispensing_csv(data, *, actor: str = "csv", synthetic: bool = False, user=None) -> ImportResult:
    """Validate every row of `data` (bytes, str or a stream); import all of them in one transaction
    if every row is good, else none. `actor` is recorded on each row's audit entry; `user` registers the
    patients the file's patient columns add (none without a user)."""
    result = ImportResult()
    text = decoded(data, result)
    rows = None if text is None else read_rows(text, result, header_problem=_header_problem, limits=_LIMITS,
                                               allowed_controls=_ALLOWED_CONTROLS)
    if rows is None:
        return result
    patients = {p.external_ref: p for p in Patient.objects.filter(external_ref__in={v["patient_ref"] for _, v in rows})}
    found, problems = patient_import.newcomers(rows, patients, synthetic=synthetic)
    new = {ref: patient for ref, patient in found.items() if patient is not None}
    result.errors.extend(problems + _who_registers(new, user))
    patients.update(new)
    records, seen = [], {}
    for number, values in rows:
        # A patient the file's columns could not register is explained where they are wrong.
        record, reasons = _record(values, patients, synthetic, explained=found.keys())
        if record is not None and not reasons:
            key = (values["patient_ref"], record.drug, record.lot, record.dispensed_at)
            if key in seen:
                reasons.append(f"same patient, drug, lot and dispensing time as row {seen[key]}.")
            seen.setdefault(key, number)
        result.errors.extend(RowError(number, reason) for reason in reasons)
        if not reasons and record is not None:
            records.append((number, record))
    result.errors.extend(_already_recorded(records))
    result.errors.sort(key=lambda e: e.row)  # stable: a row's reasons stay in the order found
    if result.errors or not records:
        if not records and not result.errors:
            result.errors.append(RowError(0, "The file has no dispensing rows."))
        return result

    def _write():
        for obj in [*new.values(), *(record for _, record in records)]:
            obj.pk = None  # a retried transaction starts again from unsaved rows
            obj._state.adding = True
        patient_import.register_patients(list(new.values()), user=user)
        for _, record in records:
            record.patient_id = record.patient.pk  # a patient registered just now has its id only now
        create_dispensings([r for _, r in records], actor=actor)

    if connection.in_atomic_block:
        with transaction.atomic():  # join the caller's transaction (its owner retries the whole of it)
            _write()
    else:
        run_in_transaction(_write)
    result.imported = len(records)
    result.records = [r for _, r in records]
    result.patients = list(new.values())
    return result


def _who_registers(new: dict, user) -> list[RowError]:
    """A file that registers patients needs a user who may (the admin's record of each addition names them)."""
    if not new:
        return []
    refs = ", ".join(sorted(new)[:5]) + (", ..." if len(new) > 5 else "")
    if user is None:
        return [RowError(0, f"The file registers {len(new)} new patient(s) ({refs}): name who registers them "
                            "(import it in the admin, or with --by USERNAME).")]
    if not user.has_perm(patient_import.ADD_PERMISSION):
        return [RowError(0, f"The file registers {len(new)} new patient(s) ({refs}), and "
                            f"{user.get_username()} may not add patients.")]
    return []


def _header_problem(header: list[str]) -> str:
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if "lot" not in header and "scan" not in header:
        missing.append("lot (or scan)")
    if missing:
        return (f"missing column(s) {', '.join(missing)}; the header must name {', '.join(REQUIRED_COLUMNS)} and lot "
                f"or scan (and may name {', '.join(c for c in OPTIONAL_COLUMNS if c != 'lot')}).")
    if "drug" not in header and "product_description" not in header:
        return "needs a drug or a product_description column to know what was dispensed."
    return ""


def _record(values: dict, patients: dict, synthetic: bool, explained=()):
    reasons = []
    ref = values.get("patient_ref", "")
    patient = patients.get(ref)
    if not ref:
        reasons.append("patient_ref is empty.")
    elif patient is None and ref not in explained:
        reasons.append(f"no patient with external reference {ref!r}; register the patient first (or give "
                       "display_name, region and a contact in the file's patient columns).")
    dispensed_at = _datetime(values.get("dispensed_at", ""), reasons)
    expiry = _date(values.get("expiry", ""), "expiry", reasons)
    quantity = _quantity(values.get("quantity", ""), reasons)
    lot_unknown = yes_no(values.get("lot_unknown", ""), "lot_unknown", reasons)
    if lot_unknown is None:  # already reported: don't also report the lot as missing or doubled
        lot_unknown = not values.get("lot", "")
    entered = Entered(ndc=values.get("ndc", ""), lot=values.get("lot", ""), expiry=expiry,
                      serial=values.get("serial", ""), lot_unknown=bool(lot_unknown), site=values.get("site", ""))
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
