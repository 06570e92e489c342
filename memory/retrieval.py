"""Retrieval over believed facts: exact subject/lot matches first, then a fill of neighbours by meaning
(fill: cosine neighbours over the partial HNSW index, fused with full-text matches), every believed fact in
a set of scopes (what a decision rests on), and what was believed at an instant (beliefs_at).

A version is believed before it has a vector (memory.vectors adds it after commit), so the fill must find
vector-less facts too: full text covers them (docs/adr/0017; the routes are measured on a labelled set of
real questions, bench/retrieval_recall.py)."""

import re
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Case, IntegerField, Q, Value, When
from django.db.models.expressions import RawSQL
from pgvector.django import CosineDistance

from memory.embeddings import get_provider
from memory.models import Fact


@dataclass
class Retrieved:
    fact: Fact
    score: float
    match: str  # "lot", "drug", "subject", "semantic" (by vector), "text" (by full text, no vector match)


def retrieve(question: str, *, subject: str | None = None, lots=None, k: int = 8) -> list[Retrieved]:
    """Up to k believed facts: exact structured matches first (this patient's lots, then
    drug-level facts for the subject, then other facts on the subject), then the fill (neighbours by
    meaning, `fill`). Never returns a retracted version."""
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
        picked.extend(fill(question, remaining, exclude_ids=[r.fact.id for r in picked]))
    return picked


# Routes of the fill, measured by bench/retrieval_recall.py on tests/fixtures/retrieval_questions.json
# (docs/benchmarks.md): "vector" (cosine neighbours among facts with a vector), "text" (full text over
# every believed fact), "hybrid" (both lists fused by reciprocal rank), "backfill" (cosine neighbours, and
# full text over the facts with no vector yet only, fused). FILL_ROUTE is the one retrieve() uses.
ROUTES = ("vector", "text", "hybrid", "backfill")
FILL_ROUTE = "hybrid"
RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al. 2009): a list's rank r weighs 1 / (60 + r)
CANDIDATES = 4  # each list is read k * CANDIDATES deep before fusing
_WORD = re.compile(r"[a-z0-9]+")
# Words every recall statement carries by its shape (recalls.ingest.recall_statement: "<class> recall <number>
# (<status>) of <product> lot <lot> by <firm>: <reason>", "all lots (the recall covers every lot)"), and
# "recalled", asked in nearly every question: matching them tells nothing, and ranking every fact that
# has them cost ~0.5 s a question over 51,000 facts. The database drops English stop words itself.
STATEMENT_WORDS = frozenset({"class", "recall", "recalls", "recalled", "lot", "lots", "ongoing", "terminated",
                             "completed", "covers", "every", "names", "number", "treated", "affected"})
# to_tsvector('english', statement), stored by the database (migration 0017; not a model field, so no
# model read loads it) and indexed over believed versions (fact_believed_text).
_TEXT_VECTOR = "statement_text"


def fill(question: str, k: int, *, exclude_ids=(), route: str = "", vector=None) -> list[Retrieved]:
    """Up to k believed facts nearest in meaning to `question`, none of `exclude_ids`, by `route`
    (FILL_ROUTE). A fact found by vector reads as "semantic" with its cosine similarity; one only full text
    found reads as "text" with its full-text rank. `vector`: the question's, when the caller has it."""
    route = route or FILL_ROUTE
    if route not in ROUTES:
        raise ValueError(f"unknown retrieval route {route!r}; one of {', '.join(ROUTES)}")
    if k <= 0 or not question:
        return []
    depth = k if route in ("vector", "text") else k * CANDIDATES
    by_vector, by_text = [], []
    if route != "text":
        vector = vector if vector is not None else get_provider().embed_one(question)
        by_vector = [Retrieved(f, round(1.0 - float(f.distance), 6), "semantic")
                     for f in semantic_neighbours(vector, depth, exclude_ids=exclude_ids)]
    if route != "vector":
        by_text = [Retrieved(f, round(float(f.text_rank), 6), "text")
                   for f in text_matches(question, depth, exclude_ids=exclude_ids,
                                         without_vector_only=route == "backfill")]
    if route in ("vector", "text"):
        return (by_vector or by_text)[:k]
    return fuse([by_vector, by_text], k)


def fuse(lists, k: int) -> list[Retrieved]:
    """Reciprocal rank fusion: each fact scores the sum of 1 / (RRF_K + rank) over the lists it is in; ties
    by id. A fact in both lists keeps its vector entry (its cosine similarity is the score it reads as)."""
    scores, entries = {}, {}
    for ranked in lists:
        for rank, entry in enumerate(ranked, 1):
            fact_id = entry.fact.id
            scores[fact_id] = scores.get(fact_id, 0.0) + 1.0 / (RRF_K + rank)
            entries.setdefault(fact_id, entry)
    order = sorted(scores, key=lambda fact_id: (-scores[fact_id], fact_id))
    return [entries[fact_id] for fact_id in order[:k]]


def text_query(question: str) -> str:
    """The question's words OR-ed, for to_tsquery('english', ...): any word may match, more words rank
    higher; stop words and stemming are the database's, STATEMENT_WORDS ours. Only letters and digits pass
    (no tsquery syntax)."""
    words = list(dict.fromkeys(w for w in _WORD.findall(question.lower())
                               if len(w) > 1 and w not in STATEMENT_WORDS))[:32]
    return " | ".join(words)


def text_matches(question: str, k: int, *, exclude_ids=(), without_vector_only: bool = False):
    """The k believed facts whose statement best matches the question's words by full text (ts_rank),
    each annotated with `text_rank`; with `without_vector_only`, only versions with no vector yet.
    Served by the GIN index fact_believed_text (migration 0017) on both engines."""
    query = text_query(question)
    if not query:
        return []
    qs = Fact.objects.believed()
    if without_vector_only:
        qs = qs.filter(embedding__isnull=True)
    if exclude_ids:
        qs = qs.exclude(id__in=list(exclude_ids))
    return (qs.defer("embedding")
            .extra(where=[f"{_TEXT_VECTOR} @@ to_tsquery('english', %s)"], params=[query])
            .annotate(text_rank=RawSQL(f"ts_rank({_TEXT_VECTOR}, to_tsquery('english', %s))", [query]))
            .order_by("-text_rank", "id")[:k])


def semantic_neighbours(vector, k: int, *, exclude_ids=()):
    """The k believed facts nearest to `vector` by cosine distance, each annotated with `distance`.

    The `retracted_at IS NULL` filter matches the partial vector index (HNSW on PostgreSQL, whose
    connections set hnsw.iterative_scan=strict_order so the filtered top-k still yields k rows). A version
    with no vector yet is not in the index and is left out here (on CockroachDB, where NULLs sort first,
    by the filter): full text finds it (fill).
    """
    qs = Fact.objects.believed().filter(embedding__isnull=False)
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
