"""Synthetic data: the demo scenario (a real recall, synthetic patients) and seed_patients."""

import json
import re
import zipfile
from functools import cache
from io import StringIO

import pytest
from django.core.management import call_command

from demo import patients as demo
from drugs.identity import resolve
from drugs.lots import printed_lot
from drugs.ndc import normalize_ndc
from memory.fact_writes import Claim, assert_claim
from patients.models import DispensingRecord, Patient
from patients.services import exposed_patients
from tests.paths import OPENFDA as FIXTURES


@cache
def fixture_records() -> list[dict]:
    records = []
    for name in ("drug-enforcement-2021-04-28.json.zip", "drug-enforcement-2023-08-05-part.json.zip"):
        with zipfile.ZipFile(FIXTURES / name) as archive:
            records += json.loads(archive.read(archive.namelist()[0]))["results"]
    return records


def demo_recall() -> dict:
    [record] = [r for r in fixture_records()[:12504] if r["recall_number"] == demo.DEMO_RECALL_NUMBER]
    return record


def test_the_demo_recall_is_a_real_class_ii_ongoing_lot_level_sartan_recall():
    record = demo_recall()
    assert (record["classification"], record["status"]) == ("Class II", "Ongoing")
    assert resolve(record["openfda"]["generic_name"][0]).key == demo.DEMO_DRUG == "valsartan"
    lots = {printed_lot(part) for part in re.split(r"[,\s]+", record["code_info"].split(":", 1)[1]) if part}
    assert demo.DEMO_LOT in lots
    [printed_ndc] = re.findall(r"NDC ([\d-]+\d)", record["product_description"])
    assert normalize_ndc(printed_ndc) == demo.DEMO_NDC


def test_the_neighbours_lots_appear_in_no_recall_and_the_demo_lot_in_only_one():
    text_by_recall = {r["recall_number"]: json.dumps(r) for r in fixture_records()}
    for lot in list(demo.DEMO_SAME_DRUG_OTHER_LOT.values()) + [lot for _, _, lot in demo.DEMO_OTHER_DRUG.values()]:
        assert not [n for n, text in text_by_recall.items() if lot in text], lot
    assert [n for n, text in text_by_recall.items() if demo.DEMO_LOT in text] == [demo.DEMO_RECALL_NUMBER]


@pytest.mark.django_db
def test_seed_demo_is_idempotent_and_spreads_the_exposed_over_three_regions():
    out = StringIO()
    call_command("seed_demo", stdout=out)
    call_command("seed_demo", stdout=out)
    assert "0 dispensing rows created" in out.getvalue().splitlines()[-1]
    assert Patient.objects.count() == len(demo.DEMO_PATIENT_REFS) == 17
    assert DispensingRecord.objects.count() == 17
    exposed = Patient.objects.filter(external_ref__in=demo.DEMO_EXPOSED_REFS)
    regions = sorted(exposed.values_list("region", flat=True))
    assert len(set(regions)) == 3 and all(regions.count(r) == 4 for r in set(regions))
    assert all(p.synthetic and "(synthetic)" in p.display_name for p in Patient.objects.all())
    assert set(DispensingRecord.objects.filter(lot=demo.DEMO_LOT).values_list("patient__external_ref", flat=True)) \
        == set(demo.DEMO_EXPOSED_REFS)


@pytest.mark.django_db(transaction=True)
def test_the_demo_recall_fact_exposes_exactly_the_twelve(hashing_embeddings):
    demo.seed_demo()
    lot_fact = assert_claim(Claim(
        fact_key=f"recall:{demo.DEMO_RECALL_NUMBER}:lot:{demo.DEMO_LOT}", kind="recall", subject=demo.DEMO_DRUG,
        lot=demo.DEMO_LOT, source="manual", statement="Class II recall of valsartan lot 3069020",
        attributes={"recall_number": demo.DEMO_RECALL_NUMBER, "classification": "Class II", "scope": "lot"})).fact
    assert sorted(e.patient.external_ref for e in exposed_patients(lot_fact)) == demo.DEMO_EXPOSED_REFS
    # Another maker's all-lots valsartan recall (real: D-0968-2018, Solco) reaches none of them.
    solco = next(r for r in fixture_records() if r["recall_number"] == "D-0968-2018")
    drug_fact = assert_claim(Claim(
        fact_key="recall:D-0968-2018:drug", kind="recall", subject=demo.DEMO_DRUG, source="manual",
        statement="Class II recall of Solco valsartan, all lots",
        attributes={"recall_number": "D-0968-2018", "scope": "drug", "ndcs": solco["openfda"]["package_ndc"]})).fact
    assert exposed_patients(drug_fact) == []


@pytest.mark.django_db(transaction=True)
def test_seed_patients_draws_recalled_lots_from_believed_facts(hashing_embeddings):
    assert_claim(Claim(fact_key="recall:D-0326-2019:lot:3069020", kind="recall", subject="valsartan", lot="3069020",
                       source="manual", statement="recall", attributes={"ndcs": ["0378-5814-77"]}))
    out = StringIO()
    call_command("seed_patients", "--count", "30", "--recalled-share", "1", "--seed", "7", stdout=out)
    assert "Created 30 synthetic patients" in out.getvalue()
    patients = Patient.objects.all()
    assert patients.count() == 30 and all(p.synthetic and "(synthetic)" in p.display_name for p in patients)
    assert set(patients.values_list("region", flat=True)) == {"aws-us-east-1", "aws-eu-west-1", "aws-ap-southeast-1"}
    rows = DispensingRecord.objects.all()
    assert rows.count() >= 30
    assert set(rows.values_list("drug", "lot", "ndc")) == {("valsartan", "3069020", "00378-5814-77")}
    assert all(r.synthetic and r.region == r.patient.region for r in rows.select_related("patient"))


@pytest.mark.django_db
def test_seed_patients_without_recalls_says_so_and_uses_unaffected_lots():
    out, err = StringIO(), StringIO()
    call_command("seed_patients", "--count", "5", "--seed", "1", stdout=out, stderr=err)
    assert "Ingest recalls first" in err.getvalue()
    assert all(lot.startswith("SYN") for lot in DispensingRecord.objects.values_list("lot", flat=True))
