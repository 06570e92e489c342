"""Facts ingested with the first identity version's word-stripped subjects are re-derived once through
normal versioning: re-ingesting the same real records versions exactly the facts whose subject or NDCs changed."""

import copy
import json
import re
import zipfile

import pytest

from drugs import ndc
from memory.models import Fact
from recalls import ingest, ingesters, record_identity
from recalls.models import RecallRecord
from recalls.services import ingest_document
from tests.paths import OPENFDA

OLD = OPENFDA / "drug-enforcement-2021-04-28.json.zip"
pytestmark = pytest.mark.django_db(transaction=True)

_SALTS = set("sodium potassium calcium magnesium hydrochloride besylate maleate mesylate succinate tartrate citrate "
             "sulfate phosphate acetate fumarate bromide chloride medoxomil".split())
_FORMS = re.compile(r"\b(tablets?|capsules?|usp|injection|oral|solution|suspension|film[- ]coated|"
                    r"extended[- ]release|er|xr|sr|hcl|rx only|mg|mcg|ml|g|for|and)\b", re.I)


def first_version_name(raw: str) -> str:
    """The first identity version's normalize_drug_name (condensed): strip strength and form words, drop
    trailing salts."""
    text = re.split(r"(?<!\d),|,(?!\d)", raw or "")[0]
    text = re.sub(r"\([^)]*\)", " ", text)
    text = re.sub(r"\d+(\.\d+)?\s*(mg|mcg|ml|g|%|iu|units?)?(/\S+)?", " ", text, flags=re.I)
    words = re.sub(r"[^a-zA-Z\s\-]", " ", _FORMS.sub(" ", text)).lower().replace("-", " ").split()
    kept = []
    for word in words:
        if not (word in _SALTS and kept and kept[-1] not in _SALTS):
            kept.append(word)
    return " ".join(kept)


def first_version_identity(record):
    names = (record.get("openfda") or {}).get("generic_name") or []
    subject = first_version_name(names[0]) if names else ""
    subject = subject or first_version_name(record.get("product_description") or "")
    return record_identity.RecallIdentity(subject, "first-version", "", "", True)


def _valid(normalise, values):
    found = set()
    for value in values or []:
        try:
            found.add(normalise(value))
        except ValueError:
            continue
    return sorted(found)


def first_version_ndcs(record, trust_openfda=True):
    openfda = record.get("openfda") or {}
    return (_valid(ndc.normalize_ndc, openfda.get("package_ndc"))
            or _valid(ndc.normalize_product_ndc, openfda.get("product_ndc")))


def test_reingesting_versions_exactly_the_facts_whose_subject_or_ndcs_changed(hashing_embeddings, monkeypatch):
    with zipfile.ZipFile(OLD) as zf:
        records = json.loads(zf.read(zf.namelist()[0]))["results"]
    wanted = {"D-1281-2019", "D-0326-2019", "D-1110-2015"}
    sartans = [r for r in records if "sartan" in r["product_description"].lower()][:40]
    picked = {r["recall_number"]: r for r in [r for r in records if r["recall_number"] in wanted] + sartans}
    document = {"meta": {}, "results": [copy.deepcopy(r) for r in picked.values()]}

    with monkeypatch.context() as patch:
        patch.setattr(ingest, "identity_of", first_version_identity)
        patch.setattr(ingest, "ndcs_of", first_version_ndcs)
        patch.setattr(ingesters, "IDENTITY_VERSION", 1)
        first = ingest_document(copy.deepcopy(document))
    assert first.quarantined == 0
    before = {f.fact_key: (f.subject, f.attributes["ndcs"], f.id) for f in Fact.objects.believed()}
    assert before["recall:D-1281-2019:lot:A1818G"][0] == "losartan tab"

    expected = set()
    for record in picked.values():
        parsed = ingest.parse_enforcement(record)
        for claim in ingest.recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs):
            subject, ndcs, _ = before[claim.fact_key]
            if (subject, ndcs) != (claim.subject, claim.attributes["ndcs"]):
                expected.add(claim.fact_key)
    assert "recall:D-1281-2019:lot:A1818G" in expected

    second = ingest_document(copy.deepcopy(document))
    after = {f.fact_key: f for f in Fact.objects.believed()}
    versioned = {key for key, fact in after.items() if fact.id != before[key][2]}
    assert versioned == expected
    assert second.new_versions == len(expected) and second.new_facts == 0
    assert after["recall:D-1281-2019:lot:A1818G"].subject == "losartan"
    assert after["recall:D-1281-2019:lot:A1818G"].version == 2
    old = Fact.objects.get(id=before["recall:D-1281-2019:lot:A1818G"][2])
    assert old.retracted_at is not None and old.superseded_by_id == after["recall:D-1281-2019:lot:A1818G"].id
    assert set(RecallRecord.objects.values_list("identity_version", flat=True)) == {record_identity.IDENTITY_VERSION}

    third = ingest_document(copy.deepcopy(document))  # derived once: nothing more to do
    assert third.new_versions == 0 and third.unchanged == len(picked)
