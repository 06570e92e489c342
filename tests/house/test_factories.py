"""tests/factories.py: the recall claims tests write are the facts an ingest writes, field for field."""

import pytest

from memory.models import Fact
from recalls.models import IngestRun
from recalls.services import ingest_document
from tests.factories import LOT, RECALL, openfda_record, recall_claim, recall_claims_of

pytestmark = pytest.mark.django_db(transaction=True)


# A one-lot record, a 19-lot record, a drug-level record and one whose NDCs come from its text only.
@pytest.mark.parametrize("number", [RECALL, "D-0326-2019", "D-0968-2018", "D-1281-2019"])
def test_a_factory_claim_is_the_fact_ingestion_writes(hashing_embeddings, no_auto_sweep, number):
    run = ingest_document({"results": [openfda_record(number)]})
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 0
    written = {f.fact_key: f for f in Fact.objects.believed().filter(fact_key__startswith=f"recall:{number}:")}
    claims = recall_claims_of(number)

    assert set(written) == {c.fact_key for c in claims}
    for claim in claims:
        fact = written[claim.fact_key]
        assert (fact.kind, fact.subject, fact.lot, fact.statement, fact.source) == (
            claim.kind, claim.subject, claim.lot, claim.statement, claim.source)
        assert (fact.attributes, fact.content_hash) == (claim.attributes, claim.content_hash())
        assert (fact.valid_from, fact.valid_to) == (claim.valid_from, claim.valid_to)


def test_changes_apply_to_the_raw_record_and_a_lot_it_does_not_list_is_refused():
    escalated = recall_claim(RECALL, LOT, classification="Class I")
    assert escalated.attributes["classification"] == "Class I"
    assert escalated.statement.startswith(f"Class I recall {RECALL} (Ongoing) of ")
    assert recall_claim(RECALL, LOT).content_hash() != escalated.content_hash()
    with pytest.raises(LookupError, match="does not yield a claim for lot 'ZZ-NOT-LISTED'"):
        recall_claim(RECALL, "ZZ-NOT-LISTED")
    with pytest.raises(LookupError):
        recall_claim(RECALL)  # a lot-level record has no drug-level claim
    assert openfda_record(RECALL) is not openfda_record(RECALL)  # copies: a test's edits stay its own
