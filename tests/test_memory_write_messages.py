"""The PostgreSQL write path of issue #14 (session 4): a lone assert sends BEGIN and COMMIT inside its
statements' messages and builds its Fact rows from RETURNING instead of reading them back."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memory.models import Fact
from memory.services import Claim, assert_claim

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
