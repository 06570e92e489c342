"""The lot field is read (drugs.lot_field) on every way a dispensing is written: the model's clean and
save, the CSV import, the admin form, and rows stored before the field was read (migration 0010).

Patients and dispensing are synthetic."""

import importlib
from datetime import UTC, date, datetime

import pytest
from django.apps import apps

from patients.csvimport import import_dispensing_csv
from patients.dispensing import save_dispensing
from patients.models import DispensingChange, DispensingRecord

WHEN = datetime(2024, 3, 1, 12, tzinfo=UTC)
HEADER = "patient_ref,drug,ndc,lot,expiry,quantity,dispensed_at\n"


def test_a_csv_lot_field_with_its_expiry_stores_the_lot_the_expiry_and_the_text(patient):
    rows = [f"{patient.external_ref},Valsartan 160 mg,0378-5814-77,{lot},{expiry},30,2024-03-0{day}\n"
            for day, lot, expiry in ((1, "3069020 EXP 05/2026", ""), (2, '"LOT# 3069020, 2026-05"', ""),
                                     (3, "3069020 EXP 05/2026", "2026-04-30"), (4, "3069020-0526", ""))]
    result = import_dispensing_csv(HEADER + "".join(rows), actor="csv")
    assert result.ok, result.errors
    stored = list(DispensingRecord.objects.order_by("dispensed_at"))
    assert [(r.lot, r.expiry) for r in stored] == [
        ("3069020", date(2026, 5, 31)), ("3069020", date(2026, 5, 31)),
        ("3069020", date(2026, 4, 30)),  # an expiry typed in its own column wins over one in the lot field
        ("30690200526", None)]  # digits that may be the lot's own end are not guessed to be an expiry
    assert stored[0].lot_text == "3069020 EXP 05/2026" and stored[0].lot_alternatives == []
    assert stored[3].lot_alternatives == ["3069020"] and "may be an expiry" in stored[3].lot_reading
    assert all(r.fingerprint == r.compute_fingerprint() for r in stored)


def test_an_expiry_read_before_the_dispensing_date_is_not_used_and_the_row_is_kept(patient):
    result = import_dispensing_csv(HEADER + f"{patient.external_ref},Valsartan,,3069020 EXP 01/2020,,30,2024-03-01\n")
    assert result.ok, result.errors
    stored = DispensingRecord.objects.get()
    assert (stored.lot, stored.expiry, stored.lot_text) == ("3069020", None, "3069020 EXP 01/2020")


def test_a_row_saved_again_is_read_again_from_what_was_entered(patient):
    record = DispensingRecord(patient=patient, drug="valsartan", lot="L: 3069020", quantity=30, dispensed_at=WHEN)
    record.full_clean()
    save_dispensing(record, actor="x")
    first = (record.lot, list(record.lot_alternatives), record.fingerprint)
    record.quantity = 60
    record.full_clean()
    save_dispensing(record, actor="x")
    stored = DispensingRecord.objects.get(pk=record.pk)
    assert (stored.lot, list(stored.lot_alternatives), stored.fingerprint) == first
    assert first[:2] == ("3069020", ["L3069020"])
    # A new lot typed over it is read afresh.
    stored.lot = "4000123 EXP 07/2027"
    stored.full_clean()
    save_dispensing(stored, actor="x")
    assert (stored.lot, stored.lot_text, stored.expiry) == ("4000123", "4000123 EXP 07/2027", date(2027, 7, 31))


def test_the_admin_form_reads_the_lot_field(admin_client, patient):
    data = {"patient": patient.pk, "scan": "", "drug": "valsartan", "product_description": "", "ndc": "0378-5814-77",
            "lot": "(01)00303785814771(17)260531(10)3069020", "expiry": "", "serial": "", "quantity": "90",
            "dispensed_at_0": "2024-03-01", "dispensed_at_1": "10:00:00", "site": ""}
    response = admin_client.post("/admin/patients/dispensingrecord/add/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    stored = DispensingRecord.objects.get()
    assert (stored.lot, stored.expiry) == ("3069020", date(2026, 5, 31))
    assert stored.lot_text.startswith("(01)")


def test_a_scan_agrees_with_a_lot_typed_with_its_expiry(admin_client, patient):
    from drugs.gs1 import gtin_for_ndc

    data = {"patient": patient.pk, "scan": f"(01){gtin_for_ndc('0378-5814-77')}(17)260531(10)3069020",
            "drug": "valsartan", "product_description": "", "ndc": "0378-5814-77", "lot": "3069020 exp 05/26",
            "expiry": "", "serial": "", "quantity": "90", "dispensed_at_0": "2024-03-01", "dispensed_at_1": "10:00:00",
            "site": ""}
    response = admin_client.post("/admin/patients/dispensingrecord/add/", data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert DispensingRecord.objects.get().lot == "3069020"


@pytest.mark.django_db
def test_stored_rows_are_read_again_and_each_change_is_audited(patient):
    """Rows stored before the field was read hold it canonical: an expiry glued on with its word comes off."""
    migration = importlib.import_module("patients.migrations.0010_lot_field_read")
    plain = DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="3069020", quantity=1,
                                            dispensed_at=WHEN)
    glued = DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="3069020EXP0526", quantity=1,
                                            dispensed_at=WHEN.replace(day=2))
    # As the rows were before: no text kept, the glued lot as it was stored.
    DispensingRecord.objects.filter(pk__in=[plain.pk, glued.pk]).update(lot_text="", lot_alternatives=[])
    DispensingRecord.objects.filter(pk=glued.pk).update(lot="3069020EXP0526", lot_near="3069020EXP0526", expiry=None)
    DispensingChange.objects.all().delete()
    migration.read_stored_lots(apps, None)
    glued.refresh_from_db()
    plain.refresh_from_db()
    assert (glued.lot, glued.expiry, glued.lot_text, glued.lot_near) == ("3069020", date(2026, 5, 31),
                                                                          "3069020EXP0526", "3069020")
    assert glued.fingerprint == glued.compute_fingerprint()
    assert (plain.lot, plain.lot_text) == ("3069020", "3069020")
    change = DispensingChange.objects.get()
    assert change.dispensing_id == glued.pk and change.actor_label == migration.RE_READ_BY
    assert change.before["lot"] == "3069020EXP0526" and change.after["lot"] == "3069020"
    migration.read_stored_lots(apps, None)  # again: nothing left to change
    assert DispensingChange.objects.count() == 1


def test_rows_refused_for_a_bad_cell_are_counted_among_the_rows_read(patient):
    bad = f"{patient.external_ref},Valsartan,,3069020\\x07,,30,2024-03-01\n".replace("\\x07", "\x07")
    good = f"{patient.external_ref},Valsartan,,3069021,,30,2024-03-02\n"
    result = import_dispensing_csv(HEADER + good + bad + "\n")
    assert (result.rows, result.imported) == (2, 0) and [e.row for e in result.errors] == [3]
