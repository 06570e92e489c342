"""Who may open which patients page: anonymous, pharmacy staff, pharmacist, superuser (and a staff
account in no group), for every admin page and view the patients app adds. Enforced server-side."""

from datetime import UTC, datetime

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile

from core.roles import PHARMACIST, PHARMACY_STAFF, sync_group_permissions
from memory.fact_writes import Claim, assert_claim
from patients.models import DispensingRecord, Patient
from tests.factories import make_patient
from unsay_site.models import User

ROLES = ["anonymous", "outsider", "staff", "pharmacist", "superuser"]
LOGIN = "/admin/login/"


@pytest.fixture
def records(db):
    # The groups come from a data migration; a transactional test elsewhere may have flushed them.
    sync_group_permissions(django_apps)
    patient = make_patient("P-1", [{"drug": "valsartan", "lot": "3069020", "quantity": 90}], name="Ada (synthetic)",
                           email="ada@example.com", phone="", dispensed_at=datetime(2019, 1, 2, tzinfo=UTC))
    return patient, patient.dispensings.get()


def login_as(client, role):
    if role == "anonymous":
        return None
    user = User.objects.create_user(role, password="pw", is_staff=True, is_superuser=role == "superuser")
    group = {"staff": PHARMACY_STAFF, "pharmacist": PHARMACIST}.get(role)
    if group:
        user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return user


def status_of(response):
    if response.status_code == 302 and response["Location"].startswith(LOGIN):
        return "login"
    return response.status_code


OPEN_TO_PHARMACY = {"anonymous": "login", "outsider": 403, "staff": 200, "pharmacist": 200, "superuser": 200}
PHARMACIST_ONLY = {"anonymous": "login", "outsider": 403, "staff": 403, "pharmacist": 200, "superuser": 200}
SUPERUSER_ONLY = {"anonymous": "login", "outsider": 403, "staff": 403, "pharmacist": 403, "superuser": 200}

