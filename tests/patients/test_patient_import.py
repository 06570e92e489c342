"""Patients registered from a CSV (patients.patient_import): in the admin, with `manage.py import_patients`, and
by the patient columns of a dispensing file. All rows or none, every bad row reported with its spreadsheet row
number, validated as the patient form validates (phone to E.164, a channel needs its address), the admin's record
of each addition by the user who imported. A dispensing file registers a patient it names and carries, and never
changes a registered one. Patients and dispensing are synthetic."""

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from patients import csvfile
from patients.csvimport import import_dispensing_csv
from patients.models import DispensingChange, DispensingRecord, Patient
from patients.patient_import import LOGGED_AS, import_patients_csv
from tests.factories import make_patient

pytestmark = pytest.mark.django_db

HEADER = "external_ref,display_name,region,preferred_channel,preferred_language,email,phone\n"
ADA = "SYN-PI-1,Ada Synthetic (synthetic),aws-us-east-1,email,en,ada@example.com,\n"
BEA = "SYN-PI-2,Bea Synthetic (synthetic),aws-eu-west-1,SMS,Español,,(555) 555-0100\n"


@pytest.fixture
def staff(people):
    people["staff"].is_staff = True
    people["staff"].save()
    return people["staff"]


def errors_of(result):
    return [(error.row, error.reason) for error in result.errors]


def additions():
    return sorted(LogEntry.objects.filter(action_flag=ADDITION).values_list("object_repr", "user__username",
                                                                            "change_message"))


def test_a_good_file_registers_every_patient_normalised_and_records_who_added_them(staff):
    result = import_patients_csv((HEADER + ADA + BEA).encode("utf-8-sig"), user=staff, synthetic=True)
    assert result.ok and result.imported == 2, errors_of(result)
    ada, bea = Patient.objects.get(external_ref="SYN-PI-1"), Patient.objects.get(external_ref="SYN-PI-2")
    assert (ada.region, ada.preferred_channel, ada.preferred_language, ada.email) == (
        "aws-us-east-1", "email", "en", "ada@example.com")
    assert (bea.region, bea.preferred_channel, bea.preferred_language, bea.phone) == (
        "aws-eu-west-1", "sms", "es", "+15555550100")  # a label and any case read as the choice; E.164
    assert ada.synthetic and bea.synthetic
    assert additions() == [(str(ada), "sam", LOGGED_AS), (str(bea), "sam", LOGGED_AS)]
    assert {entry.object_id for entry in LogEntry.objects.all()} == {str(ada.pk), str(bea.pk)}


def test_a_file_with_bad_rows_registers_nobody_and_names_every_bad_row(staff):
    make_patient("SYN-PI-9")
    text = HEADER + ADA + (
        "SYN-PI-3,,aws-us-east-1,email,en,c@example.com,\n"                  # row 3: no name
        "SYN-PI-4,Dee Synthetic,mars-1,email,en,d@example.com,\n"            # row 4: unknown region
        "SYN-PI-5,Eve Synthetic,aws-us-east-1,sms,en,e@example.com,\n"       # row 5: SMS without a phone
        "SYN-PI-6,Fay Synthetic,aws-us-east-1,fax,xx,f@example.com,\n"       # row 6: no such channel, language
        "SYN-PI-7,Gus Synthetic,aws-us-east-1,email,en,not-an-address,\n"    # row 7: bad email
        "SYN-PI-8,Hal Synthetic,aws-us-east-1,sms,en,,+1 555 555 0100\n"     # row 8: fictional number, real patient
        "SYN-PI-1,Ada Again,aws-us-east-1,email,en,a2@example.com,\n"        # row 9: external_ref of row 2
        "SYN-PI-9,Ida Synthetic,aws-us-east-1,email,en,i@example.com,\n"     # row 10: already registered
        "SYN-PI-10,Jo \u202eSynthetic,aws-us-east-1,email,en,j@example.com,\n"  # row 11: text-direction control
        "SYN-PI-11,Kai Synthetic,aws-us-east-1,email,en,k@example.com,123\n"   # row 12: not a whole number
    )
    before = Patient.objects.count()
    result = import_patients_csv(text, user=staff)
    assert not result.ok and result.imported == 0
    assert Patient.objects.count() == before and not LogEntry.objects.exists()
    by_row = {}
    for row, reason in errors_of(result):
        by_row.setdefault(row, []).append(reason)
    assert sorted(by_row) == list(range(3, 13))
    assert by_row[3] == ["display_name: This field cannot be blank."]
    assert by_row[4][0].startswith("region: Unknown region 'mars-1'")
    assert by_row[5] == ["phone: Preferred channel is SMS, so a phone number is required."]
    assert by_row[6] == ["preferred_channel 'fax' is not one of email, sms.",
                         "preferred_language 'xx' is not one of en, es."]
    assert by_row[7] == ["email: Enter a valid email address."]
    assert "not an assigned phone number" in by_row[8][0]
    assert by_row[9] == ["external_ref SYN-PI-1 is also on row 2."]
    assert by_row[10][0].startswith("patient SYN-PI-9 is already registered")
    assert "text-direction control" in by_row[11][0] and by_row[11][0].startswith("display_name: ")
    assert by_row[12][0].startswith("phone: '123' is not a complete phone number")


