"""Shared test factories; the fixtures built on them are in tests/conftest.py.

Recall facts are built by the ingestion code itself (recalls.ingest.parse_enforcement, then
recall_claims) from REAL openFDA enforcement records in tests/fixtures/openfda/, a byte-identical copy
of the team's shared fixtures. A test that needs a shape no real record has passes `**changes`: the
real record with only those fields changed (say why at the call). Nothing here invents a recall.

Patients and dispensing are SYNTHETIC: synthetic=True, "Synthetic ..." names, example.com addresses,
the fictional +1 555 number.
"""

import copy
import functools
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from drugs.lots import printed_lot
from memory.fact_writes import assert_claim
from patients.models import DispensingRecord, Patient
from recalls.ingest import RecallClaim, parse_enforcement, recall_claims
from tests.paths import OPENFDA as FIXTURES

SNAPSHOT_2021 = FIXTURES / "drug-enforcement-2021-04-28.json.zip"
SNAPSHOT_2023 = FIXTURES / "drug-enforcement-2023-08-05-part.json.zip"
RECENT_SAMPLE = FIXTURES / "drug-enforcement-recent-sample.json"

# The sweep's world (conftest.world): real Mylan valsartan recalls, both Class II and Ongoing.
RECALL, LOT = "D-0315-2019", "3061169"
OTHER_RECALL, OTHER_LOT = "D-0324-2019", "3063780"
VALSARTAN = "Valsartan Tablets USP 40 mg"
DISPENSED_AT = datetime(2019, 1, 5, tzinfo=UTC)
SYNTHETIC_PHONE = "+15555550100"


def read_results(path: Path) -> list[dict]:
    """The `results` of an openFDA download (a .json.zip as FDA ships it, or plain .json)."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            return json.loads(archive.read(archive.namelist()[0]))["results"]
    return json.loads(path.read_text())["results"]


@functools.cache
def _by_number(path: Path) -> dict:
    found = {}
    for raw in read_results(path):
        found.setdefault(raw["recall_number"], raw)  # a snapshot's first record of a number is the ingested one
    return found


def openfda_record(recall_number: str, snapshot: Path | None = None) -> dict:
    """A copy of a real enforcement record (the 2021 snapshot, then the recent sample, then the 2023 part,
    unless `snapshot` names one). A copy: callers may change it without touching the cache."""
    for path in [snapshot] if snapshot else [SNAPSHOT_2021, RECENT_SAMPLE, SNAPSHOT_2023]:
        found = _by_number(path).get(recall_number)
        if found is not None:
            return copy.deepcopy(found)
    raise KeyError(f"{recall_number} is not in the openFDA fixtures")


def recall_claims_of(recall_number: str, **changes) -> list[RecallClaim]:
    """Every claim ingestion builds from this real record (with `changes` applied to the raw record),
    with the identity derived at first sight, as RecallIngester does for a record it has not seen."""
    parsed = parse_enforcement(dict(openfda_record(recall_number), **changes))
    return recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs)


def recall_claim(recall_number: str, lot: str | None = None, **changes) -> RecallClaim:
    """The claim ingestion builds for one lot of a real record (lot None: its drug-level claim). The
    test writes only that fact of the record, where an ingest would write all of them."""
    claims = recall_claims_of(recall_number, **changes)
    wanted = None if lot is None else printed_lot(lot)
    for claim in claims:
        if claim.lot == wanted:
            return claim
    listed = [c.lot for c in claims]
    raise LookupError(f"{recall_number} (as changed: {sorted(changes)}) does not yield a claim for lot {lot!r}; "
                      f"ingestion reads lots {listed[:10]}")


def escalate():
    """A new version of the sweep world's real record, reclassified Class I (as FDA would republish it)."""
    return assert_claim(recall_claim(RECALL, LOT, classification="Class I"), reason="escalated to Class I")


def make_patient(ref: str, dispensed=(), *, channel: str = "email", region: str = "aws-us-east-1",
                 name: str | None = None, email: str | None = None, phone: str = SYNTHETIC_PHONE,
                 dispensed_at: datetime = DISPENSED_AT, client=None, through_service: bool = False) -> Patient:
    """A synthetic patient and what they were dispensed.

    `dispensed`: (drug, lot) or (drug, lot, ndc) tuples, or dicts of DispensingRecord fields.
    `client`: an ask.models.ApiClient to attach the patient to. `through_service`: write dispensing through
    patients.dispensing.save_dispensing (change log + sweep signal) instead of a plain insert.
    `email=""` / `phone=""` leave that contact out."""
    patient = Patient.objects.create(
        region=region, display_name=name or f"Synthetic {ref}", external_ref=ref,
        email=f"{ref.lower()}@example.com" if email is None else email, phone=phone,
        preferred_channel=channel, synthetic=True)
    for item in dispensed:
        fields = dict(item) if isinstance(item, dict) else dict(zip(("drug", "lot", "ndc"), item, strict=False))
        fields.setdefault("dispensed_at", dispensed_at)
        row = DispensingRecord(patient=patient, synthetic=True, **fields)
        if through_service:
            from patients.dispensing import save_dispensing

            save_dispensing(row, actor="test")
        else:
            row.save()
    if client is not None:
        from ask.models import ClientPatient

        ClientPatient.objects.create(client=client, patient=patient)
    return patient
