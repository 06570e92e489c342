"""The embedding stage embeds each distinct text once: the lots of one record share one masked text, and a
text met again in a later batch of the same run is not sent to the model again. Every fact still carries the
embedding of its own embedding_text. The ingest itself embeds nothing (docs/adr/0017).

Real openFDA records from tests/fixtures/openfda/; the second record of the cross-chunk test is a copy of
a real one with its code_info changed (FDA publishes such records under one recall number), and says so.
"""

import copy
import json
import zipfile
from functools import lru_cache

import pytest

from memory.embeddings import VectorCache, embedding_text
from memory.models import Fact
from memory.vectors import backlog, embed_backlog
from recalls.ingest import parse_enforcement
from recalls.models import IngestRun
from recalls.services import ingest_document
from tests.paths import OPENFDA

OLD = OPENFDA / "drug-enforcement-2021-04-28.json.zip"

pytestmark = pytest.mark.django_db(transaction=True)


@lru_cache
def _records() -> tuple:
    with zipfile.ZipFile(OLD) as zf:
        return tuple(json.loads(zf.read(zf.namelist()[0]))["results"])


def _with_lots(n: int) -> list[dict]:
    """Real records, each the only one under its recall number, naming at least three lots."""
    counts: dict = {}
    for r in _records():
        counts[r["recall_number"]] = counts.get(r["recall_number"], 0) + 1
    picked = []
    for r in _records():
        if counts[r["recall_number"]] != 1:
            continue
        parsed = parse_enforcement(r)
        if parsed.scope == "lot" and len(parsed.lots) >= 3:
            picked.append(copy.deepcopy(r))
            if len(picked) == n:
                return picked
    raise AssertionError("fixture has too few records with lots")


def _assert_own_embeddings(provider):
    for fact in Fact.objects.believed():
        expected = provider.embed_one(embedding_text(fact.statement, fact.lot))
        assert max(abs(a - b) for a, b in zip(fact.embedding, expected, strict=True)) < 1e-6, fact.fact_key


def test_the_lots_of_records_cost_one_text_each_in_one_call(hashing_embeddings):
    records = _with_lots(3)
    run = ingest_document({"results": records})
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 0
    assert run.new_facts == sum(len(parse_enforcement(r).lots) for r in records) >= 9
    assert hashing_embeddings.calls == run.embedding_calls == 0 and backlog().count() == run.new_facts
    assert embed_backlog().facts == run.new_facts
    assert (hashing_embeddings.calls, hashing_embeddings.texts) == (1, 3)
    _assert_own_embeddings(hashing_embeddings)


def test_a_text_met_again_in_a_later_chunk_is_not_embedded_again(hashing_embeddings):
    first = _with_lots(1)[0]
    # Changed copy: the same recall, event and product with one more lot listed, as FDA publishes another
    # record under a used recall number. Its masked statement is the first record's.
    second = copy.deepcopy(first)
    second["code_info"] = first["code_info"] + " Lot # ZQ12345"
    run = ingest_document({"results": [first, second]})
    assert run.status == IngestRun.Status.SUCCEEDED and run.quarantined == 0
    assert run.new_facts == len(parse_enforcement(first).lots) + len(parse_enforcement(second).lots)
    report = embed_backlog(size=2)  # batches of two versions: the one text comes back batch after batch
    assert len(report.batches) >= 3 and report.facts == run.new_facts
    assert (hashing_embeddings.calls, hashing_embeddings.texts) == (1, 1)
    assert len({tuple(f.embedding) for f in Fact.objects.believed()}) == 1
    _assert_own_embeddings(hashing_embeddings)


def test_the_cache_asks_only_for_texts_it_does_not_hold_and_stays_bounded(hashing_embeddings):
    cache = VectorCache(size=2)
    a, b, c = cache.embed(hashing_embeddings, ["a", "b", "c"])
    assert (hashing_embeddings.calls, hashing_embeddings.texts, len(cache)) == (1, 3, 2)  # "a" went first
    again = cache.embed(hashing_embeddings, ["c", "b", "c"])
    assert again == [c, b, c] and hashing_embeddings.calls == 1
    assert cache.embed(hashing_embeddings, ["a"]) == [a]
    assert (hashing_embeddings.calls, hashing_embeddings.texts) == (2, 4)
