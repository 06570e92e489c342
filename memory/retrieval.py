"""Retrieval over believed facts: exact subject/lot matches first, then cosine neighbours (partial HNSW
index over believed versions only), every believed fact in a set of scopes (what a decision rests on), and
what was believed at an instant (beliefs_at)."""

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Case, IntegerField, Q, Value, When
from pgvector.django import CosineDistance

from memory.embeddings import get_provider
from memory.models import Fact


@dataclass
class Retrieved:
    fact: Fact
    score: float
    match: str  # "lot", "drug", "subject", "semantic"


def retrieve(question: str, *, subject: str | None = None, lots=None, k: int = 8) -> list[Retrieved]:
    """Up to k believed facts: exact structured matches first (this patient's lots, then
    drug-level facts for the subject, then other facts on the subject), then semantic neighbours
    by cosine distance. Never returns a retracted version."""
    if k <= 0:
        return []
    lots = [lot for lot in (lots or []) if lot]
    picked: list[Retrieved] = []
    if subject or lots:
        exact = (
            Fact.objects.believed()
            .filter(Q(subject=subject) if subject else Q(lot__in=lots))
            .defer("embedding")
            .annotate(
                match_rank=Case(
                    *([When(lot__in=lots, then=Value(0))] if lots else []),
                    When(lot__isnull=True, then=Value(1)),
                    default=Value(2),
                    output_field=IntegerField(),
                )
            )
            .order_by("match_rank", "-asserted_at", "id")[:k]
        )
        for fact in exact:
            match = ("lot", "drug", "subject")[fact.match_rank]
            picked.append(Retrieved(fact, 1.0 if match != "subject" else 0.9, match))
    remaining = k - len(picked)
    if remaining > 0 and question:
        vector = get_provider().embed_one(question)
        neighbours = semantic_neighbours(vector, remaining, exclude_ids=[r.fact.id for r in picked])
        picked.extend(Retrieved(f, round(1.0 - float(f.distance), 6), "semantic") for f in neighbours)
    return picked


def semantic_neighbours(vector, k: int, *, exclude_ids=()):
    """The k believed facts nearest to `vector` by cosine distance, each annotated with `distance`.

    The `retracted_at IS NULL` filter matches the partial vector index (HNSW on PostgreSQL, whose
    connections set hnsw.iterative_scan=strict_order so the filtered top-k still yields k rows).
    """
    qs = Fact.objects.believed()
    if connection.vendor == "cockroachdb":
        # The vector index's prefix column must be pinned for CockroachDB to use it.
        qs = qs.extra(where=["believed = true"])
    if exclude_ids:
        qs = qs.exclude(id__in=list(exclude_ids))
    return qs.defer("embedding").annotate(distance=CosineDistance("embedding", vector)).order_by("distance")[:k]


def facts_in_scopes(scopes) -> list[Fact]:
    """Every believed fact that shares a scope with `scopes` (GIN index fact_believed_scopes).
    A decision reads all of them: its premises say it took exactly these into account."""
    scopes = sorted(set(scopes))
    if not scopes:
        return []
    return list(Fact.objects.believed().filter(scopes__overlap=scopes).defer("embedding").order_by("id"))


def beliefs_at(at: datetime, *, fact_key: str | None = None, subject: str | None = None):
    """The fact versions we believed at instant `at` (bitemporal route: works whatever MVCC GC has done)."""
    qs = Fact.objects.believed_at(at).defer("embedding")
    if fact_key:
        qs = qs.filter(fact_key=fact_key)
    if subject:
        qs = qs.filter(subject=subject)
    return qs.order_by("fact_key", "version")
