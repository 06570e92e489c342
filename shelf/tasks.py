"""Celery task: a thin wrapper over shelf.quarantine.match_facts, taking JSON ids, and the receiver that
queues it.

    queue_shelf_match_after_facts(pairs=...)  receiver of memory.signals.facts_changed (sent after commit)
    match_recall_facts(fact_ids)              the task: new recall fact versions against the shelf

The receiver only queues: matching every site's units against a recall is work, and the process that
wrote the facts (an ingest's chunk threads, an escalation, a web request) is not the place to do it or
to wait for it. Every writer of facts sends facts_changed, so every kind of change reaches the shelf as
it reaches standing answers (the sweep is queued from the same signal). Without a broker Celery runs the
task inline, after the writer's commit, as matching ran before it was a task.
"""

import logging

from celery import shared_task
from django.db import OperationalError

from . import quarantine

log = logging.getLogger(__name__)

MATCH_RECALL_FACTS = "shelf.tasks.match_recall_facts"


def queue_shelf_match_after_facts(sender=None, pairs=(), **kwargs):
    """Receiver of memory.signals.facts_changed: one task for the transaction's new fact versions."""
    new_ids = sorted({new for _old, new in pairs if new})
    if not new_ids:
        return
    try:
        match_recall_facts.delay(new_ids)
    except Exception:  # noqa: BLE001 - the facts already committed; `manage.py shelf_match` runs it again
        log.exception("shelf: could not match units for facts %s; run `manage.py shelf_match`", new_ids)


# Linking is idempotent (one task per recall and site, each unit linked once), so a retry is safe.
@shared_task(name=MATCH_RECALL_FACTS, autoretry_for=(OperationalError,), max_retries=5, retry_backoff=30,
             retry_jitter=True)
def match_recall_facts(fact_ids: list[int]) -> str:
    tasks = quarantine.match_facts(fact_ids)
    return f"facts {fact_ids}: {len(tasks)} shelf tasks touched"
