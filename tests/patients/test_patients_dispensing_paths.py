"""Every dispensing write path goes through patients.dispensing: an audit row per change, and
`dispensing_changed` sent once per transaction, after commit (never before, never per row).

Paths: the admin dispensing form (add, change, delete, delete selected), the inline rows of the
patient form, the CSV import (admin upload and command), seed_demo and seed_patients. No product code
writes dispensing rows around patients.dispensing; a CSV row gets every derived column save() gives;
a long real product name is kept (long generic names: test_long_generic_names.py).
"""

import re
from datetime import UTC, datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from core.audit_chain import SealAfterCommit
from patients.dispensing import create_dispensings, dispensing_changed, save_dispensing
from patients.models import DispensingChange, DispensingRecord, Patient
from tests.paths import PROJECT_DIR

WHEN = datetime(2019, 1, 2, 15, tzinfo=UTC)


@pytest.fixture
def announced():
    """Each `dispensing_changed` send, as its list of (patient_id, drug)."""
    calls = []

    def receiver(sender, changes, **kwargs):
        calls.append(list(changes))

    dispensing_changed.connect(receiver)
    yield calls
    dispensing_changed.disconnect(receiver)


def row(patient, lot, drug="valsartan", day=2):
    record = DispensingRecord(patient=patient, drug=drug, lot=lot, quantity=30, dispensed_at=WHEN.replace(day=day))
    record.full_clean()
    record.save()  # setup only, not a path under test
    return record


def split(callbacks):
    """(the audit chain's seals, the dispensing announcements) among a transaction's on-commit callbacks:
    the changes' events are sealed into the audit chain once, and the change announced once."""
    seals = [c for c in callbacks if isinstance(c, SealAfterCommit)]
    return seals, [c for c in callbacks if not isinstance(c, SealAfterCommit)]


def audit():
    return list(DispensingChange.objects.order_by("id").values_list("action", "actor_label", "dispensing_id"))


def admin_form(patient, **fields):
    data = {"patient": patient.pk, "scan": "", "drug": "valsartan", "product_description": "", "ndc": "",
            "lot": "3069020", "expiry": "", "serial": "", "quantity": "90", "dispensed_at_0": "2019-03-01",
            "dispensed_at_1": "10:00:00", "site": ""}
    data.update(fields)
    return data


