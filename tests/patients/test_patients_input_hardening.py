"""Bad input to the dispensing CSV import and the patient/dispensing forms gets a clear error, never a
500 and never a silently different value: non-ASCII digits, CR-only line endings, NUL,
over-long cells, lenient dates, oversize files, text-direction controls. A hypothesis fuzzer over
CSV rows checks: no exception, and all rows or none.
"""

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patients import csvfile, csvimport
from patients.csvimport import import_dispensing_csv
from patients.models import DispensingChange, DispensingRecord, Patient

HEADER = ["patient_ref", "drug", "ndc", "lot", "expiry", "quantity", "dispensed_at", "site"]
GOOD = {"patient_ref": "P-1", "drug": "valsartan", "ndc": "0378-5814-77", "lot": "3069020", "expiry": "2020-06-30",
        "quantity": "90", "dispensed_at": "2019-01-02", "site": "Main St"}


def csv_text(rows, *, ending="\n", header=HEADER):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator=ending)
    writer.writeheader()
    for r in rows:
        writer.writerow({**GOOD, **r})
    return out.getvalue()


def errors_of(result):
    return [(e.row, e.reason) for e in result.errors]


@pytest.mark.parametrize("quantity", ["²", "١٢", "12.0", "1e3", "+5", " 3 4", "٣", "0x10", "99999999999"])
def test_a_quantity_that_is_not_plain_digits_is_a_row_error(patient, quantity):
    result = import_dispensing_csv(csv_text([{"quantity": quantity}]))
    assert not result.ok and result.errors[0].row == 2
    assert "quantity" in result.errors[0].reason
    assert not DispensingRecord.objects.exists()


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n"])
def test_every_line_ending_imports(patient, ending):
    text = csv_text([{"lot": "A1"}, {"lot": "A2", "dispensed_at": "2019-01-03"}], ending=ending)
    result = import_dispensing_csv(text.encode())
    assert result.ok and result.imported == 2, errors_of(result)
    assert set(DispensingRecord.objects.values_list("lot", flat=True)) == {"A1", "A2"}


@pytest.mark.parametrize("column", ["patient_ref", "drug", "lot", "site", "ndc", "quantity", "dispensed_at"])
def test_a_nul_in_any_field_is_a_row_error_naming_the_column(patient, column):
    value = GOOD[column][:2] + "\x00" + GOOD[column][2:]
    result = import_dispensing_csv(csv_text([{}, {column: value, "lot": "B1" if column != "lot" else value}]))
    assert errors_of(result) == [(3, f"{column}: contains a control character, U+0000 control character, at "
                                     "character 3; retype the value without it (it is invisible, and it would reach "
                                     "patient letters).")]
    assert not DispensingRecord.objects.exists()


@pytest.mark.parametrize("column, limit", [("patient_ref", 64), ("drug", csvimport.MAX_PRODUCT_TEXT),
                                           ("product_description", csvimport.MAX_PRODUCT_TEXT), ("lot", 100),
                                           ("site", 200), ("ndc", 40), ("quantity", 12)])
def test_an_over_long_field_is_a_row_error_naming_the_column(patient, column, limit):
    result = import_dispensing_csv(csv_text([{column: "7" * (limit + 1)}], header=[*HEADER, "product_description"]))
    assert errors_of(result) == [(2, f"{column}: {limit + 1} characters; at most {limit}.")]


def test_a_long_real_product_name_is_kept_in_full(patient):
    """A real product description of hundreds of characters (openFDA D-0864-2016, parenteral nutrition) is
    a name, not an over-long cell: stored in full, its identity derived from it."""
    from tests.factories import openfda_record

    name = openfda_record("D-0864-2016")["product_description"]
    assert len(name) > 300
    result = import_dispensing_csv(csv_text([{"drug": name}]))
    assert result.ok, result.errors
    row = DispensingRecord.objects.get()
    assert row.drug_text == name and row.drug


def test_an_over_long_cell_in_a_column_we_ignore_is_refused_too(patient):
    result = import_dispensing_csv(csv_text([{"notes": "x" * 1001}], header=[*HEADER, "notes"]))
    assert errors_of(result) == [(2, "notes: 1001 characters; at most 1000.")]


def test_a_cell_beyond_the_csv_field_limit_is_a_file_error(patient):
    result = import_dispensing_csv(csv_text([{"site": "x" * 200_000}]))
    assert not result.ok and result.errors[0].row == 0 and "not readable as CSV" in result.errors[0].reason


