"""The PostgreSQL write path: a lone assert sends BEGIN and COMMIT inside its statements' messages
and builds its Fact rows from RETURNING instead of reading them back; its statements are prepared
once per connection and run with generic plans."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone
from psycopg.errors import SerializationFailure

import memory.fact_writes as fact_writes
from core.retry import run_in_transaction
from memory import write_statements
from memory.fact_writes import Claim, assert_claim, assert_claims, prepare_claims, write_claims
from memory.models import Fact

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL write path")

FIELDS = [f.attname for f in Fact._meta.concrete_fields if f.attname != "embedding"]


def note(key, statement, **extra):
    return Claim(fact_key=key, kind="note", subject="valsartan", statement=statement, source="manual",
                 attributes={"n": len(statement)}, **extra)


def same_as_the_orm(fact):
    loaded = Fact.objects.defer("embedding").get(pk=fact.pk)
    assert {f: getattr(fact, f) for f in FIELDS} == {f: getattr(loaded, f) for f in FIELDS}


def idle():
    return connection.connection.info.transaction_status.name == "IDLE"


@pytest.mark.django_db(transaction=True)
def test_the_facts_returned_equal_what_the_orm_reads(hashing_embeddings):
    created = assert_claim(note("note:msg", "valsartan lot A1 recalled"))
    same_as_the_orm(created.fact)
    versioned = assert_claim(note("note:msg", "valsartan lot A1 recalled, class II"))
    same_as_the_orm(versioned.fact)
    same_as_the_orm(versioned.previous)
    unchanged = assert_claim(note("note:msg", "valsartan lot A1 recalled, class II"))
    same_as_the_orm(unchanged.fact)
    assert [created.status, versioned.status, unchanged.status] == ["created", "versioned", "unchanged"]
    assert versioned.previous.superseded_by_id == versioned.fact.id
    assert versioned.previous.retracted_at == versioned.fact.asserted_at
    assert unchanged.fact.id == versioned.fact.id
    assert idle()


@pytest.mark.django_db(transaction=True)
def test_a_refused_belief_instant_rolls_back_and_releases_the_key(hashing_embeddings):
    assert_claim(note("note:back", "first"))
    with pytest.raises(ValueError, match="belief last changed later"):
        assert_claim(note("note:back", "second"), at=timezone.now() - timedelta(days=1))
    assert idle()  # the explicit BEGIN was rolled back, the advisory lock with it
    assert list(Fact.objects.filter(fact_key="note:back").values_list("version", flat=True)) == [1]
    assert assert_claim(note("note:back", "second")).status == "versioned"


def prepared_write_statements():
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements"
                       " WHERE name LIKE 'unsay_fact_%' ORDER BY name")
        return {name: (generic, custom) for name, generic, custom in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_write_statements_are_prepared_once_per_connection_and_planned_generically(hashing_embeddings):
    connection.close()  # a fresh session: nothing prepared on it yet
    for n in range(3):
        assert_claim(note("note:plan", f"version {n}"))
    plans = prepared_write_statements()
    # The write transaction's statements never pay a custom plan; retire ran for versions 2 and 3.
    for name in ("unsay_fact_lock", "unsay_fact_locking_read", "unsay_fact_insert"):
        assert plans[name] == (3, 0), (name, plans)
    assert plans["unsay_fact_retire"] == (2, 0)
    # A reconnect is a new session: the statements are made again, not assumed.
    connection.close()
    assert assert_claim(note("note:plan", "version 3")).status == "versioned"
    assert prepared_write_statements()["unsay_fact_insert"] == (1, 0)
    assert list(Fact.objects.filter(fact_key="note:plan").values_list("version", flat=True)
                .order_by("version")) == [1, 2, 3, 4]


@pytest.mark.django_db(transaction=True)
def test_statements_prepared_inside_a_rolled_back_transaction_still_serve_the_next_write(hashing_embeddings):
    assert_claim(note("note:fail", "first"))
    connection.close()

    def write_then_fail():
        # The session's first write: its statements are prepared inside this transaction.
        write_claims(prepare_claims([note("note:fail", "second")]), [0])
        raise RuntimeError("the caller fails after the write")

    with pytest.raises(RuntimeError, match="caller fails"):
        run_in_transaction(write_then_fail)
    assert idle()
    assert list(Fact.objects.filter(fact_key="note:fail").values_list("version", flat=True)) == [1]
    assert prepared_write_statements()  # PREPARE is not transactional: they outlived the rollback
    assert assert_claim(note("note:fail", "second")).status == "versioned"


@pytest.mark.django_db(transaction=True)
def test_a_lone_assert_embeds_nothing_even_across_a_retry(hashing_embeddings, monkeypatch):
    assert assert_claim(note("note:lone", "first")).status == "created"
    assert assert_claim(note("note:lone", "first")).status == "unchanged"
    assert hashing_embeddings.calls == 0  # vectors come after commit (memory.vectors), never in the write

    real, failures = fact_writes._belief_instant, []

    def conflict_once(*args):
        # The first attempt fails after its locking read, as a serialization failure would.
        if not failures:
            failures.append(1)
            error = OperationalError("could not serialize access")
            error.__cause__ = SerializationFailure()
            raise error
        return real(*args)

    monkeypatch.setattr(fact_writes, "_belief_instant", conflict_once)
    assert assert_claim(note("note:lone", "second")).status == "versioned"
    assert failures == [1] and idle()
    assert hashing_embeddings.calls == 0
    assert list(Fact.objects.filter(fact_key="note:lone").order_by("version")
                .values_list("version", "statement")) == [(1, "first"), (2, "second")]


@pytest.mark.django_db(transaction=True)
def test_statements_left_half_prepared_are_completed_not_prepared_twice(hashing_embeddings):
    connection.close()
    connection.ensure_connection()
    # As a message that failed after its first PREPARE leaves the session: one statement, not marked.
    with connection.cursor() as cursor:
        name, (types, sql) = next(iter(write_statements.WRITE_STATEMENTS.items()))
        cursor.execute(f"PREPARE {name} ({types}) AS {sql}")
    assert connection.connection not in write_statements.PREPARED_ON
    assert assert_claim(note("note:half", "first")).status == "created"
    assert set(prepared_write_statements()) == set(write_statements.WRITE_STATEMENTS)
    # A failed write forgets what it knew; the next one asks the session again and goes on.
    with pytest.raises(ValueError, match="belief last changed later"):
        assert_claim(note("note:half", "second"), at=timezone.now() - timedelta(days=1))
    assert connection.connection not in write_statements.PREPARED_ON
    assert assert_claim(note("note:half", "second")).status == "versioned"


@pytest.mark.django_db(transaction=True)
def test_no_provider_is_called_while_a_fact_is_written(settings):
    from memory.embeddings import HashingEmbedding, reset_provider

    seen = []

    class Watched(HashingEmbedding):
        def embed(self, texts):
            seen.append(connection.connection.info.transaction_status.name)
            return super().embed(texts)

    reset_provider(Watched(settings.UNSAY_EMBEDDING_DIM))
    try:
        assert assert_claim(note("note:where", "first")).status == "created"
        assert assert_claims([note("note:where", "second"), note("note:other", "x")])
    finally:
        reset_provider(None)
    # Neither inside the write transaction nor before it: the embedding stage embeds after commit.
    assert seen == []
