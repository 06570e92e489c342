"""The database itself refuses broken version chains, whatever code writes them (raw SQL, the ORM)."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory.embeddings import to_sql_vector
from memory.fact_writes import Claim, assert_claim, retract_claim
from memory.models import Fact


def make_fact(hashing_embeddings, key="note:1", version=1, **overrides):
    fields = dict(fact_key=key, version=version, kind="note", subject="valsartan", statement=f"{key} v{version}",
                  content_hash=f"h{version}", source="manual", asserted_at=timezone.now(),
                  embedding=hashing_embeddings.embed_one(f"{key} v{version}"))
    fields.update(overrides)
    return Fact.objects.create(**fields)


def rejected(fn):
    with pytest.raises(IntegrityError) as info:
        with transaction.atomic():
            fn()
    return str(info.value)


@pytest.mark.django_db
def test_the_database_rejects_a_duplicate_version_of_a_key(hashing_embeddings):
    make_fact(hashing_embeddings, retracted_at=timezone.now() + timedelta(seconds=1))
    message = rejected(lambda: make_fact(hashing_embeddings, version=1))
    assert "fact_key_version_unique" in message


@pytest.mark.django_db
def test_the_database_rejects_two_believed_versions_of_one_key(hashing_embeddings):
    make_fact(hashing_embeddings, version=1)
    message = rejected(lambda: make_fact(hashing_embeddings, version=2))
    assert "fact_one_believed_per_key" in message
    # Retracting v1 first (as assert_claim does) makes room for v2.
    Fact.objects.filter(version=1).update(retracted_at=timezone.now() + timedelta(seconds=1))
    make_fact(hashing_embeddings, version=2)
    assert Fact.objects.believed().get().version == 2


@pytest.mark.django_db(transaction=True)
def test_raw_sql_cannot_un_retract_an_old_version_beside_the_believed_one(hashing_embeddings):
    result = assert_claim(Claim(fact_key="note:raw", kind="note", subject="x", statement="one", source="manual"))
    assert_claim(Claim(fact_key="note:raw", kind="note", subject="x", statement="two", source="manual"))

    def unretract():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE memory_fact SET retracted_at = NULL WHERE id = %s", [result.fact.id])

    assert "fact_one_believed_per_key" in rejected(unretract)


@pytest.mark.django_db
def test_the_database_rejects_retraction_before_assertion(hashing_embeddings):
    fact = make_fact(hashing_embeddings)

    def retract_in_the_past():
        with connection.cursor() as cursor:
            cursor.execute("UPDATE memory_fact SET retracted_at = asserted_at - interval '1 second' WHERE id = %s",
                           [fact.id])

    assert "fact_asserted_before_retracted" in rejected(retract_in_the_past)
    now = timezone.now()
    assert "fact_asserted_before_retracted" in rejected(
        lambda: make_fact(hashing_embeddings, key="note:2", asserted_at=now, retracted_at=now - timedelta(days=1)))


@pytest.mark.django_db
def test_the_database_rejects_a_valid_interval_that_ends_before_it_starts(hashing_embeddings):
    now = timezone.now()
    assert "fact_valid_interval_ordered" in rejected(
        lambda: make_fact(hashing_embeddings, valid_from=now, valid_to=now - timedelta(days=1)))
    fact = make_fact(hashing_embeddings, valid_from=now - timedelta(days=2), valid_to=now)
    assert fact.pk


@pytest.mark.django_db
def test_the_database_rejects_version_zero_via_raw_insert(hashing_embeddings):
    vector = to_sql_vector(hashing_embeddings.embed_one("zero"))

    def insert_version_zero():
        with connection.cursor() as cursor:
            cursor.execute(
                """INSERT INTO memory_fact (fact_key, version, kind, subject, statement, attributes, content_hash,
                       source, source_ref, asserted_at, asserted_by, retracted_by, retraction_reason, embedding)
                   VALUES ('note:0', 0, 'note', 's', 'st', '{}', 'h', 'manual', '', now(), '', '', '', %s::vector)""",
                [vector])

    assert "fact_version_positive" in rejected(insert_version_zero)


@pytest.mark.django_db(transaction=True)
def test_assert_claim_refuses_to_move_belief_time_backwards(hashing_embeddings):
    now = timezone.now()
    assert_claim(Claim(fact_key="note:t", kind="note", subject="x", statement="one", source="manual"), at=now)
    with pytest.raises(ValueError, match="belief last changed later"):
        assert_claim(Claim(fact_key="note:t", kind="note", subject="x", statement="two", source="manual"),
                     at=now - timedelta(hours=1))
    assert Fact.objects.filter(fact_key="note:t").count() == 1
    # Nor may a retracted key be re-asserted from before its retraction (two beliefs would overlap).
    retract_claim("note:t", reason="withdrawn", at=now + timedelta(hours=2))
    with pytest.raises(ValueError, match="belief last changed later"):
        assert_claim(Claim(fact_key="note:t", kind="note", subject="x", statement="three", source="manual"),
                     at=now + timedelta(hours=1))
    again = assert_claim(Claim(fact_key="note:t", kind="note", subject="x", statement="three", source="manual"),
                         at=now + timedelta(hours=2))
    assert again.fact.version == 2