@pytest.mark.parametrize("column, value, expected", [
    ("dispensed_at", "201911", "dispensed_at '201911' is not a date"),
    ("dispensed_at", "20191101", "dispensed_at '20191101' is not a date"),
    ("dispensed_at", "2019-1-2", "is not a date"),
    ("dispensed_at", "2019-W01", "is not a date"),
    ("dispensed_at", "2019-01-02T10", "is not a date"),
    ("dispensed_at", "٢٠١٩-٠١-٠٢", "is not a date"),
    ("dispensed_at", "1800-01-02", "dispensed_at: The year 1800 is not plausible"),
    ("expiry", "201911", "expiry '201911' is not a date (YYYY-MM-DD)."),
    ("expiry", "2999-01-01", "expiry: The year 2999 is not plausible"),
    ("expiry", "2019-02-30", "expiry '2019-02-30' is not a date"),
])
def test_dates_are_strict(patient, column, value, expected):
    result = import_dispensing_csv(csv_text([{column: value}]))
    assert not result.ok and any(expected in reason for _, reason in errors_of(result)), errors_of(result)


def test_iso_date_times_with_zones_still_import(patient):
    result = import_dispensing_csv(csv_text([{"dispensed_at": "2019-01-02T10:15:00+01:00"},
                                             {"dispensed_at": "2019-01-03 09:00", "lot": "A2"},
                                             {"dispensed_at": "2019-01-04T09:00:00Z", "lot": "A3"}]))
    assert result.ok, errors_of(result)


def test_a_file_over_the_size_limit_is_refused_with_the_limit(patient, monkeypatch):
    monkeypatch.setattr(csvfile, "MAX_IMPORT_BYTES", 1024 * 1024)
    big = csv_text([{}]) + "\n" * (1024 * 1024)
    result = import_dispensing_csv(big.encode())
    assert errors_of(result) == [(0, "The file is larger than the limit of 1 MB; split it into smaller files.")]
    stream = import_dispensing_csv(io.BytesIO(big.encode()))
    assert not stream.ok and "larger than the limit" in stream.errors[0].reason


@pytest.mark.parametrize("column", ["drug", "site", "lot"])
def test_text_direction_controls_are_refused_in_csv_text(patient, column):
    result = import_dispensing_csv(csv_text([{column: "abc\u202edef"}]))
    assert errors_of(result)[0][0] == 2
    assert f"{column}: contains a text-direction control, U+202E RIGHT-TO-LEFT OVERRIDE" in errors_of(result)[0][1]


def test_a_lone_surrogate_in_text_is_a_row_error_not_a_database_error(patient):
    result = import_dispensing_csv(csv_text([{"site": "a\ud800"}]))
    reason = errors_of(result)[0][1]
    assert reason.startswith("site: contains a broken character (lone surrogate), U+D800, at character 2")


def test_a_column_named_twice_is_refused(patient):
    result = import_dispensing_csv("patient_ref,drug,lot,lot,quantity,dispensed_at\nP-1,v,A,B,1,2019-01-01\n")
    assert errors_of(result) == [(1, "column(s) named twice: lot.")]


def test_every_bad_row_is_reported_and_nothing_imported(patient):
    rows = [{}, {"quantity": "²", "lot": "B1"}, {"lot": "B2"}, {"site": "x\x00", "lot": "B3"},
            {"expiry": "201911", "lot": "B4"}]
    result = import_dispensing_csv(csv_text(rows, ending="\r"))
    assert [row for row, _ in errors_of(result)] == [3, 5, 6]
    assert not DispensingRecord.objects.exists() and not DispensingChange.objects.exists()


# --- Forms --------------------------------------------------------------------------------------------------


def patient_form(**fields):
    data = {"display_name": "Bea (synthetic)", "external_ref": "P-2", "region": "aws-us-east-1",
            "preferred_channel": "email", "email": "bea@example.com", "phone": "",
            "dispensings-TOTAL_FORMS": "0", "dispensings-INITIAL_FORMS": "0", "dispensings-MIN_NUM_FORMS": "0",
            "dispensings-MAX_NUM_FORMS": "1000"}
    data.update(fields)
    return data


