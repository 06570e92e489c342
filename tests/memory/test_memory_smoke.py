import pytest

from memory.fact_writes import Claim, assert_claim
from memory.models import Fact
from memory.retrieval import retrieve


def claim(key="recall:D-1:lot:A1", classification="Class II", lot="A1"):
    return Claim(fact_key=key, kind="recall", subject="valsartan", lot=lot, source="manual",
                 statement=f"{classification} recall of valsartan lot {lot}",
                 attributes={"classification": classification})


@pytest.mark.django_db(transaction=True)
def test_new_version_retracts_old_and_unchanged_writes_nothing(hashing_embeddings):
    first = assert_claim(claim())
    again = assert_claim(claim())
    second = assert_claim(claim(classification="Class I"))
    assert (first.status, again.status, second.status) == ("created", "unchanged", "versioned")
    assert hashing_embeddings.calls == 0  # a write embeds nothing: the embedding stage does, after commit
    versions = list(Fact.objects.filter(fact_key="recall:D-1:lot:A1").order_by("version"))
    assert [v.version for v in versions] == [1, 2]
    assert versions[0].retracted_at is not None and versions[0].superseded_by_id == versions[1].id
    assert versions[1].retracted_at is None
    hits = retrieve("is valsartan safe", subject="valsartan", lots=["A1"])
    assert [h.fact.id for h in hits] == [versions[1].id]
