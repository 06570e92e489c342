"""CSV import of dispensing: all rows or none, every bad row reported with its row number."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from patients.csvimport import import_dispensing_csv
from patients.models import DispensingRecord
from tests.factories import make_patient

HEADER = "patient_ref,drug,product_description,ndc,lot,expiry,quantity,dispensed_at,site\n"
GOOD_ROWS = [
    "P-1,Valsartan,,0378-5814-77,Lot # 3069020,2020-06-30,90,2019-01-02,Main St\n",
    "P-2,,Valsartan Tablets USP 160 mg,00378-5814-77,3069020,,30,2019-01-03T10:15:00+01:00,\n",
    "P-1,escitalopram,,,es2207a,,30,2019-02-01 09:00,Main St\n",
]


@pytest.fixture
def patients(db):
    return [make_patient(ref, region=region, name=ref, email=f"{ref}@example.com", phone="")
            for ref, region in [("P-1", "aws-us-east-1"), ("P-2", "aws-eu-west-1")]]


def test_a_good_file_imports_every_row_normalised(patients):
    result = import_dispensing_csv((HEADER + "".join(GOOD_ROWS)).encode("utf-8-sig"))
    assert result.ok and result.imported == 3
    rows = {(r.patient.external_ref, r.drug, r.lot, r.ndc, r.region)
            for r in DispensingRecord.objects.select_related("patient")}
    assert rows == {("P-1", "valsartan", "3069020", "00378-5814-77", "aws-us-east-1"),
                    ("P-2", "valsartan", "3069020", "00378-5814-77", "aws-eu-west-1"),
                    ("P-1", "escitalopram", "ES2207A", "", "aws-us-east-1")}
    tz_row = DispensingRecord.objects.get(patient__external_ref="P-2")
    assert tz_row.dispensed_at.isoformat() == "2019-01-03T09:15:00+00:00"


def test_a_file_with_bad_rows_imports_nothing_and_reports_every_bad_row(patients):
    text = HEADER + GOOD_ROWS[0] + (
        "P-9,valsartan,,0378-5814-77,3069020,,90,2019-01-02,\n"          # row 3: unknown patient
        + GOOD_ROWS[1]
        + "P-1,valsartan,,12345,,,0,2099-01-01,\n"                       # row 5: bad NDC, no lot, qty 0, future
        + "P-2,valsartan,,,A1,31/12/2020,30,yesterday,\n"                # row 6: bad dates
    ) + GOOD_ROWS[2]
    result = import_dispensing_csv(text)
    assert not result.ok and result.imported == 0 and result.rows == 6
    assert DispensingRecord.objects.count() == 0
    by_row = {}
    for error in result.errors:
        by_row.setdefault(error.row, []).append(error.reason)
    assert sorted(by_row) == [3, 5, 6]
    assert by_row[3] == ["no patient with external reference 'P-9'; register the patient first (or give "
                         "display_name, region and a contact in the file's patient columns)."]
    joined = " | ".join(by_row[5])
    for expected in ("Bad NDC: '12345'", "Lot number is missing", "quantity '0'", "Dispensed in the future"):
        assert expected in joined
    assert any("expiry '31/12/2020' is not a date" in r for r in by_row[6])
    assert any("dispensed_at 'yesterday'" in r for r in by_row[6])
    assert str(result.errors[0]).startswith("row 3: ")


def test_a_missing_column_is_reported_against_the_header(patients):
    result = import_dispensing_csv("patient_ref,drug,lot\nP-1,valsartan,A1\n")
    assert [(e.row, e.reason[:41]) for e in result.errors] == [(1, "missing column(s) dispensed_at, quantity;")]


def test_importing_the_same_file_twice_is_refused_row_by_row(patients):
    data = HEADER + "".join(GOOD_ROWS)
    assert import_dispensing_csv(data).imported == 3
    again = import_dispensing_csv(data)
    assert not again.ok and [e.row for e in again.errors] == [2, 3, 4]
    assert "already recorded" in again.errors[0].reason
    assert DispensingRecord.objects.count() == 3


def test_a_row_repeated_inside_one_file_is_reported(patients):
    result = import_dispensing_csv(HEADER + GOOD_ROWS[0] + GOOD_ROWS[0])
    assert [(e.row, e.reason) for e in result.errors] == [
        (3, "same patient, drug, lot and dispensing time as row 2.")]


def test_a_file_that_is_not_utf8_is_refused(patients):
    result = import_dispensing_csv(HEADER.encode() + "P-1,Valsartan,caf\u00e9".encode("latin-1"))
    assert not result.ok and "not UTF-8" in result.errors[0].reason


def test_the_command_reports_every_bad_row_and_fails(patients, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + GOOD_ROWS[0] + "P-9,valsartan,,,A1,,1,2019-01-01,\n" + "P-1,valsartan,,,,,1,2019-01-01,\n")
    err = StringIO()
    with pytest.raises(CommandError, match="Nothing imported: 2 problem"):
        call_command("import_dispensing", str(bad), stderr=err)
    assert "row 3: no patient" in err.getvalue() and "row 4: lot: Lot number is missing" in err.getvalue()
    assert DispensingRecord.objects.count() == 0
    good = tmp_path / "good.csv"
    good.write_text(HEADER + "".join(GOOD_ROWS))
    out = StringIO()
    call_command("import_dispensing", str(good), stdout=out)
    assert "Imported 3 dispensing rows" in out.getvalue()
    assert DispensingRecord.objects.count() == 3


def test_the_command_explains_a_missing_file(db, tmp_path):
    with pytest.raises(CommandError, match="Can't read"):
        call_command("import_dispensing", str(tmp_path / "nope.csv"))