@pytest.mark.parametrize("field, value, expected", [
    ("display_name", "Bea \u202egnp.exe", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("display_name", "Bea\u2066 Smith", "U+2066 LEFT-TO-RIGHT ISOLATE"),
    ("display_name", "Bea\u200f", "U+200F RIGHT-TO-LEFT MARK"),
    ("external_ref", "P-\u202e2", "U+202E"),
    ("phone", "+1555\u202d0100", "U+202D LEFT-TO-RIGHT OVERRIDE"),
    ("display_name", "Bea\tSmith", "U+0009"),
])
def test_the_patient_form_refuses_direction_and_control_characters(admin_client, db, field, value, expected):
    response = admin_client.post("/admin/patients/patient/add/", patient_form(**{field: value}))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert expected in " ".join(errors[field]), errors
    assert not Patient.objects.filter(external_ref__startswith="P-").exists()


def test_a_name_in_a_right_to_left_script_is_fine(admin_client, db):
    response = admin_client.post("/admin/patients/patient/add/", patient_form(display_name="مريم (synthetic)"))
    assert response.status_code == 302
    assert Patient.objects.get(external_ref="P-2").display_name == "مريم (synthetic)"


@pytest.mark.parametrize("fields, field, expected", [
    ({"quantity": "١٢"}, "quantity", "Use the digits 0-9"),
    ({"quantity": "²"}, "quantity", ""),
    ({"dispensed_at_0": "٢٠١٩-٠٣-٠١"}, "dispensed_at", "Use the digits 0-9"),
    ({"expiry": "2999-01-01"}, "expiry", "The year 2999 is not plausible"),
    ({"dispensed_at_0": "1850-01-01"}, "dispensed_at", "The year 1850 is not plausible"),
    ({"site": "Main\u202eSt"}, "site", "U+202E"),
    ({"drug": "valsartan\x00"}, "drug", "Null characters are not allowed"),
])
def test_the_dispensing_form_refuses_what_the_csv_refuses(admin_client, patient, fields, field, expected):
    data = {"patient": patient.pk, "scan": "", "drug": "valsartan", "product_description": "", "ndc": "",
            "lot": "A1", "expiry": "", "serial": "", "quantity": "12", "dispensed_at_0": "2019-03-01",
            "dispensed_at_1": "10:00:00", "site": "", **fields}
    response = admin_client.post("/admin/patients/dispensingrecord/add/", data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors and expected in " ".join(errors[field]), errors
    assert not DispensingRecord.objects.exists()


def test_the_admin_upload_refuses_an_oversize_file_before_reading_it(admin_client, patient, monkeypatch):
    from patients import forms

    monkeypatch.setattr(forms, "MAX_IMPORT_BYTES", 10)
    upload = SimpleUploadedFile("d.csv", csv_text([{}]).encode())
    response = admin_client.post("/admin/patients/dispensingrecord/import/", {"file": upload})
    assert response.status_code == 400 and "the limit is" in " ".join(response.context["form"].errors["file"])


# --- Fuzzer ------------------------------------------------------------------------------------------------------

NASTY = ["", "²", "١٢", "٣", "\x00", "\u202e", "\u2066x", "201911", "2999-01-01", "1800-01-01", "2019-02-30",
         "x" * 1001, "7" * 101, "\r", "\n", "\r\n", '"', ",", "-1", "0", "1e3", "NaN", "N/A", "unknown", "\ufeff",
         "\x1d", "\ud800", "\udfff", "Lot # ", "0378-5814-77", "12345", "yes", "2019-01-02T25:00", "𝟙𝟚", "\u00a0"]
cell = st.one_of(st.sampled_from(NASTY), st.text(max_size=12), st.text(st.characters(codec="utf-8"), max_size=6))
row = st.fixed_dictionaries({c: st.one_of(st.just(GOOD[c]), st.just(GOOD[c]), cell) for c in HEADER})


def raw_join(rows, ending):
    # Unquoted, so commas, quotes and line breaks inside cells break the row structure on purpose.
    return ending.join([",".join(HEADER)] + [",".join({**GOOD, **r}[c] for c in HEADER) for r in rows]) + ending


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(rows=st.lists(row, min_size=1, max_size=4), ending=st.sampled_from(["\n", "\r\n", "\r"]),
       quoted=st.booleans(), as_bytes=st.booleans())
def test_fuzzed_csv_rows_never_crash_and_import_all_or_nothing(patient, rows, ending, quoted, as_bytes):
    for i, r in enumerate(rows):  # distinct times, so a good file is not refused as duplicate rows
        r.setdefault("dispensed_at", f"2019-01-{i + 1:02d}")
    text = csv_text(rows, ending=ending) if quoted else raw_join(rows, ending)
    data = text.encode("utf-8", "surrogatepass") if as_bytes else text
    with transaction.atomic():
        before = DispensingRecord.objects.count()
        result = import_dispensing_csv(data)
        after = DispensingRecord.objects.count()
        if result.ok:
            assert after - before == result.imported == result.rows > 0
            assert DispensingChange.objects.count() == result.imported
        else:
            assert after == before and DispensingChange.objects.count() == 0
            assert all(e.reason for e in result.errors)
        transaction.set_rollback(True)