@pytest.mark.parametrize(("text", "expected"), [
    ("external_ref,display_name\nX,Y\n", (1, "missing column(s) region; the header must name external_ref, "
                                             "display_name, region (and may name preferred_channel, "
                                             "preferred_language, email, phone).")),
    (HEADER.replace("phone", "email"), (1, "column(s) named twice: email.")),
    (HEADER, (0, "The file has no patient rows.")),
    (b"external_ref\xff", (0, "The file is not UTF-8 text (invalid start byte at byte 12).")),
    (HEADER + "SYN-PI-1,Ada,aws-us-east-1,email,en,a@example.com,,extra\n",
     (2, "more cells than header columns (a stray comma?).")),
    (HEADER + "SYN-PI-1," + "A" * 201 + ",aws-us-east-1,email,en,a@example.com,\n",
     (2, "display_name: 201 characters; at most 200.")),
])
def test_the_file_is_read_by_the_rules_of_every_import(staff, text, expected):
    result = import_patients_csv(text, user=staff)
    assert errors_of(result) == [expected] and not Patient.objects.exists()


def test_the_size_and_row_limits_hold(staff, monkeypatch):
    monkeypatch.setattr(csvfile, "MAX_ROWS", 2)
    rows = "".join(f"SYN-PI-{i},Synthetic {i},aws-us-east-1,email,en,s{i}@example.com,\n" for i in range(3))
    assert errors_of(import_patients_csv(HEADER + rows, user=staff)) == [(4, "more than 2 rows; split the file.")]
    monkeypatch.setattr(csvfile, "MAX_IMPORT_BYTES", 100)
    assert errors_of(import_patients_csv(HEADER + rows, user=staff))[0][1].startswith("The file is larger than")
    assert not Patient.objects.exists()


def test_only_a_user_who_may_add_patients_registers_them(django_user_model):
    nobody = django_user_model.objects.create_user("nobody")
    with pytest.raises(PermissionDenied):
        import_patients_csv(HEADER + ADA, user=nobody)
    assert not Patient.objects.exists()


# --- the admin page and the command ----------------------------------------------------------------------------

def test_the_admin_page_imports_a_file_as_the_user_and_lists_the_problems_of_a_bad_one(client, staff):
    client.force_login(staff)
    assert "/admin/patients/patient/import/" in client.get("/admin/patients/patient/").content.decode()
    bad = client.post("/admin/patients/patient/import/",
                      {"file": SimpleUploadedFile("p.csv", (HEADER + ADA + ADA).encode())})
    assert bad.status_code == 400 and "external_ref SYN-PI-1 is also on row 2." in bad.content.decode()
    assert not Patient.objects.exists()
    good = client.post("/admin/patients/patient/import/",
                       {"file": SimpleUploadedFile("p.csv", (HEADER + ADA).encode())})
    assert good.status_code == 302 and good["Location"] == "/admin/patients/patient/"
    patient = Patient.objects.get()
    assert not patient.synthetic  # an import registers real patients; these are labelled synthetic by name
    assert additions() == [(str(patient), "sam", LOGGED_AS)]
    history = client.get(f"/admin/patients/patient/{patient.pk}/history/").content.decode()
    assert LOGGED_AS in history and "sam" in history


def test_the_admin_page_is_for_those_who_may_add_patients(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("viewer", is_staff=True))
    assert client.get("/admin/patients/patient/import/").status_code == 403


def test_the_command_registers_as_the_named_user(staff, tmp_path, capsys):
    path = tmp_path / "patients.csv"
    path.write_text(HEADER + ADA)
    call_command("import_patients", str(path), "--by", "sam")
    assert "Registered 1 patients" in capsys.readouterr().out
    assert additions() == [(str(Patient.objects.get()), "sam", LOGGED_AS)]
    with pytest.raises(CommandError, match="Nothing imported: 1 problem"):
        call_command("import_patients", str(path), "--by", "sam")  # already registered
    assert "row 2: patient SYN-PI-1 is already registered" in capsys.readouterr().err
    with pytest.raises(CommandError, match="No active user 'nobody'"):
        call_command("import_patients", str(path), "--by", "nobody")
    assert Patient.objects.count() == 1


# --- patient columns in a dispensing file -----------------------------------------------------------------------

DISPENSING = "patient_ref,drug,lot,quantity,dispensed_at,display_name,region,preferred_channel,email,phone\n"


