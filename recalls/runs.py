"""An ingestion run's lifecycle around its IngestRun row: started holding its run lock (core.runlock),
stopped between chunks when a stop is asked for, finished with its status, and found abandoned when its
process is gone (then queued to be resumed from its snapshot)."""

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core import enqueue, runlock, shutdown
from memory.embeddings import get_provider

from .models import IngestRun

log = logging.getLogger(__name__)


@dataclass
class Progress:
    done: int
    total: int
    run: IngestRun


RUN_LOCK = "ingest_run"  # core.runlock kind: a live ingest run holds the advisory lock of its id


def abandon_dead_runs(*, resume: bool = True) -> int:
    """Runs still 'running' whose process is gone: mark them failed, so the operations page stops
    showing them as live, and resume them. What they wrote is kept (each record commits on its own).

    On PostgreSQL a live run holds the advisory lock of its id (core.runlock): a killed run is seen at
    once. On CockroachDB (no advisory locks) a run is dead once its heartbeat is older than
    UNSAY_INGEST_HEARTBEAT_TIMEOUT. resume: a dead run whose snapshot was archived (or read from a
    file) is queued for the worker to ingest again (resume_run: only what is still missing is
    written); without a worker (Celery eager) the next run of the same file or window does it."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.UNSAY_INGEST_HEARTBEAT_TIMEOUT)
    dead, by_lock = runlock.dead_runs(RUN_LOCK, IngestRun.objects.filter(status=IngestRun.Status.RUNNING),
                                      Q(heartbeat__lt=cutoff) | Q(heartbeat__isnull=True, started__lt=cutoff))
    why = ("abandoned: its process is gone (its run lock was free)" if by_lock
           else "abandoned: no heartbeat (process killed?)") + "; the next run writes what this one did not"
    ids = list(dead.values_list("id", flat=True))
    if not ids:
        return 0
    count = IngestRun.objects.filter(pk__in=ids, status=IngestRun.Status.RUNNING).update(
        status=IngestRun.Status.FAILED, finished=now, error=why)
    log.warning("ingest runs %s: %s", ids, why)
    if resume and not settings.CELERY_TASK_ALWAYS_EAGER:
        transaction.on_commit(lambda: _queue_resumptions(ids))
    return count


RESUME_TASK = "recalls.tasks.resume_ingest"


def _queue_resumptions(run_ids) -> None:
    # The task is named, not imported: recalls.tasks imports the ingestion code (core.enqueue).
    for run_id in IngestRun.objects.filter(pk__in=run_ids).exclude(snapshot_location="").values_list("id", flat=True):
        try:
            enqueue.send(RESUME_TASK, run_id)
        except Exception:  # noqa: BLE001 - no broker: the next scheduled or manual run covers it
            log.exception("could not queue the resumption of ingest run %s", run_id)


def start_run(*, source, kind=IngestRun.Kind.ENFORCEMENT, source_ref="", trigger="command", since=None,
              until=None, snapshot_location="") -> IngestRun:
    """A new run, holding its run lock (core.runlock) from before its row is visible until finish_run."""
    abandon_dead_runs()
    now = timezone.now()
    with transaction.atomic():
        run = IngestRun.objects.create(
            source=source, kind=kind, source_ref=str(source_ref)[:500], trigger=trigger, since=since, until=until,
            snapshot_location=snapshot_location[:500], started=now, heartbeat=now,
            embedding_provider=get_provider().name,
        )
        run.run_lock = runlock.RunLock(RUN_LOCK, run.pk)
        run.run_lock.acquire()
    return run


def release_run_lock(run) -> None:
    lock = getattr(run, "run_lock", None)
    if lock is not None:
        lock.release()


def stop_if_asked(done: int, chunks: int) -> None:
    """Between chunks: a stop was asked for (SIGTERM, core.shutdown); every chunk so far is written."""
    if shutdown.requested() and done < chunks:
        raise shutdown.HandedBack(f"stopped on request (SIGTERM) after {done} of {chunks} chunk(s); the next "
                                  "run of the same snapshot writes what this one did not")


def finish_run(run, clock, provider, calls_before, status, error=""):
    run.status = status
    run.error = error[:5000]
    run.finished = timezone.now()
    run.duration_seconds = time.monotonic() - clock
    run.embedding_calls = provider.calls - calls_before
    run.save()
    release_run_lock(run)  # after the final status: a free lock never meets a 'running' row
