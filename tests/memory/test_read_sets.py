"""Read sets (memory.read_sets, ADR 0016): a decision's reads stored once by their content, exactly."""

import importlib
import random
import threading
import time

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor

from core.retry import run_in_transaction
from memory import read_sets
from memory.decisions import ReadSpec, record_decision
from memory.fact_writes import Claim, assert_claim
from memory.models import Decision, ReadSet, ReadSetMember

pytestmark = pytest.mark.django_db(transaction=True)


def _fact(key, statement="synthetic note"):
    return assert_claim(Claim(fact_key=key, kind="note", subject="valsartan", statement=statement,
                              source="manual")).fact


def _decide(reads):
    return run_in_transaction(lambda: record_decision(question="is my valsartan safe", verdict="caution",
                                                      answer="Caution.", reasoner="rules/1", reads=reads))


def _seen(decision) -> list[tuple]:
    return [(r.fact_id, r.fact_key, r.fact_version, r.rank, r.score, r.load_bearing) for r in decision.reads]


def test_random_decisions_read_back_exactly_the_versions_they_read(hashing_embeddings):
    rng = random.Random(20261205)
    facts = [_fact(f"note:{n}") for n in range(8)]
    facts += [assert_claim(Claim(fact_key=f"note:{n}", kind="note", subject="valsartan", statement="revised",
                                 source="manual")).fact for n in range(3)]  # second versions of three keys
    # A few shapes repeated (patients who read alike) and many drawn at random.
    shapes = [rng.sample(facts, rng.randint(0, 6)) for _ in range(6)]
    expected = {}
    for _ in range(120):
        chosen = rng.choice(shapes) if rng.random() < 0.5 else rng.sample(facts, rng.randint(0, 8))
        score = rng.choice([1.0, 0.5, rng.random()])
        specs = [ReadSpec(f, rank, score / rank, rng.random() < 0.3) for rank, f in enumerate(chosen, start=1)]
        decision = _decide(specs)
        expected[decision.id] = [(s.fact.id, s.fact.fact_key, s.fact.version, s.rank, s.score, s.load_bearing)
                                 for s in specs]
    for decision_id, reads in rng.sample(sorted(expected.items()), 60):
        assert _seen(Decision.objects.get(pk=decision_id)) == reads, decision_id
    assert ReadSet.objects.count() == len({tuple(r) for r in expected.values()}) < len(expected)
    # Each set is stored once: its members are exactly the distinct contents, no copy per decision.
    assert ReadSetMember.objects.count() == sum(len(r) for r in {tuple(r) for r in expected.values()})
    for read_set in ReadSet.objects.all():
        assert read_set.members.count() == read_set.size


def test_the_address_is_the_content():
    member = read_sets.Member(1, "recall:D-1:lot:A", 2, 1, 1.0, True)
    same = read_sets.Member(99, "recall:D-1:lot:A", 2, 1, 1.0, True)  # the id is not content
    assert read_sets.read_set_id([member]) == read_sets.read_set_id([same])
    for changed in (read_sets.Member(1, "recall:D-1:lot:A", 3, 1, 1.0, True),
                    read_sets.Member(1, "recall:D-1:lot:A", 2, 2, 1.0, True),
                    read_sets.Member(1, "recall:D-1:lot:A", 2, 1, 0.999, True),
                    read_sets.Member(1, "recall:D-1:lot:A", 2, 1, 1.0, False)):
        assert read_sets.read_set_id([changed]) != read_sets.read_set_id([member])
    with pytest.raises(ValueError, match="each fact version once"):
        read_sets.read_set_id([member, same])
    frozen = importlib.import_module("memory.migrations.0016_read_sets")._content_id
    other = read_sets.Member(2, "label:x", 1, 2, 0.25, False)
    assert frozen([member, other]) == read_sets.read_set_id([member, other]) == read_sets.read_set_id([other, member])


def _store_in_own_transaction(members, *, hold: threading.Event | None = None, release=None, errors=None,
                              rollback=False):
    try:
        with transaction.atomic():
            read_sets.store_one(members)
            if hold is not None:
                hold.set()
                release.wait(10)
            if rollback:
                raise RuntimeError("rolled back on purpose")
    except RuntimeError:
        pass
    except Exception as exc:  # noqa: BLE001 - the test reports whatever a racing writer raised
        errors.append(exc)
    finally:
        connections.close_all()