def test_a_dispensing_file_registers_the_patient_its_rows_carry(staff):
    text = DISPENSING + (
        "SYN-PI-1,valsartan,3069020,30,2019-01-02,Ada Synthetic (synthetic),aws-eu-west-1,email,ada@example.com,\n"
        "SYN-PI-1,losartan,4L67C035,30,2019-02-02,,,,,\n")  # the same patient: details once are enough
    result = import_dispensing_csv(text, user=staff, actor="sam (csv)", synthetic=True)
    assert result.ok, errors_of(result)
    patient = Patient.objects.get()
    assert (patient.display_name, patient.region, patient.email) == ("Ada Synthetic (synthetic)", "aws-eu-west-1",
                                                                     "ada@example.com")
    assert result.patients == [patient]
    rows = list(DispensingRecord.objects.order_by("dispensed_at"))
    assert [(r.patient_id, r.region, r.drug) for r in rows] == [(patient.pk, "aws-eu-west-1", "valsartan"),
                                                                 (patient.pk, "aws-eu-west-1", "losartan")]
    assert all(r.fingerprint == r.compute_fingerprint() for r in rows)  # made with the patient's id
    assert DispensingChange.objects.filter(patient=patient, action="created").count() == 2
    assert additions() == [(str(patient), "sam", LOGGED_AS)]


def test_a_dispensing_file_never_changes_a_registered_patient(staff):
    ada = make_patient("SYN-PI-1", name="Ada Synthetic", email="ada@example.com", phone="+15555550100")
    agrees = DISPENSING + "SYN-PI-1,valsartan,3069020,30,2019-01-02,ada  synthetic,aws-us-east-1,EMAIL," \
                          "ADA@example.com,(555) 555-0100\n"
    assert import_dispensing_csv(agrees, user=staff).ok  # case, spacing and the phone's format agree
    differs = DISPENSING + "SYN-PI-1,losartan,4L67C035,30,2019-02-02,Ada Other,aws-eu-west-1,,,\n"
    result = import_dispensing_csv(differs, user=staff)
    assert [row for row, _ in errors_of(result)] == [2, 2]
    assert all("never changes a registered patient" in reason for _, reason in errors_of(result))
    assert [reason.split(" ")[0] for _, reason in errors_of(result)] == ["display_name", "region"]
    ada.refresh_from_db()
    assert (ada.display_name, ada.region) == ("Ada Synthetic", "aws-us-east-1")
    assert DispensingRecord.objects.count() == 1 and not LogEntry.objects.exists()


def test_a_new_patients_details_must_hold_together_and_pass_the_patient_checks(staff):
    text = DISPENSING + (
        "SYN-PI-1,valsartan,3069020,30,2019-01-02,Ada Synthetic,aws-us-east-1,email,ada@example.com,\n"
        "SYN-PI-1,losartan,4L67C035,30,2019-02-02,Ada Other,,,,\n"                 # row 3: disagrees with row 2
        "SYN-PI-2,valsartan,3069020,30,2019-01-02,Bea Synthetic,aws-us-east-1,sms,,\n"  # row 4: SMS, no phone
        "SYN-PI-3,valsartan,3069020,30,2019-01-02,,,,,\n")                          # row 5: nothing to register
    result = import_dispensing_csv(text, user=staff)
    assert errors_of(result) == [
        (3, "display_name differs from row 2's for the new patient SYN-PI-1: one patient, one set of details."),
        (4, "new patient SYN-PI-2: phone: Preferred channel is SMS, so a phone number is required."),
        (5, "no patient with external reference 'SYN-PI-3'; register the patient first (or give display_name, "
            "region and a contact in the file's patient columns)."),
    ]
    assert not Patient.objects.exists() and not DispensingRecord.objects.exists()


def test_a_dispensing_file_that_registers_patients_needs_someone_who_may(django_user_model):
    text = DISPENSING + "SYN-PI-1,valsartan,3069020,30,2019-01-02,Ada Synthetic,aws-us-east-1,email,a@example.com,\n"
    assert errors_of(import_dispensing_csv(text)) == [
        (0, "The file registers 1 new patient(s) (SYN-PI-1): name who registers them (import it in the admin, or "
            "with --by USERNAME).")]
    nobody = django_user_model.objects.create_user("nobody")
    assert "nobody may not add patients" in errors_of(import_dispensing_csv(text, user=nobody))[0][1]
    assert not Patient.objects.exists() and not DispensingRecord.objects.exists()


def test_the_dispensing_admin_page_and_command_register_as_their_user(client, staff, tmp_path, capsys):
    client.force_login(staff)
    text = DISPENSING + "SYN-PI-1,valsartan,3069020,30,2019-01-02,Ada Synthetic,aws-us-east-1,email,a@example.com,\n"
    response = client.post("/admin/patients/dispensingrecord/import/",
                           {"file": SimpleUploadedFile("d.csv", text.encode())}, follow=True)
    assert "Imported 1 dispensing rows and registered 1 new patients." in response.content.decode()
    path = tmp_path / "d.csv"
    path.write_text(text.replace("SYN-PI-1", "SYN-PI-2"))
    with pytest.raises(CommandError):
        call_command("import_dispensing", str(path), "--no-progress")  # no --by: nobody to register the patient
    assert "name who registers them" in capsys.readouterr().err
    call_command("import_dispensing", str(path), "--no-progress", "--by", "sam")
    assert "registered 1 new patients" in capsys.readouterr().out
    assert [user for _, user, _ in additions()] == ["sam", "sam"]
    assert set(Patient.objects.values_list("external_ref", flat=True)) == {"SYN-PI-1", "SYN-PI-2"}
