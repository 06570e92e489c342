"""write_claims as a set (PostgreSQL): the rows equal those of the one-claim-at-a-time path
(`_write_version`, which CockroachDB still uses), and overlapping batches from parallel
connections neither deadlock nor break a version chain."""

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from core.retry import run_in_transaction
from memory.fact_writes import Claim, _write_version, assert_claim, prepare_claims, retract_claim, write_claims
from memory.models import Fact

WEEK_AGO = timezone.now() - timedelta(days=7)
COLUMNS = ("fact_key", "version", "kind", "subject", "lot", "statement", "attributes", "content_hash", "source",
           "source_ref", "valid_from", "valid_to", "asserted_by", "retracted_by", "retraction_reason", "scopes")


def recall(key, statement, lot="A1", **extra):
    return Claim(fact_key=key, kind="recall", subject="valsartan", lot=lot, statement=statement,
                 source="openfda:enforcement", asserted_by="bench", attributes={"ndc_products": ["00378-5814"]},
                 **extra)


def history(prefix):
    """Every version of the keys under `prefix`, as comparable values (ids and instants as relations)."""
    rows = []
    facts = list(Fact.objects.filter(fact_key__startswith=prefix).order_by("fact_key", "version"))
    by_id = {f.id: f for f in facts}
    for f in facts:
        successor = by_id.get(f.superseded_by_id)
        rows.append((*(getattr(f, c) for c in COLUMNS), f.retracted_at is None,
                     successor.version if successor else None,
                     successor is not None and successor.asserted_at == f.retracted_at,
                     f.embedding is None))  # written without a vector (memory.vectors adds it later)
    return [(r[0].split(":", 1)[1], *r[1:]) for r in rows]


def scenario(prefix, write):
    """Seed, then one batch with every case: new keys, a changed key, an unchanged key, a key named
    twice (changed, then changed again), and a retracted key asserted again."""
    assert_claim(recall(f"{prefix}:same", "Class II recall, lot A1"))
    assert_claim(recall(f"{prefix}:changed", "Class II recall, lot B2", lot="B2"))
    assert_claim(recall(f"{prefix}:back", "withdrawn then back", lot="C3"))
    retract_claim(f"{prefix}:back", reason="withdrawn by the firm")
    batch = [
        recall(f"{prefix}:new1", "Class I recall, lot D4", lot="D4", valid_from=WEEK_AGO),
        recall(f"{prefix}:same", "Class II recall, lot A1"),
        recall(f"{prefix}:changed", "Class I recall, lot B2", lot="B2"),
        recall(f"{prefix}:twice", "first word"),
        recall(f"{prefix}:new2", "drug-level recall", lot=None),
        recall(f"{prefix}:twice", "second word"),
        recall(f"{prefix}:back", "withdrawn then back, again", lot="C3"),
        recall(f"{prefix}:twice", "second word"),
    ]
    prepared = prepare_claims(batch)
    results = run_in_transaction(lambda: write(prepared, range(len(batch))), retry_unique_violations=True)
    return [(r.status, r.fact.version, r.previous.version if r.previous else None) for r in results]


def one_at_a_time(prepared, indexes):
    out = []
    for i in indexes:
        if i in prepared.unchanged:
            out.append(prepared.unchanged[i])
        else:
            out.append(_write_version(prepared.claims[i], prepared.hashes[i], None, ""))
    return out


@pytest.mark.django_db(transaction=True)
def test_a_batch_writes_exactly_the_rows_the_one_by_one_path_writes(hashing_embeddings):
    batched = scenario("batched", write_claims)
    single = scenario("single", one_at_a_time)
    assert batched == single == [
        ("created", 1, None), ("unchanged", 1, None), ("versioned", 2, 1), ("created", 1, None),
        ("created", 1, None), ("versioned", 2, 1), ("created", 2, None), ("unchanged", 2, None)]
    assert history("batched") == history("single")
    believed = Fact.objects.filter(fact_key="batched:new1", retracted_at=None).get()
    assert believed.scopes == ["drug:valsartan|D4", "ndc:00378-5814|D4", "drug:valsartan|?", "ndc:00378-5814|?",
                               "lot:~D4"]
    back = list(Fact.objects.filter(fact_key="batched:back").order_by("version"))
    assert back[1].asserted_at >= back[0].retracted_at  # a re-asserted key starts after its last retraction


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_overlapping_batches_in_opposite_orders_neither_deadlock_nor_break_chains(hashing_embeddings):
    keys = [f"overlap:{k}" for k in range(6)]
    errors, rounds = [], 4

    def writer(w):
        try:
            order = keys if w % 2 == 0 else list(reversed(keys))
            for r in range(rounds):
                batch = [recall(k, f"writer {w} round {r} on {k}") for k in order]
                prepared = prepare_claims(batch)
                run_in_transaction(lambda prepared=prepared, n=len(batch): write_claims(prepared, range(n)),
                                   retry_unique_violations=True)
        except Exception as exc:  # noqa: BLE001  (reported below)
            errors.append(repr(exc))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    for key in keys:
        chain = list(Fact.objects.filter(fact_key=key).order_by("version").defer("embedding"))
        assert [f.version for f in chain] == list(range(1, 8 * rounds + 1))
        assert [f.version for f in chain if f.retracted_at is None] == [8 * rounds]
        for older, newer in zip(chain, chain[1:], strict=False):
            assert older.superseded_by_id == newer.id and older.retracted_at == newer.asserted_at