PAGES = [
    ("/admin/patients/patient/", OPEN_TO_PHARMACY),
    ("/admin/patients/patient/?q=Ada", OPEN_TO_PHARMACY),
    ("/admin/patients/patient/add/", OPEN_TO_PHARMACY),
    ("/admin/patients/patient/{patient}/change/", OPEN_TO_PHARMACY),
    ("/admin/patients/patient/{patient}/delete/", SUPERUSER_ONLY),
    ("/admin/patients/dispensingrecord/", OPEN_TO_PHARMACY),
    ("/admin/patients/dispensingrecord/?q=3069020", OPEN_TO_PHARMACY),
    ("/admin/patients/dispensingrecord/add/", OPEN_TO_PHARMACY),
    ("/admin/patients/dispensingrecord/{row}/change/", OPEN_TO_PHARMACY),
    ("/admin/patients/dispensingrecord/{row}/delete/", SUPERUSER_ONLY),
    ("/admin/patients/dispensingrecord/import/", OPEN_TO_PHARMACY),
    ("/admin/autocomplete/?app_label=patients&model_name=dispensingrecord&field_name=patient&term=Ada",
     OPEN_TO_PHARMACY),
    ("/patients/exposure/?recall=D-0326-2019", PHARMACIST_ONLY),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("url, expected", PAGES, ids=[p[0] for p in PAGES])
def test_role_matrix_for_every_page(client, records, role, url, expected):
    patient, row = records
    login_as(client, role)
    response = client.get(url.format(patient=patient.pk, row=row.pk))
    assert status_of(response) == expected[role]


@pytest.mark.parametrize("role, expected", [("anonymous", "login"), ("outsider", 403), ("staff", 302),
                                            ("pharmacist", 302), ("superuser", 302)])
def test_role_matrix_for_posting_an_import(client, records, role, expected):
    login_as(client, role)
    upload = SimpleUploadedFile("d.csv", b"patient_ref,drug,lot,quantity,dispensed_at\n"
                                         b"P-1,valsartan,B2,30,2019-02-01\n")
    response = client.post("/admin/patients/dispensingrecord/import/", {"file": upload})
    assert status_of(response) == expected
    assert DispensingRecord.objects.filter(lot="B2").exists() == (expected == 302)


@pytest.mark.parametrize("role, expected", [("anonymous", "login"), ("outsider", 403), ("staff", 302),
                                            ("pharmacist", 302), ("superuser", 302)])
def test_role_matrix_for_registering_dispensing(client, records, role, expected):
    patient, _ = records
    login_as(client, role)
    response = client.post("/admin/patients/dispensingrecord/add/", {
        "patient": patient.pk, "drug": "Valsartan", "ndc": "0378-5814-77", "lot": "Lot # 3069021",
        "quantity": "30", "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00"})
    assert status_of(response) == expected
    assert DispensingRecord.objects.filter(lot="3069021", ndc="00378-5814-77").exists() == (expected == 302)


@pytest.mark.parametrize("role, expected", [("staff", 403), ("pharmacist", 403), ("superuser", 302)])
def test_only_a_superuser_deletes_dispensing(client, records, role, expected):
    _, row = records
    login_as(client, role)
    response = client.post(f"/admin/patients/dispensingrecord/{row.pk}/delete/", {"post": "yes"})
    assert response.status_code == expected
    assert DispensingRecord.objects.filter(pk=row.pk).exists() == (expected != 302)


def test_staff_see_why_a_dispensing_is_refused(client, records):
    patient, _ = records
    login_as(client, "staff")
    response = client.post("/admin/patients/dispensingrecord/add/", {
        "patient": patient.pk, "drug": "Valsartan", "ndc": "12345", "lot": "", "quantity": "30",
        "dispensed_at_0": "2999-01-01", "dispensed_at_1": "10:00:00"})
    assert response.status_code == 200
    page = response.content.decode()
    for reason in ("Bad NDC", "Lot number is missing", "Dispensed in the future"):
        assert reason in page
    assert DispensingRecord.objects.count() == 1


def test_staff_see_every_bad_row_of_a_refused_import(client, records):
    login_as(client, "staff")
    upload = SimpleUploadedFile("d.csv", b"patient_ref,drug,lot,quantity,dispensed_at\n"
                                         b"P-1,valsartan,B2,30,2019-02-01\nP-9,valsartan,B3,30,2019-02-01\n"
                                         b"P-1,valsartan,,30,2019-02-01\n")
    response = client.post("/admin/patients/dispensingrecord/import/", {"file": upload})
    assert response.status_code == 400
    errors = [(e.row, e.reason[:20]) for e in response.context["result"].errors]
    assert errors == [(3, "no patient with exte"), (4, "lot: Lot number is m")]
    assert "Nothing was imported" in response.content.decode()
    assert DispensingRecord.objects.count() == 1


def test_the_patient_page_shows_dispensing_inline(client, records):
    patient, row = records
    login_as(client, "staff")
    response = client.get(f"/admin/patients/patient/{patient.pk}/change/")
    assert response.status_code == 200
    inline = response.context["inline_admin_formsets"][0]
    assert [form.original for form in inline if form.original] == [row]


@pytest.mark.django_db(transaction=True)
def test_the_exposure_page_lists_exposed_patients_for_a_pharmacist(client, records, hashing_embeddings):
    patient, row = records
    DispensingRecord.objects.create(patient=patient, drug="valsartan", lot="3095511", quantity=30,
                                    dispensed_at=datetime(2019, 2, 2, tzinfo=UTC))
    assert_claim(Claim(fact_key="recall:D-0326-2019:lot:3069020", kind="recall", subject="valsartan", lot="3069020",
                       source="manual", statement="Class II recall D-0326-2019 of valsartan lot 3069020",
                       attributes={"recall_number": "D-0326-2019", "scope": "lot"}))
    login_as(client, "pharmacist")
    response = client.get("/patients/exposure/?recall=d-0326-2019")
    assert response.status_code == 200
    assert response.context["patient_count"] == 1
    [exposure] = response.context["exposures"]
    assert (exposure.patient, exposure.dispensings) == (patient, [row])
    assert "received lot 3069020 of valsartan, which D-0326-2019 names" in response.content.decode()
    # The dispensing has no NDC: ingredients and lot, not a confirmed product match.
    assert "Probable (lot and product or ingredients agree, not confirmed)" in response.content.decode()


def inline_post(patient, **row):
    data = {"display_name": patient.display_name, "external_ref": patient.external_ref, "region": patient.region,
            "preferred_channel": "email", "email": patient.email, "phone": "",
            "dispensings-TOTAL_FORMS": "1", "dispensings-INITIAL_FORMS": "0",
            "dispensings-MIN_NUM_FORMS": "0", "dispensings-MAX_NUM_FORMS": "1000"}
    data.update({f"dispensings-0-{k}": v for k, v in row.items()})
    return data


def test_staff_register_dispensing_inline_on_the_patient_page(client, records):
    patient, _ = records
    login_as(client, "staff")
    url = f"/admin/patients/patient/{patient.pk}/change/"
    row = {"drug": "Valsartan", "ndc": "0378-5814-7", "lot": "3069022", "quantity": "30",
           "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00"}
    refused = client.post(url, inline_post(patient, **row))
    assert refused.status_code == 200 and "Bad NDC" in refused.content.decode()
    accepted = client.post(url, inline_post(patient, **{**row, "ndc": "0378-5814-77"}))
    assert accepted.status_code == 302
    assert patient.dispensings.filter(lot="3069022", ndc="00378-5814-77", region="aws-us-east-1").exists()


@pytest.mark.parametrize("term", ["lot # 3069020", "P-1", "Valsartan Tablets USP 160 mg", "0378-5814-77"])
def test_dispensing_search_matches_normalised_values(client, records, term):
    patient, row = records
    row.ndc = "00378-5814-77"
    row.save()
    other = Patient.objects.create(external_ref="P-2", display_name="Bo", region="aws-eu-west-1")
    DispensingRecord.objects.create(patient=other, drug="escitalopram", lot="ES2207A", quantity=1,
                                    dispensed_at=datetime(2019, 1, 2, tzinfo=UTC))
    login_as(client, "staff")
    response = client.get("/admin/patients/dispensingrecord/", {"q": term})
    assert list(response.context["cl"].result_list) == [row]


def test_zero_quantity_is_refused_and_not_prefilled(client, records):
    patient, _ = records
    login_as(client, "staff")
    assert 'name="quantity" value="0"' not in client.get("/admin/patients/dispensingrecord/add/").content.decode()
    response = client.post("/admin/patients/dispensingrecord/add/", {
        "patient": patient.pk, "drug": "Valsartan", "ndc": "0378-5814-77", "lot": "3069021", "quantity": "0",
        "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00"})
    assert response.status_code == 200 and "Quantity must be at least 1." in response.content.decode()
    assert DispensingRecord.objects.count() == 1


def test_registering_a_lot_under_an_active_recall_warns_staff(transactional_db, client, records, hashing_embeddings):
    """Found trying the demo: a Class I recalled lot was dispensed and saved without a word."""
    patient, _ = records
    # The real D-0326-2019 recall's lot 3069019 (Mylan valsartan), as ingestion would write it.
    assert_claim(Claim(fact_key="recall:D-0326-2019:lot:3069019", kind="recall", subject="valsartan",
                       lot="3069019", source="openfda:enforcement", statement="Class I recall D-0326-2019 lot 3069019",
                       attributes={"recall_number": "D-0326-2019", "classification": "Class I", "status": "Ongoing",
                                   "scope": "lot", "ndcs": ["0378-5814-77"]}))
    login_as(client, "staff")
    form = {"patient": patient.pk, "drug": "Valsartan", "ndc": "0378-5814-77", "quantity": "30",
            "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00"}
    response = client.post("/admin/patients/dispensingrecord/add/", dict(form, lot="3069019"), follow=True)
    page = response.content.decode()
    assert "under an active recall" in page and "Class I recall D-0326-2019 (Ongoing) covers lot 3069019" in page
    response = client.post("/admin/patients/dispensingrecord/add/", dict(form, lot="3069099"), follow=True)
    assert "under an active recall" not in response.content.decode()  # another lot: saved quietly
    assert DispensingRecord.objects.filter(lot__in=["3069019", "3069099"]).count() == 2


def test_an_over_long_ndc_gets_the_ndc_explanation_not_a_length_error(client, records):
    patient, _ = records
    login_as(client, "staff")
    response = client.post("/admin/patients/dispensingrecord/add/", {
        "patient": patient.pk, "drug": "Valsartan", "ndc": "00378-5814-77-1", "lot": "3069021", "quantity": "30",
        "dispensed_at_0": "2019-03-01", "dispensed_at_1": "10:00:00"})
    page = response.content.decode()
    assert response.status_code == 200 and "Bad NDC" in page and "at most 13 characters" not in page
