"""A recall record's long texts are stored once per record version (recalls.models.RecallText) and every
fact of the record refers to them; facts written when the texts were inline still read, and re-ingesting
them re-versions nothing. Real records from the two bulk openFDA files in tests/fixtures/openfda/."""

import copy
import json
import zipfile
from datetime import timedelta
from functools import lru_cache
from types import SimpleNamespace

import pytest
from django.utils import timezone

from corrections.drafting import correction_text, fact_diff, letter_context
from memory.fact_writes import assert_claims
from memory.models import Fact
from memory.retrieval import beliefs_at
from recalls.ingest import TEXT_ATTRIBUTES, TEXTS_REFERENCE, RecallClaim, parse_enforcement, recall_claims
from recalls.models import RecallText
from recalls.selectors import recall_attributes, recall_texts, resolved_attributes_of, with_texts
from recalls.services import ingest_document
from tests.paths import OPENFDA as FIXTURES

BEFORE = FIXTURES / "drug-enforcement-2021-04-28.json.zip"
AFTER = FIXTURES / "drug-enforcement-2023-08-05-part.json.zip"
MOST_LOTS = "D-0644-2020"  # 616 lots, the most in real data
REWORDED = "D-0267-2021"  # the one record of both files whose reason_for_recall was reworded (and closed)

pytestmark = pytest.mark.django_db(transaction=True)


@lru_cache
def _records(path) -> tuple:
    with zipfile.ZipFile(path) as zf:
        return tuple(json.loads(zf.read(zf.namelist()[0]))["results"])


def _record(path, number) -> dict:
    found = [r for r in _records(path) if r["recall_number"] == number]
    assert len(found) == 1, (number, len(found))
    return copy.deepcopy(found[0])


def _doc(record, updated):
    return {"meta": {"last_updated": updated, "results": {"total": 1}}, "results": [copy.deepcopy(record)]}


def _believed(number):
    return list(Fact.objects.believed().defer("embedding").filter(kind="recall", attributes__recall_number=number))


def test_a_616_lot_record_stores_its_texts_once_and_every_lot_refers_to_them(hashing_embeddings):
    record = _record(BEFORE, MOST_LOTS)
    run = ingest_document(_doc(record, "2021-04-28"))
    assert run.quarantined == 0 and run.new_facts == 616
    facts = _believed(MOST_LOTS)
    assert len(facts) == 616
    assert RecallText.objects.count() == 1
    text = RecallText.objects.get()
    assert text.reason == record["reason_for_recall"].strip()
    for fact in facts:
        assert fact.attributes[TEXTS_REFERENCE] == text.digest
        assert not set(TEXT_ATTRIBUTES) & set(fact.attributes)  # the long texts are not copied into the fact
        assert fact.attributes["classification"] and fact.attributes["lot_scope"]  # short fields stay
    resolved = recall_texts(facts)
    assert {t["reason"] for t in resolved.values()} == {text.reason}
    # The statement still quotes the reason (at most 400 characters of it), as before.
    assert text.reason[:60] in facts[0].statement


