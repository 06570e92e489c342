"""Exposure: which patients a recall fact touches, by lot or (for drug-level facts) by drug."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.services import Claim, assert_claim, retract_claim
from patients.models import DispensingRecord, Patient
from patients.services import Match, exposed_patients, exposed_patients_for_recall

WHEN = datetime(2018, 10, 1, 15, tzinfo=UTC)

# Facts are written through memory.services, whose transactions must be the outermost ones.
pytestmark = pytest.mark.django_db(transaction=True)


def recall_claim(recall_number, *, lot=None, subject="valsartan", classification="Class II", ndcs=()):
    scope = "lot" if lot else "drug"
    key = f"recall:{recall_number}:lot:{lot}" if lot else f"recall:{recall_number}:drug"
    return Claim(fact_key=key, kind="recall", subject=subject, lot=lot, source="manual",
                 statement=f"{classification} recall {recall_number} of {subject} {lot or 'all lots'}",
                 attributes={"recall_number": recall_number, "classification": classification,
                             "status": "Ongoing", "scope": scope, "ndcs": list(ndcs)})


def patient(ref, region="aws-us-east-1"):
    return Patient.objects.create(external_ref=ref, display_name=ref, region=region, email=f"{ref}@example.com")


def dispense(p, lot, drug="Valsartan Tablets USP 160 mg", ndc="0378-5814-77", day=1):
    return DispensingRecord.objects.create(patient=p, drug=drug, lot=lot, ndc=ndc, quantity=90,
                                           dispensed_at=WHEN.replace(day=day))


@pytest.fixture
def pharmacy(transactional_db):
    """Four patients: two got the recalled lot (one twice), one another lot of the same drug, one another drug."""
    exposed_a, exposed_b = patient("exposed-a"), patient("exposed-b", "aws-eu-west-1")
    other_lot, other_drug = patient("other-lot"), patient("other-drug")
    dispense(exposed_a, "Lot # 3069020", day=1)
    dispense(exposed_a, "3069020", day=2)
    dispense(exposed_b, "3069020")
    dispense(other_lot, "3095511")
    dispense(other_drug, "3069020", drug="Escitalopram Tablets 10 mg", ndc="")
    return {"exposed": {exposed_a, exposed_b}, "other_lot": other_lot, "other_drug": other_drug}


def test_a_lot_fact_matches_exactly_the_patients_who_got_that_lot(pharmacy, hashing_embeddings):
    fact = assert_claim(recall_claim("D-0326-2019", lot="3069020")).fact
    exposures = exposed_patients(fact)
    assert {e.patient for e in exposures} == pharmacy["exposed"]
    assert {e.match for e in exposures} == {Match.LOT}
    by_ref = {e.patient.external_ref: e for e in exposures}
    assert [d.dispensed_at.day for d in by_ref["exposed-a"].dispensings] == [1, 2]
    assert by_ref["exposed-a"].fact == fact
    assert "lot 3069020 of valsartan" in by_ref["exposed-a"].why and "D-0326-2019" in by_ref["exposed-a"].why


def test_a_different_lot_of_the_same_drug_is_not_matched(pharmacy, hashing_embeddings):
    fact = assert_claim(recall_claim("D-0326-2019", lot="3069020")).fact
    refs = {e.patient.external_ref for e in exposed_patients(fact)}
    assert "other-lot" not in refs and "other-drug" not in refs


def test_a_drug_level_fact_falls_back_to_every_patient_given_the_drug(pharmacy, hashing_embeddings):
    fact = assert_claim(recall_claim("D-0968-2018")).fact
    exposures = exposed_patients(fact)
    assert {e.patient.external_ref for e in exposures} == {"exposed-a", "exposed-b", "other-lot"}
    assert {e.match for e in exposures} == {Match.DRUG}
    assert "covers all lots" in exposures[0].why


def test_a_drug_level_fact_listing_ndcs_is_narrowed_to_its_products(pharmacy, hashing_embeddings):
    # Another maker's all-lots recall (Solco's NDCs) must not reach Mylan patients; an unknown NDC stays in.
    no_ndc = patient("no-ndc")
    dispense(no_ndc, "X1", ndc="")
    solco = assert_claim(recall_claim("D-0968-2018", ndcs=["43547-367-03", "43547-368-09"])).fact
    assert {e.patient.external_ref for e in exposed_patients(solco)} == {"no-ndc"}
    mylan = assert_claim(recall_claim("D-9999-2019", ndcs=["0378-5814-77"])).fact  # 4-4-2, as printed
    assert {e.patient.external_ref for e in exposed_patients(mylan)} == {"exposed-a", "exposed-b", "other-lot",
                                                                        "no-ndc"}


def test_exposure_for_a_recall_covers_all_its_believed_facts_and_only_those(pharmacy, hashing_embeddings):
    assert_claim(recall_claim("D-0326-2019", lot="3069020"))
    assert_claim(recall_claim("D-0326-2019", lot="3095511"))
    assert_claim(recall_claim("D-0326-2019", lot="NOBODY1"))
    dispense(pharmacy["other_drug"], "ES2207A", drug="Escitalopram Tablets 10 mg", ndc="")
    assert_claim(recall_claim("D-0326-2019", lot="ES2207A", subject="escitalopram"))
    retract_claim("recall:D-0326-2019:lot:3095511", reason="lot list amended", by="test")
    assert_claim(recall_claim("D-1111-2019", lot="3095511"))  # another recall: not included
    exposures = exposed_patients_for_recall("D-0326-2019")
    pairs = {(e.patient.external_ref, e.fact.subject, e.fact.lot) for e in exposures}
    assert pairs == {("exposed-a", "valsartan", "3069020"), ("exposed-b", "valsartan", "3069020"),
                     ("other-drug", "escitalopram", "ES2207A")}
    assert all(e.fact.retracted_at is None for e in exposures)


def test_exposure_for_a_recall_costs_a_query_per_drug_not_per_lot(pharmacy, hashing_embeddings):
    for i in range(30):
        assert_claim(recall_claim("D-0326-2019", lot=f"L{i:03d}"))
    assert_claim(recall_claim("D-0326-2019", lot="3069020"))
    with CaptureQueriesContext(connection) as queries:
        exposures = exposed_patients_for_recall("D-0326-2019")
    assert len(exposures) == 2
    assert len(queries) == 2  # the facts, then one dispensing query for valsartan's 31 lots


def test_the_lookup_uses_the_drug_lot_index(pharmacy, hashing_embeddings):
    # 2,000 unrelated rows so the planner has a reason to prefer the index over a scan.
    other = patient("bulk")
    DispensingRecord.objects.bulk_create([
        DispensingRecord(patient=other, region=other.region, drug=f"drug{i % 50}", lot=f"B{i}", quantity=1,
                         dispensed_at=WHEN) for i in range(2000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE patients_dispensingrecord")
    plan = DispensingRecord.objects.filter(drug="valsartan", lot="3069020").explain()
    assert "dispensing_drug_lot" in plan
