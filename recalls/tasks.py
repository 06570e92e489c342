"""Celery tasks: thin wrappers over recalls.services."""

import logging

from celery import shared_task

from core import shutdown

from . import services
from .models import IngestRun
from .openfda import OpenFDAError

log = logging.getLogger(__name__)


@shared_task(autoretry_for=(OpenFDAError,), max_retries=3, retry_backoff=600, retry_jitter=True)
def ingest_openfda(labels: bool = False) -> dict:
    """Weekly incremental ingest (scheduled by django-celery-beat, see migration 0002). On SIGTERM
    (core.shutdown) the run stops after its chunk in flight and is resumed from its archived snapshot."""
    try:
        run = services.ingest_incremental(labels=labels, trigger="celery")
    except shutdown.HandedBack as exc:
        return _handed_back(exc)
    return {"run": run.pk, "status": run.status, "fetched": run.fetched, "new_facts": run.new_facts,
            "new_versions": run.new_versions, "quarantined": run.quarantined}


@shared_task(name="recalls.tasks.resume_ingest")
def resume_ingest(run_id: int) -> dict:
    """Ingest a stopped or killed run's snapshot again (services.resume_run): only what it missed is written."""
    try:
        run = services.resume_run(run_id)
    except shutdown.HandedBack as exc:
        return _handed_back(exc)
    if run is None:
        return {"resumed": None, "of": run_id}
    return {"resumed": run.pk, "of": run_id, "status": run.status, "new_facts": run.new_facts,
            "new_versions": run.new_versions, "unchanged": run.unchanged}


def _handed_back(exc) -> dict:
    """The worker is stopping: the run is marked handed back; its snapshot is resumed by the next worker."""
    run = IngestRun.objects.filter(pk=getattr(exc, "run_id", None)).first()
    log.warning("ingest handed back: %s", exc)
    if run is not None and run.snapshot_location:
        try:
            resume_ingest.delay(run.pk)
        except Exception:  # noqa: BLE001 - no broker: the next scheduled run covers the same window
            log.exception("could not queue the resumption of ingest run %s", run.pk)
    return {"handed_back": run.pk if run else None}
