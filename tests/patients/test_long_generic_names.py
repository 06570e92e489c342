"""A dispensing named by a long real generic name is kept on every entry path (admin form, CSV, API, FHIR).

Parenteral nutrition products name twenty ingredients: the generic name openFDA gives Clinimix E (recall
D-1159-2014, real) resolves to a 231-character identity key, more than DispensingRecord.drug (and a
decision's subject) holds. As recall ingestion does for a fact's subject, the row then takes its product
text as identity (drug_source "product-text") and keeps the name as entered in drug_text: it is never
refused for its length, its key fits the (drug, lot) index, and the holder of the recalled lot is exposed.
Patients and dispensing are synthetic.
"""

import csv
import io
import json
from datetime import UTC, datetime

import pytest

from ask.keys import issue_key
from ask.models import ApiClient, ClientPatient
from drugs.identity import PRODUCT_SOURCE, resolve
from drugs.matching import MatchClass
from memory.fact_writes import assert_claim
from patients.csvimport import import_dispensing_csv
from patients.models import DRUG_KEY_MAX, DispensingChange, DispensingRecord, Patient, dispensing_identity
from patients.services import exposed_patients_for_recall
from tests.factories import openfda_record, recall_claims_of

pytestmark = pytest.mark.django_db(transaction=True)

RECALL = "D-1159-2014"  # Clinimix E 4.25/10, Class I, lot P275883, NDC 0338-1115-04
LOT, NDC = "P275883", "0338-1115-04"
DISPENSED = datetime(2013, 6, 3, 12, tzinfo=UTC)
PATHS = ["admin", "csv", "api", "fhir"]


def generic_name() -> str:
    """The longest-keyed of the record's openfda.generic_name values (the real text, as FDA lists it)."""
    names = openfda_record(RECALL)["openfda"]["generic_name"]
    return max(names, key=lambda name: len(resolve(name).key))


def description() -> str:
    return openfda_record(RECALL)["product_description"]


@pytest.fixture
def pharmacy(db):
    client = ApiClient.objects.create(name="Synthetic pharmacy")
    patient = Patient.objects.create(region="aws-us-east-1", display_name="Synthetic PN patient",
                                     external_ref="SYN-PN-1", email="syn-pn-1@example.com",
                                     preferred_channel="email", synthetic=True)
    ClientPatient.objects.create(client=client, patient=patient)
    return {"patient": patient, "key": issue_key(client)[1]}


def _post(client, path, body, secret, content_type="application/json"):
    return client.post(f"/api/v1{path}", data=json.dumps(body), content_type=content_type,
                       headers={"Authorization": f"Bearer {secret}"})


def dispense(path, *, drug, product, ndc, admin_client, client, pharmacy):
    patient = pharmacy["patient"]
    if path == "admin":
        response = admin_client.post("/admin/patients/dispensingrecord/add/", {
            "patient": patient.pk, "scan": "", "drug": drug, "product_description": product, "ndc": ndc,
            "lot": LOT, "expiry": "", "serial": "", "quantity": "1", "dispensed_at_0": "2013-06-03",
            "dispensed_at_1": "12:00:00", "site": ""})
        assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    elif path == "csv":
        out = io.StringIO()
        csv.writer(out).writerows([["patient_ref", "drug", "product_description", "ndc", "lot", "quantity",
                                    "dispensed_at"], [patient.external_ref, drug, product, ndc, LOT, "1",
                                                      "2013-06-03"]])
        result = import_dispensing_csv(out.getvalue(), actor="test (csv)")
        assert result.ok, [str(e) for e in result.errors]
    elif path == "api":
        response = _post(client, "/dispensing", {"patient": patient.external_ref, "drug": drug,
                                                 "product_description": product, "ndc": ndc, "lot": LOT,
                                                 "quantity": 1, "dispensed_at": DISPENSED.isoformat()},
                         pharmacy["key"])
        assert response.status_code == 201, response.content
    else:  # FHIR carries one product text, Medication.code.text
        coding = [{"system": "http://hl7.org/fhir/sid/ndc", "code": ndc}] if ndc else []
        response = _post(client, "/fhir/MedicationDispense", {
            "resourceType": "MedicationDispense", "status": "completed",
            "contained": [{"resourceType": "Medication", "id": "med1", "code": {"coding": coding, "text": drug},
                           "batch": {"lotNumber": LOT}}],
            "medicationReference": {"reference": "#med1"}, "subject": {"reference": f"Patient/{patient.external_ref}"},
            "quantity": {"value": 1}, "whenHandedOver": DISPENSED.isoformat()}, pharmacy["key"],
            "application/fhir+json")
        assert response.status_code == 201, response.content
    return DispensingRecord.objects.get(patient=patient)


