"""Registering patients from a CSV file, and the patient columns a dispensing file may carry.

    import_patients_csv(data, *, user, synthetic=False) -> ImportResult     a patients file, all rows or none
    newcomers(rows, registered, *, synthetic) -> ({ref: Patient}, [RowError])  patients a dispensing file registers
    register_patients(patients, *, user) -> list[Patient]                  rows + the admin's record of each addition

Columns of a patients file (the csvfile rules: header row, any order, spreadsheet row numbers, size and
row limits, no control or text-direction characters):
    external_ref        the pharmacy's own patient id (required; new: a patients file registers, never changes)
    display_name        required
    region              required: one of UNSAY_REGIONS, where the patient's records live
    preferred_channel   email or sms (default email); the chosen channel needs its address
    preferred_language  en or es (default en): the language of letters
    email, phone        phone as dialled, stored E.164 (numbers without a country code are UNSAY_PHONE_REGION's)
Every row is validated as the admin's patient form is (Patient.full_clean: Patient.clean normalises the phone
and refuses a channel without its address). An external_ref already registered, or given twice, is an error.

A dispensing file (patients.csvimport) may carry the same columns after patient_ref. For a patient not yet
registered they register the patient with the rows (the same validation; the details of one patient may be
spread over its rows, but must not disagree). For a registered patient they are checked, never applied: a
column that differs from what is registered is an error of that row (a file naming another name or contact
for a reference is a mis-keyed reference as often as a moved patient, and either way a pharmacist decides,
in the admin). Empty cells agree with anything.

Each registered patient gets the admin's own record of an addition (django.contrib.admin LogEntry, "Added by
CSV import.", by the user who imported), as a patient added in the admin form does: its history page says
who added it. The user must hold the patients.add_patient permission.
"""

from django.contrib.admin.models import ADDITION, LogEntry
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection, transaction

from core.retry import run_in_transaction
from patients.csvfile import ImportResult, RowError, decoded, read_rows
from patients.models import Patient, normalize_phone, validate_region

PATIENT_COLUMNS = ("display_name", "region", "preferred_channel", "preferred_language", "email", "phone")
REQUIRED_COLUMNS = ("external_ref", "display_name", "region")
LIMITS = {name: Patient._meta.get_field(name).max_length for name in ("external_ref", *PATIENT_COLUMNS)}
ADD_PERMISSION = "patients.add_patient"
LOGGED_AS = "Added by CSV import."
BATCH = 1000


def _choice(raw: str, choices, name: str, reasons: list) -> str:
    """A choice by its value or its label, any case ('' when empty: the model's default)."""
    wanted = raw.strip().lower()
    for value, label in choices:
        if wanted in (str(value).lower(), str(label).lower()):
            return value
    if wanted:
        reasons.append(f"{name} {raw!r} is not one of {', '.join(str(v) for v, _ in choices)}.")
    return ""


