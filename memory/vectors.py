"""The embedding stage: fact versions are written without a vector (memory.fact_writes) and get it here,
after their write committed (docs/adr/0017).

    backlog()                      -> QuerySet of believed versions with no vector yet (the work, a query)
    embed_batch(size=...)          -> int   one batch of the backlog embedded, in one provider call
    embed_backlog(max_seconds=...) -> EmbedReport   batches until the backlog is empty
    drain(max_seconds=..., wait=...) -> EmbedReport | None   embed_backlog as the one embedder (the task, the command)
    progress()                     -> Progress      believed versions, how many still without a vector

There is no flag and no claim: the backlog is what the database says it is, so a batch that crashed
before its UPDATE committed is simply in the next batch, and a vector that landed is never asked for
again. One embedder runs at a time where the database has advisory locks (drain); elsewhere two at once
may embed the same batch, and the UPDATE writes only where the vector is still missing, so the second
write changes nothing: work is wasted, never wrong.

A vector landing is not a change of belief: it announces nothing (no memory.signals.facts_changed), so
it re-decides nothing and makes no answer stale. It is the one in-place UPDATE of a fact's row besides
closing its belief, and only from NULL (the trigger of migration 0017 refuses the rest).
"""

import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction

from core import runlock
from memory.embeddings import VectorCache, embedding_text, get_provider, to_sql_vector
from memory.models import Fact

BATCH = 256  # fact versions per batch: one provider call over their distinct texts, one UPDATE
LOCK = ("embedding", 0)  # the advisory lock the one embedder holds (core.runlock)


def backlog():
    """Believed fact versions with no vector yet (index fact_believed_unembedded)."""
    return Fact.objects.believed().filter(embedding__isnull=True)


@dataclass
class Progress:
    believed: int
    without_vector: int

    @property
    def with_vector(self) -> int:
        return self.believed - self.without_vector

    @property
    def percent(self) -> int:
        """Share of believed versions with their vector, rounded down (100 only when none is missing)."""
        if not self.believed:
            return 100
        return self.with_vector * 100 // self.believed


def progress() -> Progress:
    return Progress(believed=Fact.objects.believed().count(), without_vector=backlog().count())


def status_section() -> dict:
    """The embedding stage in `manage.py status` and the staff status page (core.health)."""
    now = progress()
    return {"embeddings": {"provider": settings.UNSAY_EMBEDDINGS, "believed_facts": now.believed,
                           "with_vector": now.with_vector, "backlog": now.without_vector,
                           "percent_embedded": now.percent}}


@dataclass
class EmbedReport:
    facts: int = 0  # versions given their vector by this run
    texts: int = 0  # distinct texts sent to the provider
    calls: int = 0  # provider calls (one per batch that had work)
    seconds: float = 0.0
    batches: list = field(default_factory=list, repr=False)

    def summary(self) -> str:
        rate = self.facts / self.seconds if self.seconds else 0.0
        return (f"{self.facts} fact versions embedded ({self.texts} distinct texts, {self.calls} provider calls) "
                f"in {self.seconds:.1f} s, {rate:.0f} facts/s")


def embed_batch(size: int = BATCH, *, cache: VectorCache | None = None, after_id: int = 0) -> tuple[int, int, int]:
    """Embed up to `size` versions of the backlog with ids above `after_id`, lowest ids first.
    Returns (versions written, last id seen, distinct texts sent); (0, after_id, 0) when nothing is left.

    The provider is called once, over the batch's distinct texts (lots of one recall share one text,
    memory.embeddings.embedding_text), and not at all for texts `cache` holds from earlier batches."""
    provider = get_provider()
    rows = list(backlog().filter(id__gt=after_id).order_by("id").values_list("id", "statement", "lot")[:size])
    if not rows:
        return 0, after_id, 0
    texts = [embedding_text(statement, lot) for _, statement, lot in rows]
    texts_before = provider.texts
    vectors = cache.embed(provider, texts) if cache is not None else provider.embed(texts)
    ids = [row[0] for row in rows]
    written = _write_vectors(ids, [to_sql_vector(v) for v in vectors])
    return written, ids[-1], provider.texts - texts_before


def _write_vectors(ids: list[int], vectors: list[str]) -> int:
    """One UPDATE, only where the vector is still missing (idempotent; the trigger allows NULL -> vector)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memory_fact AS m SET embedding = v.embedding::vector"
            " FROM unnest(%s::bigint[], %s::text[]) AS v(id, embedding)"
            " WHERE m.id = v.id AND m.embedding IS NULL",
            [ids, vectors],
        )
        return cursor.rowcount


def embed_backlog(*, size: int = BATCH, max_seconds: float | None = None, on_batch=None) -> EmbedReport:
    """Embed the backlog batch by batch until it is empty (or `max_seconds` passed: the rest is the next
    run's). Versions written while it runs are picked up too: each batch asks again, from where it was."""
    provider = get_provider()
    calls_before = provider.calls
    cache = VectorCache()
    report = EmbedReport()
    started = time.monotonic()
    after_id = 0
    while True:
        written, last_id, texts = embed_batch(size, cache=cache, after_id=after_id)
        if last_id == after_id:
            if after_id == 0:
                break
            after_id = 0  # versions written below the last id since (an older key's new version has a higher id; a
            continue      # retried batch of another embedder may not have landed): one more pass from the start
        after_id = last_id
        report.facts += written
        report.texts += texts
        report.batches.append(written)
        if on_batch:
            on_batch(report)
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            break
    report.calls = provider.calls - calls_before
    report.seconds = time.monotonic() - started
    return report


def drain(*, max_seconds: float | None = None, wait: bool = False, poll: float = 1.0,
          on_batch=None) -> EmbedReport | None:
    """embed_backlog as the one embedder: None, and nothing done, when another holds the lock, unless
    `wait` (`ingest_recalls --wait-embeddings`): then wait for the backlog to empty, embedding in its stead
    if it stops. Without advisory locks (CockroachDB) it embeds alongside any other embedder."""
    while True:
        lock = runlock.RunLock(*LOCK)
        if lock.acquire() or not runlock.supported():
            try:
                return embed_backlog(max_seconds=max_seconds, on_batch=on_batch)
            finally:
                lock.release()
        if not wait:
            return None
        if not backlog().exists():
            return EmbedReport()
        time.sleep(poll)
