"""record_decision: a decision and its read set are written together or not at all."""

from unittest import mock

import pytest
from django.db import IntegrityError, connection, models
from django.test.utils import CaptureQueriesContext

from core.retry import run_in_transaction
from memory.decisions import DecisionAlreadySuperseded, ReadSpec, inputs_fingerprint, record_decision
from memory.fact_writes import Claim, assert_claim, retract_claim
from memory.models import Decision, Fact, PremiseSet, ReadSet, ReadSetMember


def fact(key, statement="recall"):
    return assert_claim(Claim(fact_key=key, kind="recall", subject="valsartan", statement=statement,
                              source="manual")).fact


def decide(reads, **kwargs):
    fields = dict(question="is my valsartan safe", verdict="stop", answer="Stop.", reasoner="rules/1", reads=reads)
    fields.update(kwargs)
    return run_in_transaction(lambda: record_decision(**fields))


@pytest.mark.django_db(transaction=True)
def test_decision_and_reads_are_written_with_the_versions_read(hashing_embeddings):
    a, b = fact("r:a"), fact("r:b")
    decision = decide([ReadSpec(a, 1, 1.0, True), ReadSpec(b, 2, 0.5)], subject="valsartan",
                      inputs_hash=inputs_fingerprint("q", ["A1"], [("r:a", 1), ("r:b", 1)]))
    reads = list(decision.reads.all())
    assert [(r.fact_key, r.fact_version, r.rank, r.load_bearing) for r in reads] == [
        ("r:a", 1, 1, True), ("r:b", 1, 2, False)]
    assert decision.status == Decision.Status.STANDING and len(decision.inputs_hash) == 64


@pytest.mark.django_db(transaction=True)
def test_a_failure_while_writing_reads_leaves_no_decision(hashing_embeddings):
    a = fact("r:a")
    with pytest.raises(ValueError, match="each fact version once"):  # never silently dropped
        decide([ReadSpec(a, 1, 1.0, True), ReadSpec(a, 2, 1.0)])
    with mock.patch.object(ReadSetMember.objects, "bulk_create", side_effect=RuntimeError("disk full")):
        with pytest.raises(RuntimeError, match="disk full"):
            decide([ReadSpec(a, 1, 1.0, True)])
    assert Decision.objects.count() == 0 and ReadSet.objects.count() == 0 and ReadSetMember.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_reads_must_name_stored_versions_and_verdicts_must_be_known(hashing_embeddings):
    unsaved = Fact(fact_key="r:x", version=1)
    with pytest.raises(ValueError, match="stored fact version"):
        decide([ReadSpec(unsaved, 1, 1.0)])
    with pytest.raises(ValueError, match="Unknown verdict"):
        decide([], verdict="maybe")
    assert Decision.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_replacing_supersedes_once_and_a_second_replacer_loses_cleanly(hashing_embeddings):
    a = fact("r:a")
    first = decide([ReadSpec(a, 1, 1.0, True)])
    second = decide([ReadSpec(a, 1, 1.0, True)], verdict="caution", replaces=first)
    first.refresh_from_db()
    assert (first.status, second.replaces_id) == (Decision.Status.SUPERSEDED, first.id)
    with pytest.raises(DecisionAlreadySuperseded):
        decide([ReadSpec(a, 1, 1.0, True)], replaces=first)
    # Both read the same version alike: one set, one member row, two decisions pointing at it.
    assert Decision.objects.count() == 2 and ReadSetMember.objects.count() == 1
    assert first.read_set_id == second.read_set_id


@pytest.mark.django_db(transaction=True)
def test_the_sweep_join_finds_standing_decisions_whose_load_bearing_read_is_retracted(hashing_embeddings):
    a, b = fact("r:a"), fact("r:b")
    stale = decide([ReadSpec(a, 1, 1.0, True), ReadSpec(b, 2, 0.5)])
    fresh = decide([ReadSpec(b, 1, 1.0, True), ReadSpec(a, 2, 0.5)])  # reads r:a, but not load-bearing
    retract_claim("r:a", reason="withdrawn")
    query = Decision.objects.standing().filter(
        read_set__members__load_bearing=True, read_set__members__fact__retracted_at__isnull=False).distinct()
    with CaptureQueriesContext(connection) as queries:
        assert list(query.values_list("id", flat=True)) == [stale.id]
    assert len(queries) == 1
    assert fresh.id not in query.values_list("id", flat=True)


