"""Ingest openFDA drug recalls (or labels) into the fact store.

    manage.py ingest_recalls --file PATH          API response .json, bulk .json.zip, an archived snapshot, s3://...
    manage.py ingest_recalls --since 2026-01-01   fetch report_date >= since from the API (archived first)
    manage.py ingest_recalls --labels --since D   the same for drug labels (effective_time)
    manage.py ingest_recalls --labels --file PATH
    (the demo's own slice: manage.py ingest_recalls --file demo/data/demo-slice.json, run by load_demo)

Facts are believed as soon as they are written; their vectors follow (memory.vectors, docs/adr/0017).
--wait-embeddings returns only once every believed fact has its vector (for scripts that query right
after), embedding in this process unless a worker is already at it. Without a broker (Celery eager) no
worker would, so the command always embeds at its end.

SIGTERM finishes the chunk in flight, marks the run handed back and exits with status 3; running the
same command again writes only what the stopped run did not (a second SIGTERM kills).

Ingestion is recalls' (recalls.services); the command lives in corrections, the lowest layer that may read
both the run and what the sweep its writes triggered did, so it asks each of them for its own lines.
"""

import sys
from datetime import date

from django.core.management.base import CommandError
from django.utils import timezone
from tqdm import tqdm

from core import shutdown
from core.commands import MigratedCommand
from corrections.sweep_outcome import describe_triggered_sweeps
from memory import vectors
from memory.tasks import embedding_on_commit
from recalls import services
from recalls.documents import SourceError
from recalls.models import IngestRun
from recalls.openfda import OpenFDAError


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{value!r} is not a date; use YYYY-MM-DD.") from None


class Command(MigratedCommand):
    help = "Ingest openFDA drug enforcement records (recalls) or drug labels into the fact store."

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--file", help="API response JSON, bulk download .json.zip, or archived snapshot.")
        source.add_argument("--since", type=_date, help="Fetch from the openFDA API from this date (YYYY-MM-DD).")
        parser.add_argument("--until", type=_date, help="With --since: last date to fetch (default today).")
        parser.add_argument("--labels", action="store_true", help="Drug labels instead of recalls.")
        parser.add_argument("--workers", type=int, default=4,
                            help="Chunks written concurrently (each claim is its own transaction). Default 4.")
        parser.add_argument("--no-progress", action="store_true", help="No live progress bar.")
        parser.add_argument("--wait-embeddings", action="store_true",
                            help="Return once every believed fact has its vector (embedding here if no worker is).")

    def handle(self, *args, **options):
        started = timezone.now()
        bar = None

        def progress(p):
            nonlocal bar
            if options["no_progress"]:
                return
            if bar is None:
                bar = tqdm(total=p.total, unit="rec", desc="ingest", file=self.stderr._out, dynamic_ncols=True)
            bar.update(p.done - bar.n)
            run = p.run
            bar.set_postfix(new=run.new_facts, versions=run.new_versions, unchanged=run.unchanged,
                            quarantined=run.quarantined, embeds=run.embedding_calls, refresh=False)

        kind = IngestRun.Kind.LABEL if options["labels"] else IngestRun.Kind.ENFORCEMENT
        try:
            with shutdown.stop_on_sigterm():
                if options["file"]:
                    run = services.ingest_file(options["file"], kind=kind, progress=progress,
                                               workers=options["workers"])
                else:
                    run = services.ingest_from_api(options["since"], options["until"], labels=options["labels"],
                                                   progress=progress, workers=options["workers"])
        except (SourceError, OpenFDAError, LookupError) as exc:
            raise CommandError(str(exc)) from exc
        except shutdown.HandedBack as exc:
            if bar is not None:
                bar.close()
                bar = None
            self.stderr.write(f"Handed back: run {getattr(exc, 'run_id', '?')} {exc}.")
            sys.exit(3)
        finally:
            if bar is not None:
                bar.close()
        rate = f"{run.fetched / run.duration_seconds:.0f} records/s" if run.duration_seconds else ""
        self.stdout.write(
            f"Run {run.pk} {run.status}: {run.fetched} records, {run.new_facts} new facts, "
            f"{run.new_versions} new versions, {run.retracted} retracted, {run.unchanged} unchanged, "
            f"{run.quarantined} quarantined, {run.older_than_believed} older than believed, "
            f"{run.embedding_calls} embedding calls ({run.embedding_provider}), "
            f"{run.duration_seconds:.1f}s {rate}"
        )
        if run.snapshot_location:
            self.stdout.write(f"Snapshot: {run.snapshot_location}")
        if run.quarantined:
            reasons = {}
            for reason in run.quarantine.values_list("reason", flat=True):
                reasons[reason] = reasons.get(reason, 0) + 1
            for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1])[:10]:
                self.stdout.write(f"  quarantined {count}: {reason}")
        self.stdout.write(describe_triggered_sweeps(started))
        self._embeddings(options)

    def _embeddings(self, options):
        if not options["wait_embeddings"] and embedding_on_commit():
            self.stdout.write(f"Embeddings: {vectors.progress().without_vector} fact versions wait for their "
                              "vector (a worker adds them; `manage.py status` shows the backlog).")
            return
        bar = None
        if not options["no_progress"]:
            bar = tqdm(total=vectors.progress().without_vector, unit="fact", desc="embed", file=self.stderr._out,
                       dynamic_ncols=True)
        try:  # a SIGTERM here loses nothing: the backlog is a query, the next embedder finds the rest
            report = vectors.drain(wait=True, on_batch=lambda r: bar.update(r.facts - bar.n) if bar else None)
        finally:
            if bar is not None:
                bar.close()
        self.stdout.write(f"Embeddings: {report.summary()}; {vectors.progress().without_vector} left.")
