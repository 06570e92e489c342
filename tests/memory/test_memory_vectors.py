"""The embedding stage (memory.vectors, docs/adr/0017): facts are written and believed without a vector; the
stage embeds the backlog (believed versions with no vector, a query) in batches, one provider call per batch
over its distinct texts, resumable after a crash, idempotent; a vector landing changes no belief and makes no
answer stale; the one in-place update of a fact's row it adds is refused for anything but NULL -> vector.
Real openFDA recall records (tests/factories.py); synthetic patients."""

import pytest
from django.db import IntegrityError, connection, transaction

from ask.services import ask
from corrections.sweep import staleness
from memory import vectors
from memory.embeddings import HashingEmbedding, embedding_text, reset_provider
from memory.fact_writes import Claim, assert_claim, assert_claims
from memory.models import Decision, Fact
from memory.retrieval import fill, retrieve
from memory.signals import facts_changed
from tests.factories import LOT, RECALL, VALSARTAN, make_patient, recall_claim, recall_claims_of

pytestmark = pytest.mark.django_db(transaction=True)


def note(key, statement, lot=None):
    return Claim(fact_key=key, kind="note", subject="synthetic", statement=statement, source="manual", lot=lot)


def test_a_written_fact_is_believed_with_no_vector_and_is_the_backlog(hashing_embeddings):
    claims = recall_claims_of(RECALL) + recall_claims_of("D-0326-2019")  # real records, four lots between them
    results = assert_claims(claims)
    assert len(results) == len(claims) >= 2 and all(r.status == "created" for r in results)
    assert hashing_embeddings.calls == 0
    written = Fact.objects.filter(id__in=[r.fact.id for r in results])
    assert all(f.embedding is None and f.is_believed for f in written)
    assert set(vectors.backlog().values_list("id", flat=True)) == {r.fact.id for r in results}
    now = vectors.progress()
    assert (now.believed, now.without_vector, now.with_vector, now.percent) == (len(claims), len(claims), 0, 0)


def test_one_call_per_batch_over_its_distinct_texts_and_each_fact_gets_its_own_texts_vector(hashing_embeddings):
    # Three keys share one masked text (the lot is not embedded), a fourth has its own.
    assert_claims([note(f"note:lot:{lot}", f"recall of pills lot {lot} by Firm: particles", lot=lot)
                   for lot in ("A1", "B2", "C3")] + [note("note:other", "something else entirely")])
    report = vectors.embed_backlog()
    assert (report.facts, report.calls, report.texts) == (4, 1, 2)
    assert (hashing_embeddings.calls, hashing_embeddings.texts) == (1, 2)
    for fact in Fact.objects.all():
        expected = hashing_embeddings.embed_one(embedding_text(fact.statement, fact.lot))
        assert max(abs(a - b) for a, b in zip(fact.embedding, expected, strict=True)) < 1e-6
    assert vectors.progress().percent == 100 and not vectors.backlog().exists()


def test_batches_of_a_given_size_and_a_text_met_again_is_not_sent_again(hashing_embeddings):
    assert_claims([note(f"note:{n}", f"statement {n % 3}") for n in range(10)])
    report = vectors.embed_backlog(size=4)
    assert report.batches == [4, 4, 2] and report.facts == 10
    assert (hashing_embeddings.calls, hashing_embeddings.texts) == (1, 3)  # later batches' texts were cached


def test_a_crash_mid_backlog_loses_nothing_and_the_next_run_picks_up_the_rest(hashing_embeddings, monkeypatch):
    assert_claims([note(f"note:{n}", f"statement {n}") for n in range(9)])
    real, written = vectors._write_vectors, []

    def crash_on_second_batch(ids, vecs):
        if written:
            raise RuntimeError("worker killed between embedding and writing")
        written.append(ids)
        return real(ids, vecs)

    monkeypatch.setattr(vectors, "_write_vectors", crash_on_second_batch)
    with pytest.raises(RuntimeError, match="worker killed"):
        vectors.embed_backlog(size=3)
    assert vectors.backlog().count() == 6  # the first batch landed; the second never did
    monkeypatch.setattr(vectors, "_write_vectors", real)
    report = vectors.embed_backlog(size=3)
    assert report.facts == 6 and not vectors.backlog().exists()
    assert set(vectors.backlog().values_list("id", flat=True)) == set()
    assert Fact.objects.filter(embedding__isnull=True).count() == 0


def test_embedding_twice_writes_nothing_the_second_time_and_never_replaces_a_vector(hashing_embeddings):
    fact = assert_claim(note("note:once", "one statement")).fact
    assert vectors.embed_backlog().facts == 1
    first = list(Fact.objects.get(pk=fact.pk).embedding)
    calls = hashing_embeddings.calls
    assert vectors.embed_backlog().facts == 0 and hashing_embeddings.calls == calls
    # A second embedder that read the same batch before the first one's vectors landed writes nothing.
    assert vectors._write_vectors([fact.pk], ["[" + ",".join(["0.5"] * 4 + ["0"] * 380) + "]"]) == 0
    assert list(Fact.objects.get(pk=fact.pk).embedding) == first