def test_the_admin_add_form_audits_and_announces_once_after_commit(admin_client, admin_user, patient, announced,
                                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post("/admin/patients/dispensingrecord/add/", admin_form(patient))
    assert response.status_code == 302
    created = DispensingRecord.objects.get()
    assert audit() == [("created", admin_user.username, created.pk)]
    assert announced == []  # not before commit
    seals, announcements = split(callbacks)
    assert len(seals) == 1 and len(announcements) == 1
    announcements[0]()
    assert announced == [[(patient.pk, "valsartan")]]


def test_the_admin_change_form_records_before_and_after(admin_client, admin_user, patient, announced,
                                                         django_capture_on_commit_callbacks):
    record = row(patient, "3069021", drug="losartan")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(f"/admin/patients/dispensingrecord/{record.pk}/change/",
                                     admin_form(patient, lot="3069020"))
    assert response.status_code == 302
    change = DispensingChange.objects.get()
    assert (change.action, change.before["lot"], change.after["lot"]) == ("updated", "3069021", "3069020")
    assert (change.before["drug"], change.after["drug"]) == ("losartan", "valsartan")
    # The old drug and the new one: decisions about either may rest on this row.
    assert announced == [[(patient.pk, "losartan"), (patient.pk, "valsartan")]]


def test_the_admin_delete_page_audits_and_announces(admin_client, admin_user, patient, announced,
                                                     django_capture_on_commit_callbacks):
    record = row(patient, "3069021")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(f"/admin/patients/dispensingrecord/{record.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not DispensingRecord.objects.exists()
    assert audit() == [("deleted", admin_user.username, record.pk)]
    assert DispensingChange.objects.get().before["lot"] == "3069021"
    assert announced == [[(patient.pk, "valsartan")]]


def test_delete_selected_is_one_transaction_and_one_announcement(admin_client, admin_user, patient, announced,
                                                                  django_capture_on_commit_callbacks):
    first, second = row(patient, "A1"), row(patient, "A2", drug="losartan", day=3)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = admin_client.post("/admin/patients/dispensingrecord/", {
            "action": "delete_selected", "_selected_action": [first.pk, second.pk], "post": "yes"})
    assert response.status_code == 302 and not DispensingRecord.objects.exists()
    assert sorted(audit()) == sorted([("deleted", admin_user.username, first.pk),
                                      ("deleted", admin_user.username, second.pk)])
    assert [len(kind) for kind in split(callbacks)] == [1, 1]
    assert announced == [[(patient.pk, "losartan"), (patient.pk, "valsartan")]]


def inline_post(patient, forms, initial):
    data = {"display_name": patient.display_name, "external_ref": patient.external_ref, "region": patient.region,
            "preferred_channel": patient.preferred_channel, "email": patient.email, "phone": "",
            "dispensings-TOTAL_FORMS": str(len(forms)), "dispensings-INITIAL_FORMS": str(initial),
            "dispensings-MIN_NUM_FORMS": "0", "dispensings-MAX_NUM_FORMS": "1000"}
    for i, values in enumerate(forms):
        base = {"scan": "", "drug": "", "product_description": "", "ndc": "", "lot": "", "expiry": "", "serial": "",
                "quantity": "30", "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00", "site": "",
                "patient": str(patient.pk)}
        base.update(values)
        data.update({f"dispensings-{i}-{k}": v for k, v in base.items()})
    return data


def test_inline_rows_add_edit_and_delete_in_one_transaction(admin_client, admin_user, patient, announced,
                                                             django_capture_on_commit_callbacks):
    edited, deleted = row(patient, "E1", drug="losartan"), row(patient, "D1", drug="metformin", day=3)
    forms = [
        {"id": str(edited.pk), "drug": "losartan", "lot": "E2", "dispensed_at_0": "2019-01-02",
         "dispensed_at_1": "15:00:00"},
        {"id": str(deleted.pk), "drug": "metformin", "lot": "D1", "DELETE": "on"},
        {"drug": "valsartan", "lot": "N1"},
        {"drug": "Escitalopram 10 mg", "lot": "N2", "dispensed_at_0": "2019-03-02"},
    ]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/", inline_post(patient, forms, 2))
    assert response.status_code == 302, response.context and response.context["inline_admin_formsets"][0].formset.errors
    actions = sorted(a for a, _, _ in audit())
    assert actions == ["created", "created", "deleted", "updated"]
    assert {actor for _, actor, _ in audit()} == {admin_user.username}
    assert DispensingChange.objects.get(action="updated").after["lot"] == "E2"
    seals, announcements = split(callbacks)
    assert announced == [] and len(seals) == 1 and len(announcements) == 1
    announcements[0]()
    assert announced == [[(patient.pk, "escitalopram"), (patient.pk, "losartan"), (patient.pk, "metformin"),
                          (patient.pk, "valsartan")]]


def test_the_admin_csv_upload_audits_every_row_and_announces_once(admin_client, admin_user, patient, announced,
                                                                   django_capture_on_commit_callbacks):
    upload = SimpleUploadedFile("d.csv", b"patient_ref,drug,lot,quantity,dispensed_at\n"
                                         b"P-1,valsartan,B2,30,2019-02-01\nP-1,losartan,B3,30,2019-02-02\n")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = admin_client.post("/admin/patients/dispensingrecord/import/", {"file": upload})
    assert response.status_code == 302
    assert [(a, actor) for a, actor, _ in audit()] == [("created", f"{admin_user.username} (csv)")] * 2
    assert [len(kind) for kind in split(callbacks)] == [1, 1]
    assert announced == [[(patient.pk, "losartan"), (patient.pk, "valsartan")]]


def test_a_refused_csv_writes_no_audit_and_announces_nothing(patient, announced, tmp_path,
                                                             django_capture_on_commit_callbacks):
    bad = tmp_path / "bad.csv"
    bad.write_text("patient_ref,drug,lot,quantity,dispensed_at\nP-1,valsartan,B2,30,2019-02-01\nP-9,x,B3,1,2019-02-01\n")
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(CommandError):
        call_command("import_dispensing", str(bad))
    assert audit() == [] and callbacks == [] and announced == []


def test_the_import_command_audits_as_csv(patient, announced, tmp_path, django_capture_on_commit_callbacks):
    good = tmp_path / "good.csv"
    good.write_text("patient_ref,drug,lot,quantity,dispensed_at\nP-1,valsartan,B2,30,2019-02-01\n")
    with django_capture_on_commit_callbacks(execute=True):
        call_command("import_dispensing", str(good), stdout=open("/dev/null", "w"))
    assert [(a, actor) for a, actor, _ in audit()] == [("created", "csv")]
    assert announced == [[(patient.pk, "valsartan")]]


def test_seed_demo_writes_through_the_service_once_and_is_idempotent(db, announced, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        call_command("seed_demo", stdout=open("/dev/null", "w"))
    rows = DispensingRecord.objects.count()
    assert rows == 17 and DispensingChange.objects.filter(action="created", actor_label="seed_demo").count() == rows
    assert all(r.fingerprint for r in DispensingRecord.objects.all())
    assert [len(kind) for kind in split(callbacks)] == [1, 1] and len(announced) == 1 and len(announced[0]) == 17
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", stdout=open("/dev/null", "w"))
    assert DispensingRecord.objects.count() == rows and DispensingChange.objects.count() == rows
    assert len(announced) == 1  # the second run changed nothing, so it announces nothing


def test_seed_patients_writes_through_the_service(db, announced, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        call_command("seed_patients", "--count", "5", "--seed", "1", stdout=open("/dev/null", "w"),
                     stderr=open("/dev/null", "w"))
    rows = DispensingRecord.objects.count()
    assert rows >= 5 and DispensingChange.objects.filter(actor_label="seed_patients").count() == rows
    assert [len(kind) for kind in split(callbacks)] == [1, 1] and len(announced) == 1


def test_bulk_creation_writes_what_one_by_one_saving_writes(patient, announced, django_capture_on_commit_callbacks):
    def new(lot):
        record = DispensingRecord(patient=patient, drug="Valsartan 160 mg", ndc="0378-5814-77", lot=f"lot # {lot}",
                                  serial="S1", quantity=30, dispensed_at=WHEN)
        record.full_clean()
        return record

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        one = save_dispensing(new("a1"), actor="x")
        bulk = create_dispensings([new("a2"), new("a3")], actor="x")
    assert [len(kind) for kind in split(callbacks)] == [1, 1] and announced == [[(patient.pk, "valsartan")]]
    audits = {c.dispensing_id: c for c in DispensingChange.objects.all()}
    assert {pk for pk in audits} == {one.pk, bulk[0].pk, bulk[1].pk}
    for record in (one, *bulk):
        stored = DispensingRecord.objects.get(pk=record.pk)
        assert stored.fingerprint == stored.compute_fingerprint() and stored.region == patient.region
        change = audits[record.pk]
        assert (change.action, change.actor_label, change.before) == ("created", "x", {})
        per_lot = {"lot", "lot_text"}  # the lot as read and as entered differ row by row
        assert {k: v for k, v in change.after.items() if k not in per_lot} == \
            {k: v for k, v in audits[one.pk].after.items() if k not in per_lot}
    with pytest.raises(ValueError, match="new rows only"):
        create_dispensings([one], actor="x")


def test_a_new_patient_with_inline_rows_gets_them_homed_and_audited(admin_client, db, announced,
                                                                      django_capture_on_commit_callbacks):
    data = {"display_name": "Bea (synthetic)", "external_ref": "P-2", "region": "aws-eu-west-1",
            "preferred_channel": "email", "email": "bea@example.com", "phone": "",
            "dispensings-TOTAL_FORMS": "1", "dispensings-INITIAL_FORMS": "0", "dispensings-MIN_NUM_FORMS": "0",
            "dispensings-MAX_NUM_FORMS": "1000", "dispensings-0-drug": "valsartan", "dispensings-0-lot": "3069020",
            "dispensings-0-quantity": "30", "dispensings-0-dispensed_at_0": "2019-03-01",
            "dispensings-0-dispensed_at_1": "10:00:00"}
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post("/admin/patients/patient/add/", data)
    assert response.status_code == 302
    new = Patient.objects.get(external_ref="P-2")
    stored = DispensingRecord.objects.get(patient=new)
    assert (stored.region, stored.lot, bool(stored.fingerprint)) == ("aws-eu-west-1", "3069020", True)
    assert DispensingChange.objects.get().region == "aws-eu-west-1"
    assert announced == [[(new.pk, "valsartan")]]


# --- one write path, every derived column, long names ---------------------------------------------

WRITE_CALL = re.compile(r"DispensingRecord\.objects\.(create|bulk_create|bulk_update|update|update_or_create|"
                        r"get_or_create)\b|\.dispensings\.(create|bulk_create|update)\b|"
                        r"DispensingRecord\.objects\.filter\([^)]*\)\.update\(")
# Rehoming a patient's rows with the patient (patients.models.Patient.save) changes no dispensing field
# a decision reads; everything else writes through patients.dispensing.
WRITE_ALLOWED = {"patients/dispensing.py", "patients/models.py"}


def test_no_product_code_writes_dispensing_rows_around_the_service():
    root = PROJECT_DIR
    offenders = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).as_posix()
        if relative.split("/")[0] in (".venv", "tests", "bench", "var") or "/migrations/" in relative:
            continue
        if relative in WRITE_ALLOWED:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if WRITE_CALL.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


def test_a_csv_row_is_stored_with_every_derived_column_as_save_stores_it(patient):
    from patients.csvimport import import_dispensing_csv

    result = import_dispensing_csv("patient_ref,drug,ndc,lot,quantity,dispensed_at\n"
                                   "P-1,LOSART POT 50MG TAB,13668-409-30,lot# 4l67-c035,30,2019-01-02\n")
    assert result.ok, [str(e) for e in result.errors]
    imported = DispensingRecord.objects.get()
    saved = save_dispensing(DispensingRecord(patient=patient, drug="LOSART POT 50MG TAB", ndc="13668-409-30",
                                             lot="lot# 4l67-c035", quantity=30, dispensed_at=WHEN.replace(day=3)),
                            actor="x")
    for name in ("drug", "drug_text", "drug_source", "ndc", "ndc_product", "lot", "lot_near", "region"):
        assert getattr(imported, name) == getattr(saved, name), name
    assert (imported.ndc_product, imported.lot) == ("13668-0409", "4L67C035")
    assert imported.fingerprint == imported.compute_fingerprint()


LONG_NAME = ("CLINIMIX E 5/15 sulfite-free (5% Amino Acid with Electrolytes in 15% Dextrose with Calcium) Injection, "
             "1000 mL Injection Port Chamber 30% Dextrose Injection with Calcium, 1000 mL Outlet Port Chamber 10% "
             "Amino Acid Injection with Electrolytes, 2000 mL CLARITY Dual Chamber Container bag, Rx only, Baxter "
             "Healthcare Corporation, Deerfield, IL  60015, Product Code 2B7721, NDC 0338-1123-04.")  # D-0864-2016


@pytest.mark.parametrize("field", ["drug", "product_description"])
def test_the_admin_form_keeps_a_long_real_product_name(admin_client, patient, field):
    assert len(LONG_NAME) > 300
    response = admin_client.post("/admin/patients/dispensingrecord/add/",
                                 admin_form(patient, **{"drug": "", field: LONG_NAME, "ndc": "0338-1123-04"}))
    assert response.status_code == 302
    row = DispensingRecord.objects.get()
    assert LONG_NAME in (row.drug_text, row.product_description) and row.drug


def test_inline_rows_keep_a_long_real_product_name_and_derive_the_package(admin_client, patient):
    forms = [{"drug": LONG_NAME, "ndc": "0338-1123-04", "lot": "Lot #: P333930"}]
    response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/", inline_post(patient, forms, 0))
    assert response.status_code == 302, response.context and response.context["inline_admin_formsets"][0].formset.errors
    row = DispensingRecord.objects.get()
    assert row.drug_text == LONG_NAME and row.drug
    assert (row.ndc_product, row.lot) == ("00338-1123", "P333930") and row.lot_near


def test_the_admin_search_finds_a_row_by_the_name_as_typed_also_when_no_vocabulary_knows_it(admin_client, patient):
    typed = row(patient, "4L67C035", drug="LOSART POT 50MG TAB")
    other = row(patient, "3069020", drug="valsartan", day=3)
    for term, expected in (("LOSART POT 50MG TAB", typed), ("Valsartan 160 mg", other), ("4l67-c035", typed)):
        response = admin_client.get("/admin/patients/dispensingrecord/", {"q": term})
        assert [r.pk for r in response.context["cl"].result_list] == [expected.pk], term