@pytest.mark.django_db
def test_the_indexes_the_sweep_and_replay_need_exist():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                       "('memory_fact', 'memory_decision', 'memory_readsetmember')")
        indexes = dict(cursor.fetchall())
    assert "(fact_id, read_set_id) WHERE load_bearing" in indexes["read_set_bearing_fact"]
    assert "(read_set_id, id)" in indexes["decision_read_set"]
    assert "WHERE ((status)::text = 'standing'" in indexes["decision_standing"]
    assert "(fact_key, asserted_at)" in indexes["fact_key_asserted"]
    hnsw = indexes["fact_believed_embedding_hnsw"]
    assert "USING hnsw (embedding vector_cosine_ops) WITH (m='12', ef_construction='40')" in hnsw
    assert "WHERE (retracted_at IS NULL)" in hnsw


@pytest.mark.django_db(transaction=True)
def test_facts_and_decisions_are_never_deleted_so_reads_never_dangle(hashing_embeddings):
    """No database FK points at a fact or a decision (their checks were the sweep's largest
    server cost, memory.models.HISTORY_REFERENCE); what they guarded is kept by refusing every DELETE
    of either."""
    read_fact, unread_fact = fact("r:a"), fact("r:b")
    decision = decide([ReadSpec(read_fact, 1, 1.0, True)])
    with pytest.raises(IntegrityError, match="memory_fact are history and are never deleted"):
        Fact.objects.filter(pk=unread_fact.pk).delete()  # no reads, so only the trigger stands in the way
    with pytest.raises(IntegrityError, match="memory_decision are history and are never deleted"):
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memory_decision WHERE id = %s", [decision.pk])
    # The ORM cascades a decision's reads before the decision itself; the refusal rolls all of it back.
    with pytest.raises(IntegrityError, match="never deleted"):
        Decision.objects.filter(pk=decision.pk).delete()
    assert Fact.objects.filter(pk__in=[read_fact.pk, unread_fact.pk]).count() == 2
    assert list(decision.reads.values_list("fact_id", flat=True)) == [read_fact.pk]
    with connection.cursor() as cursor:
        cursor.execute("SELECT conrelid::regclass::text || '.' || conname FROM pg_constraint WHERE contype = 'f' "
                       "AND confrelid IN ('memory_fact'::regclass, 'memory_decision'::regclass)")
        assert cursor.fetchall() == []


def test_every_reference_to_history_is_unchecked_on_postgres_and_kept_on_cockroach():
    """The rule of memory.models.HISTORY_REFERENCE, for every model of the project: a foreign key
    skips the database check exactly when it points at a fact or a decision, and CockroachDB's
    migrations re-add each of those constraints by name."""
    import importlib

    from django.apps import apps

    # Audit links that outlive the row they name (the audit chain keeps every link: patients/models.py).
    outlives_its_target = {("DispensingChange", "patient")}
    kept_on_cockroach = set()
    for name in ("memory.migrations.0011_history_references_unchecked",
                 "corrections.migrations.0012_history_references_unchecked", "memory.migrations.0016_read_sets",
                 "memory.migrations.0018_premise_sets"):
        kept_on_cockroach |= set(importlib.import_module(name).REFERENCES)
    # memory/0016 dropped the per-decision read table and memory/0018 the per-decision premise table, and
    # their constraints with them.
    kept_on_cockroach = {r for r in kept_on_cockroach if r[0] not in ("memory_decisionread", "memory_decisionpremise")}
    unchecked = set()
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if (model.__name__, field.name) in outlives_its_target:
                assert not field.db_constraint and field.remote_field.on_delete is models.DO_NOTHING
                continue
            if field.many_to_one or field.one_to_one:
                points_at_history = field.related_model in (Fact, Decision, ReadSet, PremiseSet)
                assert field.db_constraint is not points_at_history, (model.__name__, field.name)
                if points_at_history:
                    unchecked.add((model._meta.db_table, field.column, field.related_model._meta.db_table))
    assert len(unchecked) == 16
    assert unchecked == kept_on_cockroach