def build_patient(values: dict, *, synthetic: bool = False) -> tuple[Patient, list[str]]:
    """An unsaved patient from a row's columns, validated as the admin form validates one; (patient, reasons)."""
    reasons: list[str] = []
    channel = _choice(values.get("preferred_channel", ""), Patient.Channel.choices, "preferred_channel", reasons)
    language = _choice(values.get("preferred_language", ""), Patient.Language.choices, "preferred_language",
                       reasons)
    patient = Patient(external_ref=values.get("external_ref", ""), display_name=values.get("display_name", ""),
                      region=values.get("region", ""), preferred_channel=channel or Patient.Channel.EMAIL,
                      preferred_language=language or Patient.Language.ENGLISH, email=values.get("email", ""),
                      phone=values.get("phone", ""), synthetic=synthetic)
    skip = {name for name, chosen in (("preferred_channel", channel), ("preferred_language", language))
            if values.get(name) and not chosen}  # already reported
    try:
        patient.full_clean(exclude=skip, validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        reasons.extend(f"{name}: {message}" for name, messages in exc.message_dict.items() for message in messages)
    return patient, reasons


def _comparable(column: str, value: str, synthetic: bool) -> str:
    """A value as two people would compare it: names and addresses without case or doubled spaces, a phone
    in E.164, a choice by its value."""
    if column == "phone":
        try:
            return normalize_phone(value, synthetic=synthetic)
        except ValidationError:
            return value
    if column == "preferred_channel":
        return _choice(value, Patient.Channel.choices, column, []) or value.lower()
    if column == "preferred_language":
        return _choice(value, Patient.Language.choices, column, []) or value.lower()
    return " ".join(value.split()).casefold()


def differences(patient: Patient, carried: dict) -> list[str]:
    """Why the patient columns of a row disagree with the registered patient (one reason per column), or []."""
    return [f"{column} differs from what is registered for patient {patient.external_ref}: a dispensing file "
            "never changes a registered patient (correct the file, or change the patient in the admin)."
            for column, value in carried.items()
            if _comparable(column, value, patient.synthetic)
            != _comparable(column, str(getattr(patient, column) or ""), patient.synthetic)]


def newcomers(rows, registered: dict, *, synthetic: bool = False) -> tuple[dict, list[RowError]]:
    """For a dispensing file's rows (row number, values): the patients its patient columns register (by
    patient_ref, unsaved and validated; a patient they cannot register maps to None) and the rows whose patient
    columns are wrong."""
    errors: list[RowError] = []
    details: dict[str, dict] = {}
    first: dict[str, int] = {}
    for number, values in rows:
        ref = values.get("patient_ref", "")
        carried = {column: values[column] for column in PATIENT_COLUMNS if values.get(column)}
        if not ref or not carried:
            continue
        if ref in registered:
            errors.extend(RowError(number, reason) for reason in differences(registered[ref], carried))
            continue
        known = details.setdefault(ref, {})
        first.setdefault(ref, number)
        for column, value in carried.items():
            if column in known and _comparable(column, known[column], synthetic) != _comparable(column, value,
                                                                                                synthetic):
                errors.append(RowError(number, f"{column} differs from row {first[ref]}'s for the new patient {ref}: "
                                               "one patient, one set of details."))
            known.setdefault(column, value)
    found = {}
    for ref, carried in details.items():
        patient, reasons = build_patient({"external_ref": ref, **carried}, synthetic=synthetic)
        errors.extend(RowError(first[ref], f"new patient {ref}: {reason}") for reason in reasons)
        found[ref] = None if reasons else patient
    return found, errors


def register_patients(patients: list[Patient], *, user) -> list[Patient]:
    """Write new, validated patients and, per patient, the admin's record of its addition by `user`, in one
    transaction (the caller's, when it has one)."""
    if not patients:
        return []
    if not user.has_perm(ADD_PERMISSION):
        raise PermissionDenied(f"{user.get_username()} may not add patients (patients.add_patient).")
    for patient in patients:
        validate_region(patient.region)  # Patient.save's own rule, which bulk_create does not run
    with transaction.atomic():
        Patient.objects.bulk_create(patients, batch_size=BATCH)
        for start in range(0, len(patients), BATCH):
            LogEntry.objects.log_actions(user.pk, patients[start:start + BATCH], ADDITION, LOGGED_AS)
    return patients


def _header_problem(header: list[str]) -> str:
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        return (f"missing column(s) {', '.join(missing)}; the header must name {', '.join(REQUIRED_COLUMNS)} "
                f"(and may name {', '.join(c for c in PATIENT_COLUMNS if c not in REQUIRED_COLUMNS)}).")
    return ""


def import_patients_csv(data, *, user, synthetic: bool = False) -> ImportResult:
    """Validate every row of `data` (bytes, str or a stream); register all of them in one transaction if every
    row is good, else none. `user` is who registers them (the admin's record of each addition)."""
    if not user.has_perm(ADD_PERMISSION):
        raise PermissionDenied(f"{user.get_username()} may not add patients (patients.add_patient).")
    result = ImportResult()
    text = decoded(data, result)
    rows = None if text is None else read_rows(text, result, header_problem=_header_problem, limits=LIMITS)
    if rows is None:
        return result
    already = set(Patient.objects.filter(external_ref__in={v["external_ref"] for _, v in rows})
                  .values_list("external_ref", flat=True))
    patients, seen = [], {}
    for number, values in rows:
        patient, reasons = build_patient(values, synthetic=synthetic)
        ref = values["external_ref"]
        if ref in already:
            reasons.append(f"patient {ref} is already registered: a patients file registers new patients only "
                           "(change a registered patient in the admin).")
        elif ref and ref in seen:
            reasons.append(f"external_ref {ref} is also on row {seen[ref]}.")
        seen.setdefault(ref, number)
        result.errors.extend(RowError(number, reason) for reason in reasons)
        patients.append(patient)
    result.errors.sort(key=lambda e: e.row)
    if result.errors or not patients:
        if not patients and not result.errors:
            result.errors.append(RowError(0, "The file has no patient rows."))
        return result

    def _write():
        for patient in patients:
            patient.pk = None  # a retried transaction starts again from unsaved rows
            patient._state.adding = True
        register_patients(patients, user=user)

    if connection.in_atomic_block:
        with transaction.atomic():  # join the caller's transaction (its owner retries the whole of it)
            _write()
    else:
        run_in_transaction(_write)
    result.imported = len(patients)
    result.patients = patients
    return result
