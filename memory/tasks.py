"""Celery tasks: thin wrappers over memory.vectors (the embedding stage)."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from . import vectors

log = logging.getLogger(__name__)

EMBED_FACTS = "memory.tasks.embed_facts"
# A task embeds for at most this long, then queues its successor: a first load of a whole history does not
# hold one worker past the task time limit, and other tasks get their turn in between.
EMBED_TASK_SECONDS = 300


def embedding_on_commit() -> bool:
    """settings.UNSAY_EMBED_ON_COMMIT, or when unset: on unless Celery is eager (no broker: the task would
    run inline inside whatever wrote the facts; there `ingest_recalls` embeds at its end)."""
    chosen = settings.UNSAY_EMBED_ON_COMMIT
    return (not settings.CELERY_TASK_ALWAYS_EAGER) if chosen is None else chosen


def queue_embedding_after_facts(sender=None, pairs=(), **kwargs):
    """Receiver of memory.signals.facts_changed (sent after commit): new versions wait for their vector."""
    if not any(new for _old, new in pairs) or not embedding_on_commit():
        return
    try:
        embed_facts.delay()
    except Exception:  # noqa: BLE001 - no broker: the periodic run (migration 0017) finds the same backlog
        log.exception("could not queue the embedding of new fact versions; the periodic run will")


@shared_task(name=EMBED_FACTS, autoretry_for=(OperationalError,), max_retries=5, retry_backoff=30, retry_jitter=True)
def embed_facts() -> str:
    """Embed the backlog (memory.vectors.drain); another embedder running makes this one a no-op."""
    report = vectors.drain(max_seconds=EMBED_TASK_SECONDS)
    if report is None:
        return "another embedder is running"
    if vectors.backlog().exists():
        embed_facts.delay()
    return report.summary()