def test_the_real_generic_name_is_longer_as_a_key_than_a_row_holds():
    name = generic_name()
    assert len(resolve(name).key) > DRUG_KEY_MAX and resolve(name).key.count("+") + 1 >= 20


@pytest.mark.parametrize("path", PATHS)
def test_a_long_generic_name_is_kept_on_every_path_with_its_product_text_as_identity(
        path, admin_client, client, pharmacy):
    name = generic_name()
    row = dispense(path, drug=name, product="", ndc=NDC, admin_client=admin_client, client=client,
                   pharmacy=pharmacy)
    assert row.drug_text == name  # the name as entered, in full
    assert (row.drug, row.drug_source) == dispensing_identity(name)
    assert row.drug_source == PRODUCT_SOURCE and row.drug.startswith("product:") and len(row.drug) <= DRUG_KEY_MAX
    assert (row.ndc_product, row.lot) == ("00338-1115", LOT)
    assert DispensingChange.objects.filter(dispensing_id=row.pk, action="created").count() == 1
    # Saving it again changes nothing: the bounded key is stable (resolve_dispensing would find no change).
    before = (row.drug, row.drug_text, row.drug_source, row.fingerprint)
    row.save()
    row.refresh_from_db()
    assert (row.drug, row.drug_text, row.drug_source, row.fingerprint) == before


@pytest.mark.parametrize("path", PATHS)
def test_the_holder_of_the_recalled_lot_is_exposed_by_package_and_lot(path, admin_client, client, pharmacy,
                                                                      hashing_embeddings, settings):
    settings.UNSAY_SWEEP_ON_SUPERSESSION = False
    dispense(path, drug=generic_name(), product="", ndc=NDC, admin_client=admin_client, client=client,
             pharmacy=pharmacy)
    for claim in recall_claims_of(RECALL):
        assert_claim(claim)
    found = [e for e in exposed_patients_for_recall(RECALL) if e.patient.pk == pharmacy["patient"].pk]
    assert [e.match_class for e in found] == [MatchClass.CONFIRMED]


def test_without_an_ndc_the_product_text_and_the_exact_lot_still_find_the_holder(admin_client, client, pharmacy,
                                                                                 hashing_embeddings, settings):
    """The product description names the product as the recall's own description does: the texts agree,
    and with the exact lot that is a probable match, shown to the pharmacist with its rule."""
    settings.UNSAY_SWEEP_ON_SUPERSESSION = False
    row = dispense("csv", drug=generic_name(), product=description(), ndc="", admin_client=admin_client,
                   client=client, pharmacy=pharmacy)
    assert row.drug.startswith("product:clinimix")  # the description, which names the product, is the key
    for claim in recall_claims_of(RECALL):
        assert_claim(claim)
    found = [e for e in exposed_patients_for_recall(RECALL) if e.patient.pk == pharmacy["patient"].pk]
    assert [e.match_class for e in found] == [MatchClass.PROBABLE] and found[0].rule


def test_a_short_generic_name_keeps_its_ingredients_as_identity():
    assert dispensing_identity("Valsartan Tablets USP 160 mg") == ("valsartan", resolve("valsartan").source)
