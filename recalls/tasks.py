"""Celery tasks: thin wrappers over recalls.services."""

from celery import shared_task

from . import services
from .openfda import OpenFDAError


@shared_task(autoretry_for=(OpenFDAError,), max_retries=3, retry_backoff=600, retry_jitter=True)
def ingest_openfda(labels: bool = False) -> dict:
    """Weekly incremental ingest (scheduled by django-celery-beat, see migration 0002)."""
    run = services.ingest_incremental(labels=labels, trigger="celery")
    return {"run": run.pk, "status": run.status, "fetched": run.fetched, "new_facts": run.new_facts,
            "new_versions": run.new_versions, "quarantined": run.quarantined}