@pytest.mark.parametrize("first_rolls_back", [False, True])
def test_two_writers_of_the_same_new_set_neither_fail_nor_duplicate(hashing_embeddings, first_rolls_back):
    facts = [_fact(f"note:{n}") for n in range(3)]
    members = [read_sets.Member(f.id, f.fact_key, f.version, rank, 1.0, rank == 1)
               for rank, f in enumerate(facts, start=1)]
    inserted, release, errors = threading.Event(), threading.Event(), []
    first = threading.Thread(target=_store_in_own_transaction, args=(members,),
                             kwargs={"hold": inserted, "release": release, "errors": errors,
                                     "rollback": first_rolls_back})
    first.start()
    assert inserted.wait(10)
    # The second writer finds no committed set, so it inserts and waits on the first's uncommitted row.
    second = threading.Thread(target=_store_in_own_transaction, args=(members,), kwargs={"errors": errors})
    second.start()
    time.sleep(0.5)
    release.set()
    first.join(15)
    second.join(15)
    assert errors == []
    assert ReadSet.objects.count() == 1 and ReadSetMember.objects.count() == 3
    assert [(m.fact_id, m.rank, m.load_bearing) for m in ReadSetMember.objects.order_by("rank")] == [
        (f.id, rank, rank == 1) for rank, f in enumerate(facts, start=1)]


def test_a_read_set_is_history_and_never_deleted(hashing_embeddings):
    decision = _decide([ReadSpec(_fact("note:a"), 1, 1.0, True)])
    with pytest.raises(IntegrityError, match="memory_readset are history and are never deleted"):
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memory_readset WHERE id = %s", [decision.read_set_id])
    assert decision.reads.count() == 1


def test_the_migration_moves_reads_into_shared_sets_and_back(hashing_embeddings):
    from memory import vectors

    # Written now, with their vectors: before memory/0017 every fact held one.
    written = [_fact(f"note:{n}").pk for n in range(4)]
    vectors.embed_backlog()
    executor = MigrationExecutor(connection)
    executor.migrate([("memory", "0015_name_scopes")])
    try:
        old = MigrationExecutor(connection).loader.project_state([("memory", "0015_name_scopes")]).apps
        OldFact, OldDecision, OldRead = (old.get_model("memory", n) for n in ("Fact", "Decision", "DecisionRead"))
        facts = list(OldFact.objects.filter(pk__in=written).order_by("pk"))
        now = facts[0].asserted_at
        reads_of = {}
        for n, size in enumerate([0, 1, 2, 0, 1, 2, 4]):  # three shapes shared by six decisions, one of its own
            decision = OldDecision.objects.create(question=f"q{n}", verdict="safe", answer="a", reasoner="rules/1",
                                                  decided_at=now)
            reads_of[decision.id] = [(f.id, f.fact_key, f.version, rank, 1.0 / rank, rank == 1)
                                     for rank, f in enumerate(facts[:size], start=1)]
            OldRead.objects.bulk_create([
                OldRead(decision=decision, fact_id=f, fact_key=k, fact_version=v, rank=r, score=s, load_bearing=b)
                for f, k, v, r, s, b in reads_of[decision.id]])
        MigrationExecutor(connection).migrate([("memory", "0016_read_sets")])
        for decision_id, reads in reads_of.items():  # only the columns 0016 has (later ones add more)
            assert _seen(Decision.objects.only("read_set").get(pk=decision_id)) == reads
        assert ReadSet.objects.count() == 4 and ReadSetMember.objects.count() == 0 + 1 + 2 + 4
        # And back: every decision's reads written again from its set.
        executor = MigrationExecutor(connection)
        executor.migrate([("memory", "0015_name_scopes")])
        old = executor.loader.project_state([("memory", "0015_name_scopes")]).apps
        OldRead = old.get_model("memory", "DecisionRead")
        for decision_id, reads in reads_of.items():
            assert [(r.fact_id, r.fact_key, r.fact_version, r.rank, r.score, r.load_bearing)
                    for r in OldRead.objects.filter(decision_id=decision_id).order_by("rank")] == reads
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_set_committed_after_a_repeatable_read_snapshot_retries_the_whole_transaction(hashing_embeddings):
    """A sweep page reads one REPEATABLE READ snapshot; another sweep may commit the same new set after it.
    ON CONFLICT then raises a serialization failure, and the page's retry sees the set and writes none."""
    from core.retry import run_in_transaction

    fact = _fact("note:a")
    members = [read_sets.Member(fact.id, fact.fact_key, fact.version, 1, 1.0, True)]
    attempts = []

    def page():
        attempts.append(1)
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("SELECT count(*) FROM memory_readset")  # the snapshot is taken here
        if len(attempts) == 1:
            other = threading.Thread(target=_store_in_own_transaction, args=(members,), kwargs={"errors": []})
            other.start()
            other.join(10)
        return read_sets.store({read_sets.read_set_id(members): members})

    written = run_in_transaction(page)
    assert len(attempts) == 2 and written.members == 0
    assert ReadSet.objects.count() == 1 and ReadSetMember.objects.count() == 1