def test_a_vector_landing_announces_nothing_and_makes_no_answer_stale(hashing_embeddings):
    assert_claim(recall_claim(RECALL, LOT))
    patients = [make_patient(f"SYN-VEC{n}", [(VALSARTAN, lot)]) for n, lot in enumerate([LOT, "3095511"])]
    decisions = [ask(p, "Is my valsartan safe? I feel dizzy") for p in patients]
    read_before = {d.id: sorted(d.reads.values_list("fact_id", "fact_version")) for d in decisions}
    assert staleness.all_stale_ids() == []
    sent = []
    facts_changed.connect(lambda sender, pairs, **kw: sent.append(pairs), weak=False, dispatch_uid="test.vectors")
    try:
        assert vectors.embed_backlog().facts >= 1
    finally:
        facts_changed.disconnect(dispatch_uid="test.vectors")
    assert sent == []  # no belief changed: nothing re-decides
    assert staleness.all_stale_ids() == [] and not staleness.any_stale()
    assert sorted(Decision.objects.standing().values_list("id", flat=True)) == sorted(d.id for d in decisions)
    for d in decisions:
        assert sorted(d.reads.values_list("fact_id", "fact_version")) == read_before[d.id]


CONTENT = {"fact_key": "'other'", "version": "2", "kind": "'label'", "subject": "'other'", "lot": "'Z9'",
           "statement": "'changed'", "attributes": "'{\"a\": 1}'::jsonb", "content_hash": "'x'", "source": "'x'",
           "source_ref": "'x'", "valid_from": "now()", "valid_to": "now() + interval '9 days'",
           "asserted_at": "now() + interval '1 second'", "asserted_by": "'someone'"}


@pytest.mark.parametrize("column", sorted(CONTENT))
def test_an_update_of_any_content_column_is_refused(column, hashing_embeddings):
    fact = assert_claim(note("note:guard", "the statement", lot="L1")).fact
    with pytest.raises(IntegrityError, match="never updated in place"), transaction.atomic(), \
            connection.cursor() as cursor:
        cursor.execute(f"UPDATE memory_fact SET {column} = {CONTENT[column]} WHERE id = %s", [fact.pk])
    assert Fact.objects.get(pk=fact.pk).statement == "the statement"


def test_only_the_vector_from_null_and_the_belief_interval_may_change_in_place(hashing_embeddings):
    fact = assert_claim(note("note:guard", "the statement")).fact
    vectors.embed_backlog()
    other = "[" + ",".join(["1"] + ["0"] * 383) + "]"
    with pytest.raises(IntegrityError, match="written once"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE memory_fact SET embedding = %s::vector WHERE id = %s", [other, fact.pk])
    with pytest.raises(IntegrityError, match="written once"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE memory_fact SET embedding = NULL WHERE id = %s", [fact.pk])
    # Closing the belief and re-deriving scopes stay allowed (retract_claim, the scope migrations).
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_fact SET scopes = ARRAY['drug:x|*'] WHERE id = %s", [fact.pk])
    from memory.fact_writes import retract_claim

    assert retract_claim("note:guard", reason="withdrawn").retracted_at is not None


def test_a_fact_without_a_vector_is_found_by_its_words_then_by_its_vector(hashing_embeddings):
    question = "particles floating in my dextrose bag"
    target = assert_claim(note("note:dextrose", "Dextrose injection recalled: visible particles floating")).fact
    assert_claim(note("note:other", "Metformin tablets recalled for NDMA above the limit"))
    hits = retrieve(question, k=1)
    assert [(h.fact.id, h.match) for h in hits] == [(target.id, "text")]
    assert [h.fact.id for h in fill(question, 1, route="backfill")] == [target.id]
    assert fill(question, 1, route="vector") == []  # no vector yet: the vector route alone would miss it
    vectors.embed_backlog()
    assert fill(question, 1, route="backfill", vector=hashing_embeddings.embed_one(question))[0].match == "semantic"
    assert retrieve(question, k=1)[0].fact.id == target.id
    with pytest.raises(ValueError, match="unknown retrieval route"):
        fill(question, 1, route="guess")


def test_the_stage_refuses_a_provider_the_vector_column_cannot_hold(monkeypatch, settings):
    from django.core.exceptions import ImproperlyConfigured

    import memory.embeddings as embeddings

    assert_claim(note("note:dim", "first"))
    settings.UNSAY_EMBEDDINGS, settings.UNSAY_ALLOW_FAKE_EMBEDDINGS = "hashing", True
    reset_provider(None)
    monkeypatch.setattr(embeddings, "column_dimension", lambda: settings.UNSAY_EMBEDDING_DIM + 1)
    try:
        with pytest.raises(ImproperlyConfigured, match="dimensional vectors"):
            vectors.embed_backlog()
    finally:
        reset_provider(None)
    assert vectors.backlog().count() == 1  # nothing lost: the next embedder with a fitting provider does it


def test_the_task_drains_the_backlog_and_is_queued_after_commit_only_when_asked(settings, monkeypatch):
    from memory.tasks import embed_facts

    # No broker, whatever this run has: Celery eager, where a queued task runs at once.
    settings.CELERY_TASK_ALWAYS_EAGER = True
    queued = []
    monkeypatch.setattr(embed_facts, "delay", lambda: queued.append(embed_facts()))
    provider = HashingEmbedding(settings.UNSAY_EMBEDDING_DIM)
    reset_provider(provider)
    try:
        settings.UNSAY_EMBED_ON_COMMIT = None  # unset + eager Celery (no broker): not queued by the write
        assert_claim(note("note:a", "a statement"))
        assert vectors.backlog().count() == 1
        assert embed_facts().startswith("1 fact versions embedded")
        settings.UNSAY_EMBED_ON_COMMIT = True  # as with a broker: queued once the write commits (eager: runs)
        assert_claim(note("note:b", "another statement"))
        assert not vectors.backlog().exists() and provider.calls == 2 and len(queued) == 1
    finally:
        reset_provider(None)
