"""Ingestion: the plain functions the command, the Celery task and the tests all call. A run reads its
document in chunks, each written by the ingester of its kind (recalls.ingesters), in threads when asked.
Loading a document is recalls.documents; a run's start, stop, finish and abandonment are recalls.runs.

    ingest_document(document, source=..., kind=...)   -> IngestRun   (any API-shaped JSON)
    ingest_file(path_or_s3_url, ...)                   -> IngestRun   (.json or bulk .json.zip)
    ingest_from_api(since, until=None, labels=False)   -> IngestRun   (fetch, archive, ingest)
    ingest_incremental()                               -> IngestRun   (from the last successful API run)

Facts are written only through memory.fact_writes.assert_claims / retract_claim, so every supersession
(new version or retraction) reaches memory's supersession hooks after commit; that is where the
sweep hooks in (docs/facts.md).

Atomicity (recalls.ingesters): a record is validated and turned into claims before anything is written;
a malformed record goes to QuarantinedRecord and writes nothing; a valid record's facts, the retraction of
its dropped lots and its RecallRecord commit in one retried transaction, so a record is never
half-written; a database refusal quarantines just that record and the run goes on.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import date, timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

from core import shutdown
from memory.embeddings import get_provider

from . import archive
from .documents import SourceError, load_document, snapshot_date
from .ingesters import LabelIngester, RecallIngester, Tally
from .models import IngestRun
from .openfda import OpenFDAClient
from .runs import (
    Progress,
    finish_run,
    release_run_lock,
    start_run,
    stop_if_asked,
)

log = logging.getLogger(__name__)

CHUNK = 200  # records per batch: one believed-facts query per chunk
INCREMENTAL_OVERLAP_DAYS = 14  # re-read the tail of the last window: late-published records cost nothing if unchanged
INITIAL_WINDOW_DAYS = 90


def resume_run(run_id: int, *, trigger: str = "resume", workers: int = 1) -> IngestRun | None:
    """Ingest a stopped run's snapshot again as a new run (same kind, source and window): what the
    stopped run wrote is unchanged now and skipped; what it did not reach is written. None when there
    is nothing to resume (still running, no snapshot, or a later run of the same snapshot exists)."""
    stopped = IngestRun.objects.filter(pk=run_id).first()
    if (stopped is None or stopped.status == IngestRun.Status.RUNNING or not stopped.snapshot_location
            or IngestRun.objects.filter(snapshot_location=stopped.snapshot_location,
                                        started__gt=stopped.started).exists()):
        return None
    document = load_document(stopped.snapshot_location)
    run = start_run(source=stopped.source, kind=stopped.kind, trigger=trigger, since=stopped.since,
                    until=stopped.until, source_ref=f"resumes run {stopped.pk}: {stopped.source_ref}",
                    snapshot_location=stopped.snapshot_location)
    return ingest_document(document, run=run, workers=workers)


def ingest_document(document: dict, *, source=IngestRun.Source.FILE, kind=IngestRun.Kind.ENFORCEMENT,
                    source_ref="", trigger="command", run: IngestRun | None = None, progress=None,
                    chunk_size=CHUNK, workers: int = 1) -> IngestRun:
    """Ingest every record of an API-shaped document into one IngestRun."""
    records = document.get("results")
    if not isinstance(records, list):
        if run is not None:
            run.status, run.finished, run.error = IngestRun.Status.FAILED, timezone.now(), "no 'results' list"
            run.save(update_fields=["status", "finished", "error"])
            release_run_lock(run)
        raise SourceError("expected an openFDA document with a 'results' list")
    run = run or start_run(source=source, kind=kind, source_ref=source_ref, trigger=trigger)
    run.total = len(records)
    run.save(update_fields=["total"])
    provider = get_provider()
    calls_before = provider.calls
    clock = time.monotonic()
    ingester = (RecallIngester(run, snapshot_updated=snapshot_date(document)) if run.kind == IngestRun.Kind.ENFORCEMENT
                else LabelIngester(run))
    if hasattr(ingester, "prepare"):
        ingester.prepare(records)
    chunks = [records[start:start + chunk_size] for start in range(0, len(records), chunk_size)]

    def record_progress(tally):
        tally.add_to(run)
        run.embedding_calls = provider.calls - calls_before
        run.duration_seconds = time.monotonic() - clock
        run.heartbeat = timezone.now()
        run.save(update_fields=[*Tally.COUNTERS, "embedding_calls", "duration_seconds", "heartbeat"])
        if progress:
            progress(Progress(run.fetched, len(records), run))
        if settings.UNSAY_INGEST_CHUNK_DELAY:  # tests only: time to stop or kill a real process mid-run
            time.sleep(settings.UNSAY_INGEST_CHUNK_DELAY)

    if progress:
        progress(Progress(0, len(records), run))
    try:
        if workers <= 1:
            for done, chunk in enumerate(chunks, 1):
                record_progress(ingester.ingest_chunk(chunk))
                stop_if_asked(done, len(chunks))
        else:
            # Each claim commits in its own transaction, so the run is bound by round trips and commits;
            # chunks touch disjoint recall numbers (or set ids), so they can be written concurrently.
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(_in_thread, ingester.ingest_chunk, chunk) for chunk in chunks]
                try:
                    for done, future in enumerate(as_completed(futures), 1):
                        record_progress(future.result())
                        stop_if_asked(done, len(chunks))
                except shutdown.HandedBack:
                    for future in futures:  # chunks not started stay unwritten; those started finish
                        future.cancel()
                    raise
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, shutdown.HandedBack):
            error, exc.run_id = f"handed back: {exc}", run.pk
        finish_run(run, clock, provider, calls_before, IngestRun.Status.FAILED, error)
        raise
    finish_run(run, clock, provider, calls_before, IngestRun.Status.SUCCEEDED)
    return run


def _in_thread(fn, *args):
    try:
        return fn(*args)
    finally:
        connections.close_all()  # this worker thread's own connection


def ingest_file(location, *, kind=IngestRun.Kind.ENFORCEMENT, source=IngestRun.Source.FILE, trigger="command",
                progress=None, workers=1) -> IngestRun:
    document = load_document(str(location))
    run = start_run(source=source, kind=kind, source_ref=str(location), trigger=trigger,
                    snapshot_location=str(location))
    return ingest_document(document, run=run, progress=progress, workers=workers)


def ingest_from_api(since: date, until: date | None = None, *, labels=False, client: OpenFDAClient | None = None,
                    trigger="command", progress=None, workers=1, include_active=False) -> IngestRun:
    """Fetch a report_date (or label effective_time) window, archive the raw snapshot, ingest it."""
    client = client or OpenFDAClient()
    until = until or timezone.now().date()
    kind = IngestRun.Kind.LABEL if labels else IngestRun.Kind.ENFORCEMENT
    field = "effective_time" if labels else "report_date"
    run = start_run(source=IngestRun.Source.API, kind=kind, trigger=trigger, since=since, until=until,
                    source_ref=f"{client.base_url} {field}:[{since:%Y%m%d} TO {until:%Y%m%d}]"
                               + (" + terminated in window + all Ongoing" if include_active and not labels else ""))
    clock = time.monotonic()
    try:
        if labels:
            document = client.fetch_labels(since, until)
        else:
            document = client.fetch_enforcement(since, until, include_active=include_active)
        run.snapshot_location = archive.archive_snapshot(document, kind=kind, label=f"{since:%Y%m%d}-{until:%Y%m%d}")
        run.save(update_fields=["snapshot_location"])
    except BaseException as exc:
        run.status, run.error, run.finished = IngestRun.Status.FAILED, f"{type(exc).__name__}: {exc}", timezone.now()
        run.duration_seconds = time.monotonic() - clock
        run.save()
        release_run_lock(run)
        raise
    return ingest_document(document, run=run, progress=progress, workers=workers)


def last_successful_api_run(kind=IngestRun.Kind.ENFORCEMENT) -> IngestRun | None:
    return (IngestRun.objects.filter(source=IngestRun.Source.API, kind=kind, status=IngestRun.Status.SUCCEEDED,
                                     until__isnull=False).order_by("-until", "-started").first())


def ingest_incremental(*, labels=False, client=None, trigger="celery", today: date | None = None) -> IngestRun:
    """From the end of the last successful API run (minus an overlap) to today, plus (for recalls)
    every recall terminated in that window and every recall still Ongoing (see fetch_enforcement)."""
    today = today or timezone.now().date()
    kind = IngestRun.Kind.LABEL if labels else IngestRun.Kind.ENFORCEMENT
    last = last_successful_api_run(kind)
    if last:
        since = last.until - timedelta(days=INCREMENTAL_OVERLAP_DAYS)
    else:
        since = today - timedelta(days=INITIAL_WINDOW_DAYS)
    return ingest_from_api(since, today, labels=labels, client=client, trigger=trigger, include_active=not labels)


# --- per-kind ingesters ----------------------------------------------------------------------
