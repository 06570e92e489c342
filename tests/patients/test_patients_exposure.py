"""Exposure: which patients a recall fact touches, by lot or (for drug-level facts) by drug."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.fact_writes import assert_claim, assert_claims, retract_claim
from patients.models import DispensingRecord
from patients.services import Match, exposed_patients, exposed_patients_for_recall
from tests.factories import make_patient, recall_claim, recall_claims_of

WHEN = datetime(2018, 10, 1, 15, tzinfo=UTC)

# Facts are written through memory.fact_writes, whose transactions must be the outermost ones.
pytestmark = pytest.mark.django_db(transaction=True)


# The recalls are REAL openFDA records as ingestion turns them into facts (tests/factories.py):
# D-0326-2019 is Mylan valsartan 160 mg (19 lots, Mylan NDCs 00378-...), D-0968-2018 is Solco
# valsartan, "All lots within expiry" (Solco NDCs 43547-...). Patients and dispensing are synthetic.
MYLAN_NDC = "0378-5814-77"  # 4-4-2, as printed on the Mylan bottle; the recall lists it as 00378-5814-77
SOLCO_NDC = "43547-367-03"


def patient(ref, region="aws-us-east-1"):
    return make_patient(ref, region=region, name=ref, phone="")


def dispense(p, lot, drug="Valsartan Tablets USP 160 mg", ndc=MYLAN_NDC, day=1):
    return DispensingRecord.objects.create(patient=p, drug=drug, lot=lot, ndc=ndc, quantity=90, synthetic=True,
                                           dispensed_at=WHEN.replace(day=day))


@pytest.fixture
def pharmacy(transactional_db):
    """Four patients: two got the recalled lot (one twice), one another lot of the same drug, one another drug."""
    exposed_a, exposed_b = patient("exposed-a"), patient("exposed-b", "aws-eu-west-1")
    other_lot, other_drug = patient("other-lot"), patient("other-drug")
    dispense(exposed_a, "Lot # 3069020", day=1)
    dispense(exposed_a, "3069020", day=2)
    dispense(exposed_b, "3069020")
    dispense(other_lot, "3095511")  # not a lot of D-0326-2019
    dispense(other_drug, "3069020", drug="Escitalopram Tablets 10 mg", ndc="")  # the same lot string, another drug
    return {"exposed": {exposed_a, exposed_b}, "other_lot": other_lot, "other_drug": other_drug}


def test_a_lot_fact_matches_exactly_the_patients_who_got_that_lot(pharmacy, hashing_embeddings):
    fact = assert_claim(recall_claim("D-0326-2019", "3069020")).fact
    exposures = exposed_patients(fact)
    assert {e.patient for e in exposures} == pharmacy["exposed"]
    assert {e.match for e in exposures} == {Match.LOT}
    by_ref = {e.patient.external_ref: e for e in exposures}
    assert [d.dispensed_at.day for d in by_ref["exposed-a"].dispensings] == [1, 2]
    assert by_ref["exposed-a"].fact == fact
    assert "lot 3069020 of valsartan" in by_ref["exposed-a"].why and "D-0326-2019" in by_ref["exposed-a"].why


def test_a_different_lot_of_the_same_drug_is_not_matched(pharmacy, hashing_embeddings):
    fact = assert_claim(recall_claim("D-0326-2019", "3069020")).fact
    refs = {e.patient.external_ref for e in exposed_patients(fact)}
    assert "other-lot" not in refs and "other-drug" not in refs


def test_a_drug_level_fact_falls_back_to_every_patient_given_the_drug(pharmacy, hashing_embeddings):
    # Solco patients on any lot, and one whose NDC was not recorded: the recall covers every lot.
    solco_a, solco_b, unknown = patient("solco-a"), patient("solco-b"), patient("ndc-unknown")
    dispense(solco_a, "ZZ-SYN-S1", ndc=SOLCO_NDC)
    dispense(solco_b, "3069020", ndc=SOLCO_NDC)
    dispense(unknown, "ZZ-SYN-S2", ndc="")
    fact = assert_claim(recall_claim("D-0968-2018")).fact
    assert fact.lot is None and fact.attributes["scope"] == "drug"
    exposures = exposed_patients(fact)
    assert {e.patient.external_ref for e in exposures} == {"solco-a", "solco-b", "ndc-unknown"}
    assert {e.match for e in exposures} == {Match.DRUG}
    assert "covers all lots" in exposures[0].why


def test_a_drug_level_fact_listing_ndcs_is_narrowed_to_its_products(pharmacy, hashing_embeddings):
    # Another maker's all-lots recall (Solco's NDCs) must not reach Mylan patients; an unknown NDC stays in.
    no_ndc = patient("no-ndc")
    dispense(no_ndc, "X1", ndc="")
    solco = assert_claim(recall_claim("D-0968-2018")).fact
    assert {e.patient.external_ref for e in exposed_patients(solco)} == {"no-ndc"}
    # No real Mylan valsartan recall covers all lots: the real D-0326-2019 with only its code_info changed
    # to say so. Its NDCs stay Mylan's, which the patients' 4-4-2 NDC must match.
    mylan = assert_claim(recall_claim("D-0326-2019", code_info="All lots within expiry.")).fact
    assert mylan.lot is None and "00378-5814-77" in mylan.attributes["ndcs"]
    assert {e.patient.external_ref for e in exposed_patients(mylan)} == {"exposed-a", "exposed-b", "other-lot",
                                                                        "no-ndc"}


def test_exposure_for_a_recall_covers_all_its_believed_facts_and_only_those(pharmacy, hashing_embeddings):
    assert_claims(recall_claims_of("D-0326-2019"))  # all 19 lots, as an ingest writes them
    on_21, on_retracted, on_other_recall = patient("lot-21"), patient("retracted"), patient("other-recall")
    dispense(on_21, "3069021")
    dispense(on_retracted, "3071354")
    dispense(on_other_recall, "3061169")  # D-0315-2019's lot
    retract_claim("recall:D-0326-2019:lot:3071354", reason="lot list amended", by="test")
    assert_claim(recall_claim("D-0315-2019", "3061169"))  # another recall: not included
    exposures = exposed_patients_for_recall("D-0326-2019")
    pairs = {(e.patient.external_ref, e.fact.subject, e.fact.lot) for e in exposures}
    assert pairs == {("exposed-a", "valsartan", "3069020"), ("exposed-b", "valsartan", "3069020"),
                     ("lot-21", "valsartan", "3069021")}
    assert all(e.fact.retracted_at is None for e in exposures)


def test_exposure_for_a_recall_costs_a_query_per_drug_not_per_lot(pharmacy, hashing_embeddings):
    assert_claims(recall_claims_of("D-0326-2019"))  # 19 lots of one drug
    with CaptureQueriesContext(connection) as queries:
        exposures = exposed_patients_for_recall("D-0326-2019")
    assert len(exposures) == 2
    assert len(queries) == 2  # the facts, then one dispensing query for valsartan's 19 lots


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
