"""retrieve(): believed facts only, exact structured matches first, k results under heavy retraction,
and the partial HNSW index really serving the semantic query."""

import pytest
from django.db import connection, transaction

from memory.embeddings import to_sql_vector
from memory.fact_writes import Claim, assert_claim, retract_claim
from memory.models import Fact
from memory.retrieval import retrieve, semantic_neighbours
from memory.vectors import embed_backlog


def recall(key, subject, lot, statement):
    return Claim(fact_key=key, kind="recall", subject=subject, lot=lot, statement=statement, source="manual")


def bulk_facts(prefix, count, *, near=None, noise=0.05, retracted=False):
    """Insert `count` facts by SQL: random vectors, or `near` plus small noise. Retracted ones are first
    inserted believed (so the HNSW index holds them) and then retracted, as assert_claim leaves them."""
    random_vector = "(SELECT array_agg((random() - 0.5) * {scale}) FROM generate_series(1, %s) d WHERE g > 0)::vector"
    if near is not None:
        vector_sql = "%s::vector + " + random_vector.format(scale=noise)
    else:
        vector_sql = random_vector.format(scale=1)
    params = ([to_sql_vector(near)] if near is not None else []) + [len(near) if near is not None else 384]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO memory_fact (fact_key, version, kind, subject, statement, attributes, content_hash, source,
                    source_ref, asserted_at, asserted_by, retracted_by, retraction_reason, embedding)
                SELECT %s || g, 1, 'note', 'bulk', 'bulk statement ' || g, '{{}}', 'h', 'manual', '',
                       now() - interval '1 day', '', '', '', {vector_sql}
                FROM generate_series(1, %s) g""",
            [prefix, *params, count])
        if retracted:
            cursor.execute("UPDATE memory_fact SET retracted_at = now(), retraction_reason = 'test'"
                           " WHERE fact_key LIKE %s", [prefix + "%"])
        cursor.execute("ANALYZE memory_fact")


@pytest.mark.django_db(transaction=True)
def test_exact_structured_matches_come_first_then_semantic(hashing_embeddings):
    question = "is my valsartan lot A1 safe to take"
    assert_claim(recall("r:other-subject", "losartan", None, question))  # closest text, wrong drug
    assert_claim(recall("r:lot", "valsartan", "A1", "Class II recall of valsartan tablets"))
    assert_claim(recall("r:drug", "valsartan", None, "All valsartan lots from firm X"))
    assert_claim(recall("r:other-lot", "valsartan", "B2", "Class III recall of valsartan lot B2"))
    assert_claim(recall("r:unrelated", "metformin", "M1", "metformin extended release NDMA"))

    # Before their vectors land, the fill finds the same fact by its words.
    hits = retrieve(question, subject="valsartan", lots=["A1"], k=4)
    assert [(h.fact.fact_key, h.match) for h in hits] == [
        ("r:lot", "lot"), ("r:drug", "drug"), ("r:other-lot", "subject"), ("r:other-subject", "text")]
    embed_backlog()
    hits = retrieve(question, subject="valsartan", lots=["A1"], k=4)
    assert [(h.fact.fact_key, h.match) for h in hits] == [
        ("r:lot", "lot"), ("r:drug", "drug"), ("r:other-lot", "subject"), ("r:other-subject", "semantic")]
    assert hits[-1].score == pytest.approx(1.0, abs=1e-5)  # identical text, still ranked after exact matches

    # Lots alone (subject unknown) still match exactly.
    assert [h.fact.fact_key for h in retrieve("", lots=["M1"], k=3)] == ["r:unrelated"]
    assert retrieve(question, subject="valsartan", k=0) == []


@pytest.mark.django_db(transaction=True)
def test_retrieve_never_returns_a_retracted_version(hashing_embeddings):
    question = "valsartan lot A1 recalled for NDMA impurity"
    assert_claim(recall("r:1", "valsartan", "A1", question))
    current = assert_claim(recall("r:1", "valsartan", "A1", "recall of lot A1 terminated")).fact
    assert_claim(recall("r:2", "valsartan", "A2", question + " too"))
    retract_claim("r:2", reason="withdrawn")

    for hits in (retrieve(question, subject="valsartan", lots=["A1"], k=8), retrieve(question, k=8)):
        assert [h.fact.id for h in hits] == [current.id]
        assert all(h.fact.retracted_at is None for h in hits)


@pytest.mark.django_db(transaction=True)
def test_k_results_when_many_closer_neighbours_are_retracted_and_the_hnsw_index_serves_it(hashing_embeddings):
    question = "valsartan NDMA contamination recall"
    query = hashing_embeddings.embed_one(question)
    bulk_facts("far:", 2000)                                 # believed, unrelated
    bulk_facts("near:", 300, near=query, retracted=True)     # retracted, all closer than any believed fact

    hits = retrieve(question, k=8)
    assert len(hits) == 8
    assert all(h.fact.retracted_at is None and h.fact.fact_key.startswith("far:") for h in hits)

    # At 2,000 rows and ef_search 100 the planner may prefer an exact sort; make it take the HNSW
    # path this test is about, and check that path still returns k believed facts.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
        plan = semantic_neighbours(query, 8).explain()
        assert "Index Scan using fact_believed_embedding_hnsw" in plan, plan
        hits = retrieve(question, k=8)
    assert len(hits) == 8
    assert all(h.fact.retracted_at is None and h.fact.fact_key.startswith("far:") for h in hits)

    # The connection setting is what makes this work: without iterative scans the index hands back
    # ef_search candidates, all retracted, and the filtered top-8 comes back short.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SHOW hnsw.iterative_scan")
            assert cursor.fetchone()[0] == "strict_order"
            cursor.execute("SET LOCAL hnsw.iterative_scan = off")
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL hnsw.ef_search = 40")
        assert len(list(semantic_neighbours(query, 8))) < 8

    # The exact scan also gives 8 believed facts. (How well the two agree is measured on real recall
    # text by bench/vector_recall.py; uniform random vectors are the worst case for any ANN index.)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_indexscan = off")
        exact = list(semantic_neighbours(query, 8))
    assert len(exact) == 8 and all(f.fact_key.startswith("far:") for f in exact)


@pytest.mark.django_db(transaction=True)
def test_retrieval_only_reads_believed_facts_in_sql(hashing_embeddings):
    sql = str(semantic_neighbours(hashing_embeddings.embed_one("x"), 3, exclude_ids=[1]).query)
    assert '"memory_fact"."retracted_at" IS NULL' in sql
    assert Fact.objects.count() == 0