def test_facts_written_with_inline_texts_reingest_as_a_no_op_and_still_read(hashing_embeddings):
    """A database ingested before the texts were stored once: its facts carry them inline. The same file
    again writes no version, no fact, no text row; readers read the inline texts."""
    record = _record(BEFORE, "D-0326-2019")  # valsartan, 19 lots
    parsed = parse_enforcement(copy.deepcopy(record))
    legacy = []
    for claim in recall_claims(parsed, subject=parsed.subject, ndcs=parsed.ndcs):
        inline = {k: v for k, v in claim.attributes.items() if k != TEXTS_REFERENCE}
        inline.update(claim.texts)  # as every fact was written before: the texts in the attributes
        legacy.append(RecallClaim(fact_key=claim.fact_key, kind=claim.kind, subject=claim.subject, lot=claim.lot,
                                  statement=claim.statement, source=claim.source, attributes=inline,
                                  valid_from=claim.valid_from, valid_to=claim.valid_to))
    assert all(r.status == "created" for r in assert_claims(legacy))
    assert RecallText.objects.count() == 0
    facts_before = Fact.objects.count()
    assert all("reason" in f.attributes for f in _believed(record["recall_number"]))

    run = ingest_document(_doc(record, "2021-04-28"))
    assert run.quarantined == 0
    assert (run.new_facts, run.new_versions, run.retracted) == (0, 0, 0)
    assert Fact.objects.count() == facts_before and RecallText.objects.count() == 0

    facts = _believed(record["recall_number"])
    assert {t["reason"] for t in recall_texts(facts).values()} == {record["reason_for_recall"].strip()}
    assert recall_attributes(facts[0])["firm"] == record["recalling_firm"].strip()
    assert with_texts(facts)[0] is facts[0]  # inline texts need no copy


def test_a_reworded_reason_is_a_new_text_row_and_new_versions_whose_letter_quotes_it(hashing_embeddings):
    before, after = _record(BEFORE, REWORDED), _record(AFTER, REWORDED)
    assert before["reason_for_recall"].strip() != after["reason_for_recall"].strip()
    ingest_document(_doc(before, "2021-04-28"))
    old_facts = {f.fact_key: f for f in _believed(REWORDED)}
    assert old_facts and RecallText.objects.count() == 1
    between = timezone.now()

    run = ingest_document(_doc(after, "2023-08-05"))
    assert run.quarantined == 0 and run.new_versions == len(old_facts)
    assert RecallText.objects.count() == 2
    new_facts = {f.fact_key: f for f in _believed(REWORDED)}
    assert set(new_facts) == set(old_facts)
    new_reason = after["reason_for_recall"].strip()
    old_reason = before["reason_for_recall"].strip()
    for key, new in new_facts.items():
        old = Fact.objects.defer("embedding").get(pk=old_facts[key].pk)
        assert old.superseded_by_id == new.pk
        assert old.attributes[TEXTS_REFERENCE] != new.attributes[TEXTS_REFERENCE]
        assert recall_attributes(new)["reason"] == new_reason
        assert recall_attributes(old)["reason"] == old_reason  # the old version keeps the words believed then
        diff = {row["field"]: row for row in fact_diff(old, new)}
        assert diff["reason"]["before"] == old_reason and diff["reason"]["after"] == new_reason

    # A letter about the change quotes the new reason.
    key, new = next(iter(new_facts.items()))
    patient = SimpleNamespace(display_name="Synthetic Patient", preferred_language="en", preferred_channel="email")
    outcome = SimpleNamespace(verdict="caution", subject=new.subject)
    context = letter_context(patient, "caution", new, kind="correction", previous=old_facts[key],
                             old_verdict="caution")
    assert context["reason_quoted"] == new_reason
    letter = correction_text(patient, "caution", outcome, new, old_facts[key], channel="email")
    assert new_reason[:50] in " ".join(letter.split())

    # What did we believe about this lot at a time between the two ingests? The old reason.
    believed_then = list(beliefs_at(between, fact_key=key))
    assert len(believed_then) == 1 and recall_attributes(believed_then[0])["reason"] == old_reason
    believed_now = list(beliefs_at(timezone.now() + timedelta(seconds=1), fact_key=key))
    assert recall_attributes(believed_now[0])["reason"] == new_reason


def test_resolving_a_page_of_facts_is_one_query_and_none_once_read(hashing_embeddings, django_assert_num_queries):
    ingest_document(_doc(_record(BEFORE, MOST_LOTS), "2021-04-28"))
    facts = _believed(MOST_LOTS)
    from recalls import selectors

    selectors._cache.clear()
    with django_assert_num_queries(1):
        assert len(recall_texts(facts)) == 616
    with django_assert_num_queries(0):
        assert all(a["reason"] for a in resolved_attributes_of(f.attributes for f in facts))
